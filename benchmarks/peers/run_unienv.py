"""UniEnv (``unienv_data``) as a contender of the peer benchmarks (see ``_workload.run_contender``).

Runs in UniEnv's own venv (``_venvs.peer_python("unienv")``). Layout: what UniEnv's
``dict_storage_kwargs_from_space`` derives from the leaves' metadata, with the camera at JPEG
quality 75 (``kind_kwargs={"image": {"quality": 75}}``, also its default): one JPEG file per
frame written by Pillow (``ImageStorage``), every other leaf in one ``HDF5Storage``. Spaces use
the NumPy backend.

UniEnv has no episode call and keeps its buffer description in memory until ``dumps``: its
folder reopens only as of the last ``rb.dumps(path)``. So the end of an episode, the moment a
recorder wants the episode on disk and reopenable, is ``rb.mark_segment_end()`` (after
``append``) and ``rb.dumps(path)`` (into the buffer's own folder: metadata files and an HDF5
flush, no copy of the data).

* write, ``append``: ``rb.append(step)`` per step; episode end as above every 128 steps; at the
  end the storage is closed (``rb.close()`` only drops the reference).
* write, ``extend``: ``rb.extend(episode)`` per 128-step episode, then ``rb.dumps(path)``.
* reopen: ``ReplayBuffer.load_from(path, backend=NumpyComputeBackend)`` (read-only), then
  ``rb[index]``; every leaf is copied into an owned NumPy array.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import _workload as wl

import unienv_data
# Opening imports the layout's storage modules lazily; they are imported here, before any clock.
import unienv_data.storages.hdf5  # noqa: F401
import unienv_data.storages.image_storage  # noqa: F401
from unienv_data.replay_buffer import ReplayBuffer
from unienv_data.storages import DictStorage, dict_storage_kwargs_from_space
from unienv_interface.backends.numpy import NumpyComputeBackend as NB
from unienv_interface.space import BoxSpace, DictSpace


def make_space() -> DictSpace:
    leaves = {key: BoxSpace(NB, low, high, np.dtype(dtype), shape=shape, metadata=meta or None)
              for key, shape, dtype, low, high, meta in wl.LEAVES}

    def build(d: dict[str, Any]) -> DictSpace:
        return DictSpace(NB, {k: build(v) if isinstance(v, dict) else v for k, v in d.items()})
    return build(wl.nest(leaves))


def info() -> dict[str, Any]:
    from importlib.metadata import version
    return {"library": "unienv", "version": version("unienv"), "source": unienv_data.__file__}


def _close(rb: ReplayBuffer) -> None:
    storage = rb.storage
    rb.close()
    storage.close()


def write(out: str, data: dict[str, np.ndarray], episode_len: int, mode: str) -> dict[str, Any]:
    space = make_space()
    kwargs = dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"quality": wl.JPEG_QUALITY}})
    n = len(data[wl.FRAME_KEY])
    items = wl.steps_of(data) if mode == "append" else wl.episodes_of(data, episode_len)
    per_episode = episode_len if mode == "append" else 1
    t_create = time.perf_counter()
    rb = ReplayBuffer.create(DictStorage, space, cache_path=out, capacity=None, **kwargs)
    t0 = time.perf_counter()

    def end() -> None:
        if mode == "append":
            rb.mark_segment_end()
        rb.dumps(out)

    record_s, end_s = wl.time_recording(items, rb.append if mode == "append" else rb.extend, end, per_episode)
    t_close = time.perf_counter()
    _close(rb)
    t1 = time.perf_counter()
    return wl.write_result(n, t_create, t0, record_s, end_s, t_close, t1, f"JPEG q{wl.JPEG_QUALITY}, file per frame")


def reopen(path: str, index: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rb = ReplayBuffer.load_from(path, backend=NB)
    t1 = time.perf_counter()
    step = wl.nest({k: np.array(v) for k, v in wl.flatten(rb[index]).items()})
    t2 = time.perf_counter()
    _close(rb)
    return {"open_ms": (t1 - t0) * 1e3, "read_ms": (t2 - t1) * 1e3, "step": step}


def read_all(path: str) -> tuple[dict[str, np.ndarray], int | None]:
    rb = ReplayBuffer.load_from(path, backend=NB)
    try:
        batch = wl.flatten(rb[np.arange(len(rb))])
        return {k: np.asarray(v) for k, v in batch.items()}, None
    finally:
        _close(rb)


if __name__ == "__main__":
    wl.run_contender(write, reopen, read_all, info)
