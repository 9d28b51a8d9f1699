"""TorchRL 0.14.1 as a contender of the training-loader benchmark (its own venv, CPU torch).

``--build`` copies ``DATA/raw`` into a ``LazyMemmapStorage(steps, scratch_dir=DATA/torchrl/storage)``
(raw uint8 frames, one memory-mapped file per leaf), one ``extend`` per episode with ``episode`` and
``step_count`` leaves (as TorchRL's ``StepCounter`` would record), then ``rb.dumps(DATA/torchrl)``.

TorchRL samples a replay buffer in the training process; it has no ``Dataset`` of windows for a
``DataLoader``, and its own parallelism is ``ReplayBuffer(prefetch=N)``: N threads that draw the next
batches while the caller works. So this contender runs in the main process with ``prefetch`` =
``--workers`` threads (no worker processes: its per-worker memory is "-", all of it is in the main
process). A batch is what ``peers/_torchrl_windows.py`` does for the peer window benchmark:
``SliceSampler(slice_len=17, span=(1, 1), strict_length=False)`` slices of offsets -1..15 around
an anchor, re-cut by a few lines of torch (``rebuild``, timed with the batch) into windows with
edge padding: cameras and state at ``[-1, 0]``, action at ``0..15``. TorchRL has no per-key
offsets (every key is gathered at all 17 steps, 17 frames per window where 2 are used) and no
edge padding (a slice cut at an episode edge comes back shorter). ``index`` is TorchRL's storage
index of the anchor (steps are stored in order, so it is the global step).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _loader_common as lc  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchrl  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from torchrl.data import LazyMemmapStorage, SliceSampler, TensorDictReplayBuffer  # noqa: E402

SPAN = (min(lc.OBS_OFFSETS + lc.ACTION_OFFSETS), max(lc.OBS_OFFSETS + lc.ACTION_OFFSETS))  # (-1, 15)
SLICE = SPAN[1] - SPAN[0] + 1  # 17
ANCHOR_COL = -SPAN[0]  # the anchor is column 1 of a slice


def key(path: str) -> tuple[str, ...]:
    return tuple(path.split("/"))


def _buffer(folder: Path, capacity: int, batch: int, prefetch: int | None) -> TensorDictReplayBuffer:
    sampler = SliceSampler(slice_len=SLICE, traj_key="episode", strict_length=False, pad_output=True,
                           span=(ANCHOR_COL, ANCHOR_COL), cache_values=True)
    storage = LazyMemmapStorage(capacity, scratch_dir=folder / "storage", existsok=True)
    return TensorDictReplayBuffer(storage=storage, sampler=sampler, batch_size=batch * SLICE, prefetch=prefetch)


def build(data: Path, truth: lc.Truth) -> None:
    out, done = data / "torchrl", data / "torchrl.complete"
    if done.exists():
        return
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    raw = data / "raw"
    arrays = {k: np.load(raw / lc.leaf_file(k), mmap_mode="r") for k in truth.cameras + [lc.STATE_KEY, lc.ACTION_KEY]}
    rb = _buffer(out, truth.steps, 32, None)
    start = 0
    for e, end in enumerate(truth.episode_ends.tolist()):
        n = end - start
        td = TensorDict({}, batch_size=[n])
        for k, v in arrays.items():
            td.set(key(k), torch.from_numpy(np.array(v[start:end])))
        td["episode"] = torch.full((n,), e, dtype=torch.int64)
        td["step_count"] = torch.arange(n, dtype=torch.int64)
        rb.extend(td)
        start = end
    rb.dumps(out)
    done.write_text("")


def rebuild(flat: TensorDict, truth: lc.Truth) -> dict[str, torch.Tensor]:
    """The flat, possibly ragged sample as windows of 17 edge-padded steps, then each key at its offsets."""
    ends = flat.get(("next", "truncated")).reshape(-1).nonzero().reshape(-1) + 1
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    lengths = ends - starts
    cut_left = (lengths < SLICE) & (flat.get("step_count")[starts] == 0)
    t = torch.arange(SLICE)[None, :] - cut_left[:, None].long() * ANCHOR_COL  # position in the real steps
    pos = starts[:, None] + torch.minimum(t.clamp_min(0), lengths[:, None] - 1)
    obs = slice(ANCHOR_COL + lc.OBS_OFFSETS[0], ANCHOR_COL + lc.OBS_OFFSETS[-1] + 1)
    act = slice(ANCHOR_COL + lc.ACTION_OFFSETS[0], ANCHOR_COL + lc.ACTION_OFFSETS[-1] + 1)
    out = {k: flat.get(key(k))[pos[:, obs]] for k in truth.cameras + [lc.STATE_KEY]}
    out[lc.ACTION_KEY] = flat.get(lc.ACTION_KEY)[pos[:, act]]
    out[lc.INDEX_KEY] = flat.get("index").reshape(-1)[pos[:, ANCHOR_COL]]
    return out


def main() -> None:
    args = lc.parse_args()
    data = Path(args.data).resolve()
    truth = lc.load_truth(data)
    if args.build:
        t0 = time.perf_counter()
        build(data, truth)
        lc.built(args, data / "torchrl", time.perf_counter() - t0, "torchrl")
        return
    folder = data / "torchrl"
    if not (data / "torchrl.complete").exists():
        lc.unavailable(args, truth, f"no {folder} (run with --build)", "torchrl")
        return

    def make_loader():
        saved = _buffer(folder, truth.steps, args.batch, None)
        saved.loads(folder)  # the dumped state has no prefetch queue: restore it, then prefetch over it
        rb = TensorDictReplayBuffer(storage=saved.storage, sampler=saved.sampler, batch_size=args.batch * SLICE,
                                    prefetch=args.workers or None)
        torch.manual_seed(args.seed)  # TorchRL draws with torch's global generator

        def batches():
            while True:
                yield rebuild(rb.sample(), truth)
        return batches()

    def to_numpy(batch):
        return {k: v.numpy() for k, v in batch.items()}

    lc.measure(make_loader, to_numpy, truth, args, contender="torchrl", folder=folder,
               notes=f"torchrl {torchrl.__version__}: main process, prefetch={args.workers} threads (no DataLoader); "
                     "raw uint8 frames HWC (LazyMemmapStorage); SliceSampler slices of 17 steps re-cut into windows; "
                     "no padding flags (the re-cut windows carry none: is_pad not checked); index: storage index")


if __name__ == "__main__":
    main()
