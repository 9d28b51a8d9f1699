"""Write the committed format fixtures of the current on-disk format version.

Run once per new format version (``python tests/format_fixtures/make_fixtures.py v<N>``);
never regenerate an existing version: later trajstore releases must still open it.
Every value is a function of its global step number (see ``expected_step``), so the test
can check what it reads without a second copy of the data.
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


LAYOUTS = {
    # name: (capacity, routing kwargs, steps per episode)
    "jpeg_hdf5": (None, {}, [5, 5, 3]),
    "png_memmap_ring": (8, {"kind_kwargs": {"image": {"format": "PNG"}},
                            "key_storage_cls": {"observation/joints": MemmapStorage}}, [5, 5, 3]),
    "video_hdf5": (None, {"kind_storage_cls": "video"}, [6, 4]),
}


def write(root: Path, name: str) -> None:
    capacity, routing, episodes = LAYOUTS[name]
    if routing.get("kind_storage_cls") == "video":
        from trajstore.storages import VideoStorage

        routing = {"kind_storage_cls": {"image": VideoStorage}}
    space = fixture_space()
    routing["default_kwargs"] = {"chunk_rows": 8}  # HDF5 allocates whole chunks: keep the fixture small
    rb = ReplayBuffer.create(DictStorage, space, cache_path=root / name, capacity=capacity,
                             **dict_storage_kwargs_from_space(space, **routing))
    g = 0
    for n in episodes:
        for _ in range(n):
            rb.append(expected_step(g))
            g += 1
        rb.end_episode()
    rb.close()


if __name__ == "__main__":
    root = Path(__file__).parent / sys.argv[1]
    for layout in LAYOUTS:
        write(root, layout)
        (root / layout / "writer.lock").unlink()
