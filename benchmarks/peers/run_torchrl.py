"""TorchRL as a contender of the peer benchmarks (see ``_workload.run_contender``).

Runs in TorchRL's own venv (``_venvs.peer_python("torchrl")``: torchrl 0.14.1, tensordict < 0.15,
CPU torch). Layout: a ``torchrl.data.ReplayBuffer`` over ``LazyMemmapStorage(2048,
scratch_dir=<folder>/storage)`` holding one nested ``TensorDict`` per step: raw frames, no
codec, one memory-mapped file per leaf, sized for 2048 steps when the first step arrives.
Steps are handed over as TensorDicts built beforehand (zero-copy views of the workload's
arrays), as an environment loop would hand them to the buffer.

TorchRL has no episode call, and its folder reopens only as of the last ``rb.dumps(folder)``
(storage length, writer and sampler state). With ``scratch_dir`` inside that folder ``dumps``
copies no data. So the end of an episode, the moment a recorder wants the episode on disk and
reopenable, is ``rb.dumps(folder)``.

* write, ``append``: ``rb.add(step)`` per step, ``rb.dumps(folder)`` every 128 steps.
* write, ``extend``: ``rb.extend(episode)`` with a 128-step TensorDict, then ``rb.dumps(folder)``.
* reopen: TorchRL's ``loads`` path: a reader rebuilds matching components
  (``ReplayBuffer(storage=LazyMemmapStorage(2048, scratch_dir=<folder>/storage))``) and calls
  ``rb.loads(folder)``, which maps the files in place; then ``rb[index]``, with every leaf copied
  into an owned NumPy array (indexing a memory map alone reads nothing).
* windows: ``SliceSampler`` slices of 17 steps re-cut into the Diffusion-Policy-shaped batch
  (``_torchrl_windows``; TorchRL has no per-key offsets nor edge padding, see there).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

import _workload as wl

import torch
import torchrl
from tensordict import TensorDict
from torchrl.data import LazyMemmapStorage, ReplayBuffer

CAPACITY = wl.STEPS


def info() -> dict[str, Any]:
    import tensordict
    return {"library": "torchrl", "version": torchrl.__version__, "tensordict": tensordict.__version__,
            "torch": torch.__version__}


def _tensordict(nested: dict[str, Any], batch: list[int]) -> TensorDict:
    def conv(d: dict[str, Any]) -> dict[str, Any]:
        return {k: conv(v) if isinstance(v, dict) else torch.from_numpy(np.asarray(v)) for k, v in d.items()}
    return TensorDict(conv(nested), batch_size=batch)


def _buffer(folder: str) -> ReplayBuffer:
    return ReplayBuffer(storage=LazyMemmapStorage(CAPACITY, scratch_dir=Path(folder) / "storage", existsok=True))


def write(out: str, data: dict[str, np.ndarray], episode_len: int, mode: str) -> dict[str, Any]:
    n = len(data[wl.FRAME_KEY])
    assert n <= CAPACITY, f"LazyMemmapStorage is sized for {CAPACITY} steps"
    if mode == "append":
        items, per_episode = [_tensordict(s, []) for s in wl.steps_of(data)], episode_len
    else:
        items, per_episode = [_tensordict(e, [episode_len]) for e in wl.episodes_of(data, episode_len)], 1
    t_create = time.perf_counter()
    Path(out).mkdir(parents=True)
    rb = _buffer(out)
    t0 = time.perf_counter()
    record_s, end_s = wl.time_recording(items, rb.add if mode == "append" else rb.extend, lambda: rb.dumps(out),
                                        per_episode)
    t_close = time.perf_counter()
    del rb
    t1 = time.perf_counter()
    return wl.write_result(n, t_create, t0, record_s, end_s, t_close, t1, "raw uint8 (memmap)")


def _to_numpy(td: Any) -> dict[str, Any]:
    return wl.nest({k: np.array(v.numpy() if hasattr(v, "numpy") else v) for k, v in wl.flatten(td).items()})


def reopen(path: str, index: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    rb = _buffer(path)
    rb.loads(path)
    t1 = time.perf_counter()
    step = _to_numpy(rb[index])
    t2 = time.perf_counter()
    return {"open_ms": (t1 - t0) * 1e3, "read_ms": (t2 - t1) * 1e3, "step": step}


def read_all(path: str) -> tuple[dict[str, np.ndarray], int | None]:
    rb = _buffer(path)
    rb.loads(path)
    return wl.flatten(_to_numpy(rb[np.arange(len(rb))])), None


if __name__ == "__main__":
    from _torchrl_windows import Windows
    wl.run_contender(write, reopen, read_all, info, Windows(CAPACITY))
