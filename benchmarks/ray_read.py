"""Reading a whole buffer through Ray Data (``read_trajstore(...).iter_batches()``) with 1 and 2 CPUs,
against a direct loop over the buffer in one process.

The buffer holds the peer benchmarks' workload (``benchmarks/peers/_workload.py``: a 128x128x3
camera as JPEG quality 75, joint positions and velocities, action and reward), ``--steps`` steps
in episodes of 128. Each contender reads every step once per pass, in batches of ``--batch``
steps, and checks that the sum of the rewards it read equals the direct read's:

* ``direct``: ``rb[np.arange(lo, hi)]`` in a loop, in this process (JPEG decoding runs on the
  buffer's codec thread pool, as in training);
* ``ray N``: a fresh local Ray (``ray.init(num_cpus=N)``) in a child process, one warm-up pass
  (it starts the workers), then ``read_trajstore(path).iter_batches(batch_size=B)``; read tasks as
  Ray plans them unless ``--blocks`` is given.

Figures: the median of ``--repeats`` passes, as steps/s and MB/s of decoded frames, and each Ray
run's ratio to the direct loop. No timing is asserted anywhere.

Run::

    python benchmarks/ray_read.py [--steps 8192] [--batch 256] [--repeats 3] [--blocks N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PEERS = Path(__file__).resolve().parent / "peers"
sys.path.insert(0, str(PEERS))

import _workload as wl  # noqa: E402

FRAME_BYTES = wl.H * wl.W * 3
LABEL = f"JPEG q{wl.JPEG_QUALITY} 4:2:0"  # run_trajstore.storage_kwargs: UniEnv's settings


def build(folder: Path, steps: int) -> Path:
    import run_trajstore

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage

    data, episode_len = wl.load(wl.generate(folder / "workload", steps=steps))
    space = run_trajstore.make_space()
    kwargs, _ = run_trajstore.storage_kwargs(space)
    path = folder / "rb"
    with ReplayBuffer.create(DictStorage, space, cache_path=path, **kwargs) as rb:
        for episode in wl.episodes_of(data, episode_len):
            rb.extend(episode)
            rb.end_episode()
    return path


def direct(path: Path, batch: int, repeats: int) -> dict:
    from trajstore.replay_buffer import ReplayBuffer

    def one_pass(rb) -> float:
        total = 0.0
        for lo in range(0, len(rb), batch):
            step = rb[np.arange(lo, min(len(rb), lo + batch))]
            total += float(step["reward"].astype(np.float64).sum())
            assert step["observation"]["camera"].shape[1:] == (wl.H, wl.W, 3)
        return total

    with ReplayBuffer.load_from(path) as rb:
        checksum = one_pass(rb)  # warm-up
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            assert one_pass(rb) == checksum
            times.append(time.perf_counter() - t)
        return {"steps": len(rb), "seconds": float(np.median(times)), "checksum": checksum}


def ray_child(path: str, cpus: int, batch: int, repeats: int, blocks: int | None) -> dict:
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    from ray.data import DataContext

    from trajstore.training.ray import read_trajstore

    DataContext.get_current().enable_progress_bars = False
    extra = {} if blocks is None else {"override_num_blocks": blocks}

    def one_pass() -> tuple[int, float]:
        rows, total = 0, 0.0
        for b in read_trajstore(path, **extra).iter_batches(batch_size=batch, batch_format="numpy"):
            rows += len(b["reward"])
            total += float(b["reward"].astype(np.float64).sum())
            assert b["observation/camera"].shape[1:] == (wl.H, wl.W, 3)
        return rows, total

    rows, checksum = one_pass()  # warm-up: starts the workers
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        assert one_pass() == (rows, checksum)
        times.append(time.perf_counter() - t)
    ray.shutdown()
    return {"steps": rows, "seconds": float(np.median(times)), "checksum": checksum}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=None, help="override_num_blocks (default: Ray's plan)")
    parser.add_argument("--child", nargs=2, metavar=("PATH", "CPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(ray_child(args.child[0], int(args.child[1]), args.batch, args.repeats, args.blocks)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp), args.steps)
        results = {"direct": direct(path, args.batch, args.repeats)}
        env = {**os.environ, "RAY_DISABLE_IMPORT_WARNING": "1"}
        for cpus in (1, 2):
            cmd = [sys.executable, __file__, "--child", str(path), str(cpus), "--batch", str(args.batch),
                   "--repeats", str(args.repeats)] + ([] if args.blocks is None else ["--blocks", str(args.blocks)])
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
            results[f"ray {cpus} cpu"] = json.loads(out.strip().splitlines()[-1])
    base = results["direct"]
    print(f"{args.steps} steps (128x128 {LABEL} camera + 4 low-dim leaves), batches of {args.batch}, "
          f"median of {args.repeats} passes")
    print(f"{'reader':<12} {'steps/s':>10} {'MB/s frames':>12} {'x direct':>9}")
    for name, r in results.items():
        assert r["steps"] == base["steps"]
        assert abs(r["checksum"] - base["checksum"]) < 1e-6 * max(1, abs(base["checksum"]))
        rate = r["steps"] / r["seconds"]
        print(f"{name:<12} {rate:>10,.0f} {rate * FRAME_BYTES / 1e6:>12,.1f} {base['seconds'] / r['seconds']:>9.2f}")


if __name__ == "__main__":
    main()
