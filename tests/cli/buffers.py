"""Small buffers made by the tests of tests/cli: episodes of known values, PNG, JPEG or video frames."""

from __future__ import annotations

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, ImageStorage, dict_storage_kwargs_from_space
from trajstore.testing import moving_scene

H, W = 24, 32
FPS = 10
FRAMES = moving_scene(64, H, W, seed=5)


def step_space(fps=FPS, depth=False):
    camera = {"kind": "image", "layout": "HWC", **({"fps": fps} if fps else {})}
    obs = {"pixels": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata=camera),
           "state": BoxSpace(-1e6, 1e6, (3,), np.float32)}
    if depth:
        obs["depth"] = BoxSpace(0, 65535, (H, W), np.uint16, metadata={"kind": "depth"})
    return DictSpace({"observation": DictSpace(obs), "action": BoxSpace(-1, 1, (2,), np.float32),
                      "note": TextSpace(max_length=8)})


def steps(g0, n, depth=False):
    g = np.arange(g0, g0 + n)
    obs = {"pixels": FRAMES[g % 64], "state": np.stack([g, -g, g / 2], 1).astype(np.float32)}
    if depth:
        obs["depth"] = (np.arange(H * W, dtype=np.uint16).reshape(H, W)[None] * 7 + g[:, None, None] * 11).astype(
            np.uint16)
    return {"observation": obs, "action": np.stack([np.sin(g), np.cos(g)], 1).astype(np.float32),
            "note": np.array([f"s{i}" for i in g])}


def final_obs(g, depth=False):
    one = steps(g, 1, depth)["observation"]
    return {k: v[0] for k, v in one.items()}


DATA = [{"task": "push the T", "success": True, "seed": 0},
        {"task": "push the T", "success": False, "seed": 1},
        {"task": "stack", "success": True, "seed": 2},
        {"task": "stack", "success": True, "seed": 3, "operator": "ana"}]
LENGTHS = [7, 5, 9, 6]


def make_buffer(path, *, camera="PNG", capacity=None, fps=FPS, depth=False, lengths=LENGTHS, data=DATA,
                interrupted=(False, False, True, False), open_steps=0):
    """A closed buffer at ``path``: episode k has ``lengths[k]`` steps, ``data[k]``, a final observation."""
    space = step_space(fps, depth)
    kind_storage, kind_kwargs = {"image": ImageStorage}, {"image": {"format": camera}}
    if camera == "video":
        from trajstore.storages import VideoStorage
        kind_storage, kind_kwargs = {"image": VideoStorage}, {"image": {"segment_frames": 8}}
    if depth:
        kind_storage["depth"] = ImageStorage
        kind_kwargs["depth"] = {"format": "PNG"}
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=capacity,
                             **dict_storage_kwargs_from_space(space, kind_storage_cls=kind_storage,
                                                              kind_kwargs=kind_kwargs))
    g = 0
    for n, d, cut in zip(lengths, data, interrupted):
        rb.extend(steps(g, n, depth))
        g += n
        rb.end_episode(final_obs(g, depth), interrupted=cut, **d)
    if open_steps:
        rb.extend(steps(g, open_steps, depth))
    rb.close()
    return path
