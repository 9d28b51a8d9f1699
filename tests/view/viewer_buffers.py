"""Buffers for the viewer's tests. Every frame of the main camera is one flat colour that names its episode
and step (``frame_colour``), stored as PNG (lossless), so a page or an answer can be checked pixel for
pixel; a second camera is JPEG; the low-dim leaves have names and units; episodes carry data and final
observations, one is interrupted."""

from __future__ import annotations

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, ImageStorage, dict_storage_kwargs_from_space

H, W = 24, 32  # main camera (PNG)
WH, WW = 16, 16  # wrist camera (JPEG)
FPS = 10
LENGTHS = (30, 20, 25, 12, 40)
TASKS = ("push", "push", "stack", "push", "stack")
SUCCESS = (True, False, True, False, True)
INTERRUPTED = 3  # this episode is ended with interrupted=True
STATE_NAMES = ["x", "y", "z"]


def step_space() -> DictSpace:
    obs = {"pixels": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": FPS}),
           "wrist": BoxSpace(0, 255, (WH, WW, 3), np.uint8, metadata={"kind": "image", "fps": FPS}),
           "state": BoxSpace(-1e6, 1e6, (3,), np.float32, metadata={"units": "m", "names": STATE_NAMES})}
    return DictSpace({"observation": DictSpace(obs), "action": BoxSpace(-1, 1, (2,), np.float32),
                      "reward": BoxSpace(-1e6, 1e6, (), np.float32)})


def frame_colour(episode: int, step: int) -> tuple[int, int, int]:
    """The flat RGB of the main camera at ``step`` of ``episode``: distinct for every (episode, step) held."""
    return (step * 6) % 256, (episode * 50 + 10) % 256, 200


def state(episode: int, step: np.ndarray) -> np.ndarray:
    return np.stack([step + 100.0 * episode, -step, step / 4], 1).astype(np.float32)


def action(episode: int, step: np.ndarray) -> np.ndarray:
    return np.stack([np.sin(step / 5 + episode), np.cos(step / 5)], 1).astype(np.float32)


def steps(episode: int, n: int) -> dict:
    s = np.arange(n)
    pixels = np.empty((n, H, W, 3), np.uint8)
    for i in range(n):
        pixels[i] = frame_colour(episode, i)
    wrist = np.full((n, WH, WW, 3), 128, np.uint8)
    wrist[:, :, : WW // 2] = (s * 4 % 256)[:, None, None, None]
    obs = {"pixels": pixels, "wrist": wrist, "state": state(episode, s)}
    return {"observation": obs, "action": action(episode, s), "reward": (s == n - 1).astype(np.float32)}


def final_observation(episode: int, n: int) -> dict:
    last = {k: v[-1] for k, v in steps(episode, n + 1)["observation"].items()}
    return last  # the observation after the last step: step n of the same pattern


def make_buffer(path, lengths=LENGTHS, *, close: bool = True):
    space = step_space()
    kwargs = dict_storage_kwargs_from_space(space, kind_storage_cls={"image": ImageStorage},
                                            key_kwargs={"observation/pixels": {"format": "PNG"}})
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, **kwargs)
    for e, n in enumerate(lengths):
        rb.extend(steps(e, n))
        rb.end_episode(final_observation(e, n), interrupted=e == INTERRUPTED, task=TASKS[e % len(TASKS)],
                       success=SUCCESS[e % len(SUCCESS)], seed=e)
    if close:
        rb.close()
        return path
    return rb
