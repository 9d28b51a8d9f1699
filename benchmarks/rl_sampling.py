"""RL sampling of low-dim steps: trajstore's ``ReplayBuffer`` against TorchRL, in the same run.

Steps: ``observation`` (4,) float32, ``action`` (2,) float32, ``reward`` float32, ``terminated`` and
``truncated`` bool (18 bytes), in episodes of ``--episode-len`` steps (1000), each ended with a final
observation. trajstore stores them as a new user gets them (``dict_storage_kwargs_from_space``: one
uncompressed ``HDF5Storage``), in memory (``cache_path=None``) or on disk (the folder reopened
read-only with ``load_from``, as a learner does). TorchRL 0.14 (its own venv,
``benchmarks/peers/_venvs.py torchrl``) holds the same leaves, plus ``("next", "observation")``
(TorchRL's layout stores the next observation with each step; its n-step returns are computed when
data is written, by the ``MultiStep`` transform, so a sampled batch is one gather), in a
``TensorDictReplayBuffer`` over ``LazyTensorStorage`` (memory) or ``LazyMemmapStorage`` (disk).

Cases (batch 256, median ms of ``--repeats`` calls after a warm-up):

* ``sample``: ``rb.sample(256)`` vs TorchRL ``rb.sample()`` (256 steps);
* ``transitions n=1 / n=3``: ``rb.sample_transitions(256, n_step=n)`` (next observation, n-step reward,
  discount, flags, computed per call) vs the same TorchRL ``rb.sample()`` (everything precomputed);
  at ``--sizes`` (default 20,000 and 1,000,000 steps);
* ``windows``: ``rb.sample_windows(256, 16)`` (256 windows of 16 steps inside an episode, every leaf)
  on disk vs TorchRL's ``SliceSampler(slice_len=16, traj_key="episode", cache_values=True)`` over
  ``LazyMemmapStorage`` (``batch_size=256 * 16``), at ``--window-sizes`` (default 1M, 10M steps; add
  100M with ``--window-sizes 1000000,10000000,100000000``: ~1.8 GB for trajstore and ~3.8 GB for
  TorchRL, check ``df -h``). TorchRL's own report (pytorch/rl#2669): 1.65 s per ``SliceSampler`` batch
  at 346M steps. "Flat" means within 1.5x of the 1M figure.

Data is written in one ``extend`` per episode (``end_episode(flush=False)`` between) and one flush;
the fill rate is printed. Everything is removed afterwards. The machine is shared: compare ratios
of the same run, not absolute times.

Run::

    python benchmarks/rl_sampling.py [--sizes 20000,1000000] [--window-sizes 1000000,10000000] [--repeats 51]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BATCH, WINDOW = 256, 16
CHUNK = 1_000_000  # steps generated at a time


def chunks(total: int, seed: int = 0):
    """``(start, leaves)`` of ``total`` steps, ``CHUNK`` at a time (the same values for both sides)."""
    rng = np.random.default_rng(seed)
    for start in range(0, total, CHUNK):
        n = min(CHUNK, total - start)
        yield start, {"observation": rng.standard_normal((n, 4), np.float32),
                      "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
                      "reward": rng.standard_normal(n).astype(np.float32),
                      "terminated": np.zeros(n, bool), "truncated": np.zeros(n, bool)}


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e3)


# -- trajstore ---------------------------------------------------------------------------------
def trajstore_buffer(total: int, episode_len: int, path: Path | None):
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"observation": BoxSpace(-np.inf, np.inf, (4,), np.float32),
                       "action": BoxSpace(-1, 1, (2,), np.float32),
                       "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
                       "terminated": BinarySpace(), "truncated": BinarySpace()})
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, **dict_storage_kwargs_from_space(space))
    t = time.perf_counter()
    for _, leaves in chunks(total):
        n = len(leaves["reward"])
        for a in range(0, n, episode_len):
            part = {k: v[a:a + episode_len] for k, v in leaves.items()}
            rb.extend(part)
            rb.end_episode(final_observation=part["observation"][-1], flush=False)
    rb.flush()
    fill = time.perf_counter() - t
    if path is not None:
        rb.close()
        rb = ReplayBuffer.load_from(path)
    return rb, fill


def trajstore_cases(sizes, window_sizes, episode_len, repeats, root: Path) -> dict:
    out = {}
    for total in sizes:
        for where in ("memory", "disk"):
            path = None if where == "memory" else root / f"ts-{total}"
            rb, fill = trajstore_buffer(total, episode_len, path)
            g = np.random.default_rng(1)
            out[f"fill {where} {total}"] = fill
            out[f"sample {where} {total}"] = median_ms(lambda: rb.sample(BATCH, rng=g), repeats)
            for n in (1, 3):
                out[f"transitions n={n} {where} {total}"] = median_ms(
                    lambda: rb.sample_transitions(BATCH, n_step=n, rng=g), repeats)
            if importlib.util.find_spec("torch") is not None:  # the torch extra
                out[f"sample torch {where} {total}"] = median_ms(lambda: rb.sample(BATCH, rng=g, as_torch=True),
                                                                  repeats)
            rb.close()
            if path is not None:
                shutil.rmtree(path)
            print(f"  trajstore {where} {total}: done", file=sys.stderr, flush=True)
    for total in window_sizes:
        path = root / f"tsw-{total}"
        rb, fill = trajstore_buffer(total, episode_len, path)
        g = np.random.default_rng(2)
        out[f"fill windows {total}"] = fill
        out[f"windows disk {total}"] = median_ms(lambda: rb.sample_windows(BATCH, WINDOW, rng=g), repeats)
        out[f"sample disk {total}"] = out.get(f"sample disk {total}") or median_ms(lambda: rb.sample(BATCH, rng=g),
                                                                                   repeats)
        rb.close()
        shutil.rmtree(path)
        print(f"  trajstore windows {total}: done", file=sys.stderr, flush=True)
    return out


# -- TorchRL (run in its venv: --peer) ----------------------------------------------------------
def torchrl_cases(sizes, window_sizes, episode_len, repeats, root: Path) -> dict:
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyMemmapStorage, LazyTensorStorage, SliceSampler, TensorDictReplayBuffer

    def filled(total, storage, sampler=None, batch_size=BATCH):
        rb = TensorDictReplayBuffer(storage=storage, sampler=sampler, batch_size=batch_size)
        t = time.perf_counter()
        for start, leaves in chunks(total):
            n = len(leaves["reward"])
            td = {k: torch.from_numpy(v) for k, v in leaves.items()}
            td["next"] = {"observation": torch.from_numpy(np.roll(leaves["observation"], -1, 0))}
            td["episode"] = torch.arange(start, start + n, dtype=torch.int64) // episode_len
            rb.extend(TensorDict(td, batch_size=[n]))
        return rb, time.perf_counter() - t

    out = {}
    for total in sizes:
        for where in ("memory", "disk"):
            storage = LazyTensorStorage(total) if where == "memory" else LazyMemmapStorage(
                total, scratch_dir=root / f"trl-{total}")
            rb, fill = filled(total, storage)
            out[f"fill {where} {total}"] = fill
            out[f"sample {where} {total}"] = median_ms(rb.sample, repeats)
            del rb, storage
            shutil.rmtree(root / f"trl-{total}", ignore_errors=True)
    for total in window_sizes:
        sampler = SliceSampler(slice_len=WINDOW, traj_key="episode", cache_values=True)
        storage = LazyMemmapStorage(total, scratch_dir=root / f"trlw-{total}")
        rb, fill = filled(total, storage, sampler, BATCH * WINDOW)
        out[f"fill windows {total}"] = fill
        out[f"windows disk {total}"] = median_ms(rb.sample, max(5, repeats // 5))
        del rb, storage, sampler
        shutil.rmtree(root / f"trlw-{total}", ignore_errors=True)
    return out


def torchrl_results(args, root: Path) -> dict:
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here / "peers"))
    from _venvs import peer_python

    python, reason = peer_python("torchrl", create=False)
    if python is None:
        print(f"TorchRL unavailable: {reason}", file=sys.stderr)
        return {}
    cmd = [str(python), __file__, "--peer", "--sizes", args.sizes, "--window-sizes", args.window_sizes,
           "--episode-len", str(args.episode_len), "--repeats", str(args.repeats), "--root", str(root)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(ours: dict, peer: dict, sizes, window_sizes) -> str:
    rows = ["| case | steps | trajstore ms | TorchRL ms | trajstore / TorchRL |", "|---|---|---|---|---|"]
    names = {"memory": "LazyTensorStorage", "disk": "LazyMemmapStorage"}
    for total in sizes:
        for where in ("memory", "disk"):
            for case in ("sample", "transitions n=1", "transitions n=3", "sample torch"):
                mine, theirs = ours.get(f"{case} {where} {total}"), peer.get(f"sample {where} {total}")
                if mine is None:
                    continue
                ratio = f"{mine / theirs:.2f}" if mine and theirs else "-"
                label = f"{case} ({where}; TorchRL {names[where]} sample)"
                rows.append(f"| {label} | {total:,} | {mine:.3f} | {theirs or float('nan'):.3f} | {ratio} |")
    base = ours.get(f"windows disk {window_sizes[0]}") if window_sizes else None
    peer_base = peer.get(f"windows disk {window_sizes[0]}") if window_sizes else None
    for total in window_sizes:
        mine, theirs = ours.get(f"windows disk {total}"), peer.get(f"windows disk {total}")
        ratio = f"{mine / theirs:.2f}" if mine and theirs else "-"
        rows.append(f"| windows 256x16 (disk; TorchRL SliceSampler) | {total:,} | {mine:.3f} | "
                    f"{theirs or float('nan'):.3f} | {ratio} |")
    for total in window_sizes:
        mine, theirs = ours.get(f"windows disk {total}"), peer.get(f"windows disk {total}")
        growth = f"{mine / base:.2f}x" if base else "-"
        peer_growth = f"{theirs / peer_base:.2f}x" if theirs and peer_base else "-"
        rows.append(f"| windows vs the 1st size: trajstore {growth}, TorchRL {peer_growth} | {total:,} | | | |")
    fills = [f"{k}: trajstore {v:.1f} s" + (f", TorchRL {peer[k]:.1f} s" if k in peer else "")
             for k, v in ours.items() if k.startswith("fill")]
    return "\n".join(rows) + "\n\nfill (one extend per episode, one flush): " + "; ".join(fills)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="20000,1000000")
    ap.add_argument("--window-sizes", default="1000000,10000000")
    ap.add_argument("--episode-len", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=51)
    ap.add_argument("--root", default=None, help="folder for the data (default: a new one under /tmp)")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)  # the TorchRL side, in its venv
    ap.add_argument("--skip-peer", action="store_true", help="trajstore only")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    window_sizes = [int(s) for s in args.window_sizes.split(",") if s]
    if args.peer:
        print(json.dumps(torchrl_cases(sizes, window_sizes, args.episode_len, args.repeats, Path(args.root))))
        return
    root = Path(tempfile.mkdtemp(prefix="rl-sampling-", dir=args.root))
    try:
        ours = trajstore_cases(sizes, window_sizes, args.episode_len, args.repeats, root)
        peer = {} if args.skip_peer else torchrl_results(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table(ours, peer, sizes, window_sizes))


if __name__ == "__main__":
    main()
