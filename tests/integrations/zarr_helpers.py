"""Data for the zarr tests: a small trajstore buffer and a group built by hand in Diffusion Policy's layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
from trajstore.testing import moving_scene

EPISODE_LENGTHS = (5, 9, 4)
CAMERA = {"kind": "image", "layout": "HWC", "fps": 15}


def step_space() -> DictSpace:
    return DictSpace({
        "observation": DictSpace({
            "pixels": BoxSpace(0, 255, (24, 32, 3), np.uint8, metadata=CAMERA),
            "agent_pos": BoxSpace(0, 512, (2,), np.float32, metadata={"units": "px"}),
        }),
        "action": BoxSpace(-1, 1, (2,), np.float32),
        "count": BoxSpace(0, 1000, (), np.int16),
        "terminated": BinarySpace(),
    })


def steps(n: int, seed: int = 0) -> dict:
    """``n`` steps of :func:`step_space` with smooth frames (so lossy codecs behave as on real cameras)."""
    rng = np.random.default_rng(seed)
    return {"observation": {"pixels": moving_scene(n, 24, 32, seed=seed),
                            "agent_pos": rng.uniform(0, 512, (n, 2)).astype(np.float32)},
            "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
            "count": rng.integers(0, 1000, n).astype(np.int16),
            "terminated": rng.integers(0, 2, n).astype(bool)}


def make_buffer(path: Path) -> dict:
    """A PNG (exact) buffer at ``path`` with :data:`EPISODE_LENGTHS` episodes; returns every step appended."""
    space = step_space()
    data = steps(sum(EPISODE_LENGTHS))
    kwargs = dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}})
    with ReplayBuffer.create(DictStorage, space, cache_path=path, **kwargs) as rb:
        start = 0
        for k, n in enumerate(EPISODE_LENGTHS):
            rb.extend({"observation": {key: v[start:start + n] for key, v in data["observation"].items()},
                       **{key: v[start:start + n] for key, v in data.items() if key != "observation"}})
            if k == 1:
                rb.end_episode(interrupted=True, reason="reset")
            else:
                rb.end_episode(task=f"push {k}", success=bool(k % 2), seed=k)
            start += n
    return data


def make_dp_group(path: Path, *, img_dtype=np.uint8, ends=(6, 10, 17), extra=None) -> dict:
    """A zarr group as Diffusion Policy's PushT data: data/img (N, 16, 20, 3), state (N, 5), action (N, 2),
    keypoint (N, 9, 2), chunked and Blosc-compressed as its ``ReplayBuffer`` does; returns the arrays."""
    import numcodecs
    import zarr

    n = ends[-1]
    rng = np.random.default_rng(1)
    arrays = {"img": moving_scene(n, 16, 20, seed=3).astype(img_dtype),
              "state": rng.uniform(0, 512, (n, 5)).astype(np.float32),
              "action": rng.uniform(0, 512, (n, 2)).astype(np.float32),
              "keypoint": rng.uniform(0, 512, (n, 9, 2)).astype(np.float32)}
    arrays.update(extra or {})
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    blosc = numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)
    for key, value in arrays.items():
        chunks = (1, *value.shape[1:]) if key == "img" else (7, *value.shape[1:])
        a = root.create_array(f"data/{key}", shape=value.shape, chunks=chunks, dtype=value.dtype, compressors=blosc)
        a[:] = value
    e = root.create_array("meta/episode_ends", shape=(len(ends),), chunks=(len(ends),), dtype=np.int64,
                          compressors=None)
    e[:] = np.asarray(ends, np.int64)
    return arrays
