"""A buffer for the preview tests: episode 0 has 300 steps, episode 1 has 40; every frame is distinct noise
(PNG, lossless), so a tile on a sheet can be matched to the step it shows."""

from __future__ import annotations

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, ImageStorage, dict_storage_kwargs_from_space

H, W = 24, 32  # the main camera
WH, WW = 12, 20  # the wrist camera
FPS = 10
LENGTHS = [300, 40]
DATA = [{"task": "push the T to the goal", "success": True, "seed": 7}, {"task": "stack", "success": False}]


def step_space(timestamp: bool = False) -> DictSpace:
    cam = {"kind": "image", "layout": "HWC", "fps": FPS}
    obs = {"pixels": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata=cam),
           "wrist": BoxSpace(0, 255, (WH, WW, 3), np.uint8, metadata=cam),
           "state": BoxSpace(-1e6, 1e6, (3,), np.float32, metadata={"units": "m"}),
           "wide": BoxSpace(-1e6, 1e6, (32,), np.float32)}
    leaves = {"observation": DictSpace(obs), "action": BoxSpace(-1, 1, (2,), np.float32),
              "reward": BoxSpace(-1e6, 1e6, (), np.float32), "done": BinarySpace(()),
              "note": TextSpace(max_length=8)}
    if timestamp:
        leaves["timestamp"] = BoxSpace(0, 1e9, (), np.float64)
    return DictSpace(leaves)


def steps(g0: int, n: int, timestamp: bool = False) -> dict:
    g = np.arange(g0, g0 + n)
    rng = np.random.default_rng(g0)
    obs = {"pixels": rng.integers(0, 256, (n, H, W, 3), dtype=np.uint8),
           "wrist": rng.integers(0, 256, (n, WH, WW, 3), dtype=np.uint8),
           "state": np.stack([g, -g, g / 2], 1).astype(np.float32),
           "wide": np.repeat(g[:, None], 32, 1).astype(np.float32)}
    out = {"observation": obs, "action": np.stack([np.sin(g / 10), np.cos(g / 10)], 1).astype(np.float32),
           "reward": (g % 7 == 0).astype(np.float32), "done": g == g0 + n - 1,
           "note": np.array([f"s{i}" for i in g])}
    if timestamp:
        out["timestamp"] = 100.0 + 0.04 * g  # 25 Hz clock, not the cameras' 10 fps
    return out


def make_buffer(path, *, timestamp: bool = False, lengths=LENGTHS):
    space = step_space(timestamp)
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path,
                             **dict_storage_kwargs_from_space(space, kind_storage_cls={"image": ImageStorage},
                                                              kind_kwargs={"image": {"format": "PNG"}}))
    g = 0
    for n, d in zip(lengths, DATA):
        rb.extend(steps(g, n, timestamp))
        g += n
        rb.end_episode(**d)
    rb.close()
    return path
