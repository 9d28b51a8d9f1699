"""trajstore as a contender of the peer benchmarks (see ``_workload.run_contender`` for the commands).

Runs with the project's python; ``PYTHONPATH`` picks which trajstore source is measured, and
the script refuses to run if ``trajstore`` was imported from anywhere else (``TRAJSTORE_SRC``).

Layout: what ``dict_storage_kwargs_from_space`` derives from the leaves' metadata: the camera
in an ``ImageStorage`` (JPEG, quality 75 if the source takes a ``quality`` option, else its
default), every other leaf in one ``HDF5Storage``.

* write, ``append``: ``rb.append(step)`` per step, ``rb.end_episode()`` (a flush: the episode
  is on disk and committed) after every 128 steps, ``rb.close()`` at the end.
* write, ``extend``: ``rb.extend(episode)`` with the 128 steps of an episode as one batch,
  then ``rb.end_episode()``; ``rb.close()`` at the end.
* reopen: ``ReplayBuffer.load_from(path)`` (read-only), then ``rb[index]``; every leaf is
  copied into an owned NumPy array so that the step is really read.
* windows (``_windows``): the buffer written as by ``extend`` (variant ``jpeg``, the default, or
  ``png``: lossless frames), reopened read-only; one batch is ``rb.sample_windows(64,
  delta_indices={"observation": [-1, 0], "action": range(16)}, pad=True)``: NumPy arrays, frames
  uint8 ``(64, 2, 128, 128, 3)``, the reward at the anchor, ``is_pad`` per name.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import _windows as win
import _workload as wl

import trajstore
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

# Opening imports the JPEG codec lazily; it is imported here, before any clock, like the peers' storage modules.
try:
    importlib.import_module("simplejpeg")
except ImportError:
    pass

_src = os.environ.get("TRAJSTORE_SRC")
if _src and Path(_src).resolve() not in Path(trajstore.__file__).resolve().parents:
    raise SystemExit(f"trajstore was imported from {trajstore.__file__}, not from {_src}")


def make_space() -> DictSpace:
    leaves = {key: BoxSpace(low, high, shape, np.dtype(dtype), metadata=meta or None)
              for key, shape, dtype, low, high, meta in wl.LEAVES}

    def build(d: dict[str, Any]) -> DictSpace:
        return DictSpace({k: build(v) if isinstance(v, dict) else v for k, v in d.items()})
    return build(wl.nest(leaves))


def storage_kwargs(space: DictSpace, camera: str = "jpeg") -> tuple[dict[str, Any], str]:
    """UniEnv's JPEG settings (quality 75, 4:2:0 chroma) where the source tree offers them; or PNG."""
    from trajstore.storages import ImageStorage

    if camera == "png":
        return dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}}), "PNG"
    declared = {o.name for o in getattr(ImageStorage, "options", ())}
    image: dict[str, Any] = {"quality": wl.JPEG_QUALITY}
    label = f"JPEG q{wl.JPEG_QUALITY}"
    if "subsampling" in declared:  # older sources encode 4:4:4 only
        image["subsampling"] = "420"
        label += " 4:2:0"
    return dict_storage_kwargs_from_space(space, kind_kwargs={"image": image}), label


def info() -> dict[str, Any]:
    return {"library": "trajstore", "source": str(Path(trajstore.__file__).resolve().parents[1])}


def write(out: str, data: dict[str, np.ndarray], episode_len: int, mode: str, camera: str = "jpeg") -> dict[str, Any]:
    space = make_space()
    kwargs, camera = storage_kwargs(space, camera)
    n = len(data[wl.FRAME_KEY])
    items = wl.steps_of(data) if mode == "append" else wl.episodes_of(data, episode_len)
    per_episode = episode_len if mode == "append" else 1
    t_create = time.perf_counter()
    rb = ReplayBuffer.create(DictStorage, space, cache_path=out, capacity=None, **kwargs)
    t0 = time.perf_counter()
    record_s, end_s = wl.time_recording(items, rb.append if mode == "append" else rb.extend, rb.end_episode,
                                        per_episode)
    t_close = time.perf_counter()
    rb.close()
    t1 = time.perf_counter()
    return wl.write_result(n, t_create, t0, record_s, end_s, t_close, t1, camera)


def reopen(path: str, index: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rb = ReplayBuffer.load_from(path)
    t1 = time.perf_counter()
    step = wl.nest({k: np.array(v) for k, v in wl.flatten(rb[index]).items()})
    t2 = time.perf_counter()
    rb.close()
    return {"open_ms": (t1 - t0) * 1e3, "read_ms": (t2 - t1) * 1e3, "step": step}


def read_all(path: str) -> tuple[dict[str, np.ndarray], int | None]:
    rb = ReplayBuffer.load_from(path)
    try:
        batch = wl.flatten(rb[np.arange(len(rb))])
        return {k: np.asarray(v) for k, v in batch.items()}, len(rb.episodes)
    finally:
        rb.close()


class Windows:
    """The Diffusion-Policy-shaped batch (see ``_windows``) through ``sample_windows``."""

    delta = {"observation": list(win.OBS_OFFSETS), "action": list(win.ACTION_OFFSETS)}

    def prepare(self, path: str, data: dict[str, np.ndarray], episode_len: int, variant: str) -> dict[str, Any]:
        return {"camera": write(path, data, episode_len, "extend", variant or "jpeg")["camera"]}

    def open(self, path: str, variant: str) -> Callable[[np.random.Generator], Any]:
        rb = ReplayBuffer.load_from(path)
        return lambda rng: rb.sample_windows(win.BATCH, delta_indices=self.delta, pad=True, rng=rng)

    def normalize(self, batch: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        data, is_pad = batch
        masks = {k: is_pad[k.split("/")[0]] for k in win.OFFSETS}
        return wl.flatten(data), masks


if __name__ == "__main__":
    wl.run_contender(write, reopen, read_all, info, Windows())
