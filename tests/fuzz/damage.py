"""Damaged buffer folders: a small buffer holding every kind of file, the mutations applied to
its files, and "open and read everything", the check each damaged copy must pass.

The buffer (:func:`build_buffer`) is a ring that has wrapped, with JPEG, PNG (RGB and 16-bit
depth) and video cameras, a memmap leaf, an HDF5 file (gzip; a text leaf, a bool leaf), several
episodes with JSON data and final observations, and committed statistics. :func:`read_everything`
opens it read-only and reads every step, every episode, every final observation and the stats.

A mutation (:class:`Mutation`) is a truncation to ``length`` bytes or a flip of bit ``bit`` of
the byte at ``offset``; :func:`plan_mutations` spreads them over a file (seeded): the header
region densely, the rest sparsely.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, ImageStorage, MemmapStorage, dict_storage_kwargs_from_space
from trajstore.testing import moving_scene

H = W = 16
CAPACITY = 24
#: Episode lengths recorded into the ring of CAPACITY steps: 45 steps in all, so it wraps.
EPISODES = (7, 9, 5, 11, 6, 7)
#: Bytes at the start of a file whose every offset may hold a header field: bit flips are dense there.
HEADER_BYTES = 96


def have_video() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def step_space(video: bool) -> DictSpace:
    image = {"kind": "image", "layout": "HWC", "fps": 10}
    obs = {
        "jpeg": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata=image),
        "png": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata=image),
        "depth": BoxSpace(0, 65535, (H, W), np.uint16, metadata={"kind": "depth"}),
        "joints": BoxSpace(-1, 1, (4,), np.float32),
        "state": BoxSpace(-10, 10, (3,), np.float32),
    }
    if video:
        obs["video"] = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata=image)
    return DictSpace({"observation": DictSpace(obs), "action": BoxSpace(-1, 1, (2,), np.float32),
                      "task": TextSpace(8), "done": BinarySpace()})


def build_buffer(folder: Path, *, video: bool | None = None) -> Path:
    """Record the buffer described in the module docstring into ``folder`` (new); returns it."""
    from trajstore.storages import VideoStorage

    video = have_video() if video is None else video
    space = step_space(video)
    key_storage_cls = {"observation/joints": MemmapStorage}
    key_kwargs = {"observation/png": {"format": "PNG", "chunk_bytes": 2048},
                  "observation/jpeg": {"chunk_bytes": 4096}, "observation/depth": {"chunk_bytes": 4096}}
    if video:
        key_storage_cls["observation/video"] = VideoStorage
        key_kwargs["observation/video"] = {"segment_frames": 8, "gop_size": 4, "preset": "ultrafast"}
    kwargs = dict_storage_kwargs_from_space(
        space, kind_storage_cls={"image": ImageStorage, "depth": ImageStorage},
        kind_kwargs={"depth": {"format": "PNG"}},
        key_storage_cls=key_storage_cls, key_kwargs=key_kwargs, default_kwargs={"compression": "gzip"})
    rng = np.random.default_rng(0)

    with ReplayBuffer.create(DictStorage, space, cache_path=folder, capacity=CAPACITY, **kwargs) as rb:
        g = 0
        for k, n in enumerate(EPISODES):
            for _ in range(n):
                rb.append(step(g, video, rng))
                g += 1
            rb.end_episode(final_observation=observation(g, video), task=f"episode {k}", success=k % 2 == 0,
                           seed=k, info={"lengths": [n, n + 1]})
        rb.stats()  # commits stats.json
    return folder


def observation(g: int, video: bool) -> dict:
    """The observation of global step ``g`` (frames of a moving scene, values derived from ``g``)."""
    frames = _scene()
    out = {"jpeg": frames[g % 64], "png": frames[(g + 7) % 64],
           "depth": (frames[g % 64, :, :, 0].astype(np.uint16) * 257),
           "joints": np.full(4, (g % 10) / 10, np.float32), "state": np.array([g / 10, -1, 1], np.float32)}
    if video:
        out["video"] = frames[(g + 3) % 64]
    return out


def step(g: int, video: bool, rng: np.random.Generator) -> dict:
    return {"observation": observation(g, video), "action": rng.uniform(-1, 1, 2).astype(np.float32),
            "task": f"t{g}", "done": g % 2 == 0}


_SCENE: list[np.ndarray] = []


def _scene() -> np.ndarray:
    if not _SCENE:
        _SCENE.append(moving_scene(64, H, W, seed=5))
    return _SCENE[0]


#: Steps a writer appends to a damaged copy (:func:`write_more`), with global step numbers from here.
MORE_STEPS, MORE_FROM = 3, 60


def write_more(folder: Path) -> None:
    """Open ``folder`` for writing, append :data:`MORE_STEPS` steps as one episode, and close."""
    with ReplayBuffer.load_from(folder, read_only=False) as rb:
        video = "video" in rb.space["observation"].spaces
        rng = np.random.default_rng(1)
        for g in range(MORE_FROM, MORE_FROM + MORE_STEPS):
            rb.append(step(g, video, rng))
        rb.end_episode(task="more")


def check_more(folder: Path) -> None:
    """The steps :func:`write_more` appended read back as the newest steps, in one episode."""
    with ReplayBuffer.load_from(folder) as rb:
        newest = rb[np.arange(len(rb) - MORE_STEPS, len(rb))]
        state = newest["observation"]["state"][:, 0]
        assert np.allclose(state, np.arange(MORE_FROM, MORE_FROM + MORE_STEPS) / 10), state
        assert list(newest["task"]) == [f"t{g}" for g in range(MORE_FROM, MORE_FROM + MORE_STEPS)]
        assert rb.episodes[-1].data == {"task": "more"} and len(rb.episodes[-1]) == MORE_STEPS


def read_everything(folder: Path) -> int:
    """Open ``folder`` read-only and read every step (all at once and scattered), every episode,
    its data and final observation, and the statistics. Returns the number of steps read."""
    with ReplayBuffer.load_from(folder) as rb:
        n = len(rb)
        everything = rb[:]
        scattered = rb[np.arange(n)[::-3]]
        assert len(everything["action"]) == n and len(scattered["task"]) == len(range(n)[::-3])
        rb[n - 1]
        for k, episode in enumerate(rb.episodes):
            episode.data
            rb.final_observation(k)
        rb.stats()
        return n


@dataclass(frozen=True)
class Mutation:
    """A truncation to ``length`` bytes (``kind="truncate"``) or a flip of bit ``bit`` of byte ``offset``."""

    path: str  # relative to the buffer folder
    kind: str
    offset: int = 0
    bit: int = 0

    def apply(self, data: bytes) -> bytes:
        if self.kind == "truncate":
            return data[: self.offset]
        changed = bytearray(data)
        changed[self.offset] ^= 1 << self.bit
        return bytes(changed)

    def __str__(self) -> str:
        if self.kind == "truncate":
            return f"{self.path}: truncated to {self.offset} bytes"
        return f"{self.path}: bit {self.bit} of byte {self.offset} flipped"


def buffer_files(folder: Path) -> list[str]:
    """Every file of the buffer folder, relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def plan_mutations(folder: Path, flips_per_file: int, seed: int = 0) -> list[Mutation]:
    """Truncations (0, 1, 8, 32, half, len-1 bytes) of every file, and ``flips_per_file`` bit flips per
    file: about half of them at the first :data:`HEADER_BYTES` offsets (spread evenly over them), the
    rest at random offsets past the header. A file shorter than the flips gets one per byte."""
    rng = random.Random(seed)
    out: list[Mutation] = []
    for rel in buffer_files(folder):
        size = os.path.getsize(folder / rel)
        for length in sorted({0, 1, 8, 32, size // 2, size - 1}):
            if 0 <= length < size:
                out.append(Mutation(rel, "truncate", length))
        if size <= flips_per_file:
            offsets = list(range(size))
        else:
            head = min(size, HEADER_BYTES)
            n_head = min(head, (flips_per_file + 1) // 2)
            offsets = sorted({int(i * head / n_head) for i in range(n_head)})
            offsets += sorted(rng.sample(range(head, size), min(size - head, flips_per_file - len(offsets))))
        out += [Mutation(rel, "flip", off, rng.randrange(8)) for off in offsets]
    return out


def storage_folder(folder: Path, rel: str) -> str | None:
    """The storage folder (relative) holding file ``rel``: the nearest parent with a storage.json."""
    parent = (folder / rel).parent
    while parent != folder and parent != parent.parent:
        if (parent / "storage.json").exists():
            return str(parent.relative_to(folder))
        parent = parent.parent
    return None
