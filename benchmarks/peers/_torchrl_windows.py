"""TorchRL's nearest form of the Diffusion-Policy-shaped batch (see ``_windows``), for ``run_torchrl.py``.

TorchRL 0.14.1 samples sequences with ``SliceSampler``: contiguous slices of ``slice_len`` steps
of one trajectory, every key over the same steps. It has no per-key offsets and no padding that
repeats an episode's edge step:

* ``pad_output=True`` (with ``strict_length=False``) pads only whole trajectories shorter than
  ``slice_len``, by repeating their last step; a slice cut short at an episode edge is not padded.
  Here every episode (128 steps) is longer than a slice, so it never applies;
* ``span=(1, 1)`` lets a slice start one step before its episode and end up to 16 steps after its
  last step; such a slice comes back shorter (cut at the edge), flagged by ``("next",
  "truncated")`` on its last step, in a flat batch of fewer than ``64 * 17`` steps.

So the emulation: slices of 17 steps (offsets -1 .. 15 of an anchor) with ``span=(1, 1)``, whose
starts are drawn uniformly over the 128 positions a Diffusion Policy anchor can take; then a few
lines of torch (``rebuild``, timed as part of the batch) cut the flat sample into 64 windows,
repeat each edge step into the missing positions and build the masks; camera and state keep
offsets ``[-1, 0]``, action ``0 .. 15``, reward the anchor. Differences from the others:
``rb.sample()`` gathers all keys at all 17 steps (17 frames per window where two are used), and a
cut slice is told left from right by its ``step_count`` (recorded with the data, as TorchRL's
``StepCounter`` transform would).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tensordict import TensorDict
from torchrl.data import LazyMemmapStorage, SliceSampler, TensorDictReplayBuffer

import _windows as win
import _workload as wl

SLICE = win.SPAN[1] - win.SPAN[0] + 1  # 17
ANCHOR_COL = -win.SPAN[0]  # the anchor is column 1 of a slice


def _episodes(data: dict[str, np.ndarray], episode_len: int) -> list[TensorDict]:
    out = []
    for e, nested in enumerate(wl.episodes_of(data, episode_len)):
        td = TensorDict(_tensors(nested), batch_size=[episode_len])
        td["episode"] = torch.full((episode_len,), e, dtype=torch.int64)
        td["step_count"] = torch.arange(episode_len, dtype=torch.int64)
        out.append(td)
    return out


def _tensors(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _tensors(v) if isinstance(v, dict) else torch.from_numpy(np.asarray(v)) for k, v in d.items()}


def _buffer(path: str, capacity: int) -> TensorDictReplayBuffer:
    sampler = SliceSampler(slice_len=SLICE, traj_key="episode", strict_length=False, pad_output=True,
                           span=(-win.SPAN[0], -win.SPAN[0]), cache_values=True)
    storage = LazyMemmapStorage(capacity, scratch_dir=Path(path) / "storage", existsok=True)
    return TensorDictReplayBuffer(storage=storage, sampler=sampler, batch_size=win.BATCH * SLICE)


def rebuild(flat: TensorDict) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The flat, possibly ragged sample as 64 windows of 17 edge-padded steps, and the masks."""
    ends = flat.get(("next", "truncated")).reshape(-1).nonzero().reshape(-1) + 1
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    lengths = ends - starts
    cut_left = (lengths < SLICE) & (flat.get("step_count")[starts] == 0)
    t = torch.arange(SLICE)[None, :] - cut_left[:, None].long() * ANCHOR_COL  # position in the real steps
    pad = (t < 0) | (t >= lengths[:, None])
    pos = starts[:, None] + torch.minimum(t.clamp_min(0), lengths[:, None] - 1)
    obs = slice(ANCHOR_COL + win.OBS_OFFSETS[0], ANCHOR_COL + win.OBS_OFFSETS[-1] + 1)
    act = slice(ANCHOR_COL + win.ACTION_OFFSETS[0], ANCHOR_COL + win.ACTION_OFFSETS[-1] + 1)
    leaves = {k: flat.get(tuple(k.split("/")))[pos[:, obs]] for k in win.OBS_KEYS}
    leaves["action"] = flat.get("action")[pos[:, act]]
    leaves["reward"] = flat.get("reward")[pos[:, ANCHOR_COL]]
    masks = {**{k: pad[:, obs] for k in win.OBS_KEYS}, "action": pad[:, act]}
    return leaves, masks


class Windows:
    """``prepare``/``open``/``normalize`` of the ``windows`` command (see ``_windows``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity

    def prepare(self, path: str, data: dict[str, np.ndarray], episode_len: int, variant: str) -> dict[str, Any]:
        Path(path).mkdir(parents=True)
        rb = _buffer(path, self.capacity)
        for td in _episodes(data, episode_len):
            rb.extend(td)
        rb.dumps(path)
        return {"camera": "raw uint8 (memmap)"}

    def open(self, path: str, variant: str) -> Callable[[np.random.Generator], Any]:
        rb = _buffer(path, self.capacity)
        rb.loads(path)

        def sample(rng: np.random.Generator) -> Any:
            torch.manual_seed(int(rng.integers(1 << 62)))  # TorchRL draws with torch's global generator
            return rebuild(rb.sample())
        return sample

    def normalize(self, batch: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        leaves, masks = batch
        return {k: v.numpy() for k, v in leaves.items()}, {k: v.numpy() for k, v in masks.items()}
