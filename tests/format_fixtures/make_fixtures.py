"""Write the committed format fixtures of the current on-disk format version.

Run once per new format version (``python tests/format_fixtures/make_fixtures.py v<N>``);
never regenerate an existing version: later trajstore releases must still open it.
Every value is a function of its global step number (see ``expected_step``), so the test
can check what it reads without a second copy of the data.

Since format version 2 (:data:`EPISODE_FEATURES_SINCE`) each episode ``k`` ends with
``expected_episode_data(k)`` and the final observation ``expected_step(stop)["observation"]``,
and :data:`INTERRUPTED_TAIL` more steps are left open and ended as interrupted by a writable reopen.

Since format version 3 (the episode log, :data:`UNCHECKED_BOUNDS_SINCE`) the buffers are made with
``check_bounds=False``: ``expected_step``'s joints leave the space's bounds after step 10, which
folders of versions 1 and 2 stored before bounds were checked.

Fixture set 4 keeps the buffer format of 3 and holds ImageStorage format version 2
(:data:`SHARED_JPEG_HEADER_SINCE`): JPEG frames stored without the header they share, kept once in
the storage's ``storage.json``.

Fixture set 5 keeps the buffer format of 3 and starts ``trajstore.json`` with the commit number
(:data:`COMMIT_NUMBER_SINCE`), the key readers' change signature reads; older sets have none.

Fixture set 6 keeps the buffer format of 3 and adds the episode index (:data:`EPISODE_INDEX_SINCE`):
``episodes.000000.idx`` beside the log, named by ``trajstore.json``'s ``"episodes"/"log"/"index"``
with the crc32 of its committed bytes (``"index_crc32"``); older sets have no index (a writer builds
it when it reopens them). (Set 6 was regenerated once, before any release, when the crc was added.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, MemmapStorage, dict_storage_kwargs_from_space

H, W = 16, 24


def fixture_space() -> DictSpace:
    return DictSpace({
        "observation": DictSpace({
            "camera": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 5}),
            "joints": BoxSpace(-10, 10, (3,), np.float32, metadata={"units": "rad"}),
        }),
        "action": BoxSpace(-1, 1, (2,), np.float64),
        "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
        "done": BinarySpace(),
        "task": TextSpace(12),
    })


def expected_step(g: int) -> dict:
    """The step written at global step ``g``: a smooth frame whose colour encodes ``g``."""
    yy, xx = np.mgrid[0:H, 0:W]
    base = np.array([(g * 9) % 160 + 40, (g * 5) % 160 + 40, (g * 3) % 160 + 40], np.float64)
    frame = np.clip(base[None, None, :] + 0.5 * yy[..., None] + 0.25 * xx[..., None], 0, 255).astype(np.uint8)
    return {"observation": {"camera": frame, "joints": np.array([g, -g, g / 4], np.float32)},
            "action": np.array([np.sin(g), np.cos(g)], np.float64), "reward": np.float32(g / 10),
            "done": g % 5 == 4, "task": f"task {g % 3}"}


#: First format version whose fixtures hold episode data, final observations and an interrupted episode.
EPISODE_FEATURES_SINCE = 2
#: Steps of the episode left open at the end of those fixtures (then ended as interrupted).
INTERRUPTED_TAIL = 2


def expected_episode_data(k: int) -> dict:
    """The JSON data of episode ``k``."""
    return {"task": f"task {k % 3}", "success": k % 2 == 0, "seed": 100 + k, "scores": [k, k / 4, None]}


#: First fixture set whose JPEG image storages are of format version 2 (the shared header).
SHARED_JPEG_HEADER_SINCE = 4

#: First fixture set whose ``trajstore.json`` starts with the commit number.
COMMIT_NUMBER_SINCE = 5

#: First fixture set with the episode index beside the episode log.
EPISODE_INDEX_SINCE = 6

#: First format version whose fixtures were made with ``check_bounds=False``.
UNCHECKED_BOUNDS_SINCE = 3


def checks_bounds(version: str) -> bool:
    """Whether the fixtures of ``version`` check bounds (see the module docstring)."""
    return int(version.lstrip("v")) < UNCHECKED_BOUNDS_SINCE


def has_episode_features(version: str) -> bool:
    """Whether the fixtures of ``version`` (``"v2"``) were written with episode data, finals and a tail."""
    return int(version.lstrip("v")) >= EPISODE_FEATURES_SINCE


LAYOUTS = {
    # name: (capacity, routing kwargs, steps per episode)
    "jpeg_hdf5": (None, {}, [5, 5, 3]),
    "png_memmap_ring": (8, {"kind_kwargs": {"image": {"format": "PNG"}},
                            "key_storage_cls": {"observation/joints": MemmapStorage}}, [5, 5, 3]),
    "video_hdf5": (None, {"kind_storage_cls": "video"}, [6, 4]),
}


def write(root: Path, name: str, check_bounds: bool) -> None:
    capacity, routing, episodes = LAYOUTS[name]
    if routing.get("kind_storage_cls") == "video":
        from trajstore.storages import VideoStorage

        routing = {"kind_storage_cls": {"image": VideoStorage}}
    space = fixture_space()
    routing["default_kwargs"] = {"chunk_rows": 8}  # HDF5 allocates whole chunks: keep the fixture small
    rb = ReplayBuffer.create(DictStorage, space, cache_path=root / name, capacity=capacity,
                             check_bounds=check_bounds, **dict_storage_kwargs_from_space(space, **routing))
    g = 0
    for k, n in enumerate(episodes):
        for _ in range(n):
            rb.append(expected_step(g))
            g += 1
        rb.end_episode(final_observation=expected_step(g)["observation"], **expected_episode_data(k))
    for _ in range(INTERRUPTED_TAIL):
        rb.append(expected_step(g))
        g += 1
    rb.close()  # without end_episode: the tail stays open...
    ReplayBuffer.load_from(root / name, read_only=False).close()  # ...until a writer reopens the folder


if __name__ == "__main__":
    root = Path(__file__).parent / sys.argv[1]
    for layout in LAYOUTS:
        write(root, layout, checks_bounds(sys.argv[1]))
        (root / layout / "writer.lock").unlink()
