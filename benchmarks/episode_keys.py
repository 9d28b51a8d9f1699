"""The cost of exactly-once episodes: ``end_episode(episode_key=...)`` against a plain ``end_episode()``, in a
shard of a sharded dataset whose other shards hold committed keyed episodes.

A dataset (``trajstore.shards``) of a low-dim step plus an 8x8 camera (PNG chunks) gets ``--shards``
other shards of ``--episodes`` keyed episodes each; then one shard records ``--calls`` episodes of 1..6
steps, alternating rounds of plain and keyed ends. A keyed end takes the dataset's ``keys.lock``, refreshes
a reader of every other shard and scans their new episodes' keys before it commits. Reported: median ms of
one ``end_episode`` per mode and their ratio (keyed / plain), same process, same run.

Run with the project's python::

    python benchmarks/episode_keys.py [--shards 1,8,32] [--episodes 50] [--calls 200]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.shards.test_exactly_once import episode_steps, fleet_space  # noqa: E402
from trajstore.shards import ShardedDataset  # noqa: E402
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space  # noqa: E402


def run(shards: int, episodes: int, calls: int) -> tuple[float, float]:
    root = Path(tempfile.mkdtemp(prefix="episode-keys-"))
    try:
        space = fleet_space()
        ds = ShardedDataset.create(root / "fleet", DictStorage, space, **dict_storage_kwargs_from_space(space))
        for s in range(shards):
            with ds.writer(f"other{s}") as rb:
                for e in range(episodes):
                    rb.extend(episode_steps(s, e))
                    rb.end_episode(episode_key=f"other{s}/{e}")
        times: dict[str, list[float]] = {"plain": [], "keyed": []}
        with ds.writer("me") as rb:
            for round_ in range(4):
                mode = ("plain", "keyed")[round_ % 2]
                for e in range(calls // 2):
                    rb.extend(episode_steps(99, e))
                    t0 = time.perf_counter()
                    if mode == "keyed":
                        rb.end_episode(episode_key=f"me/{round_}/{e}")
                    else:
                        rb.end_episode()
                    times[mode].append(time.perf_counter() - t0)
        return float(np.median(times["plain"])) * 1e3, float(np.median(times["keyed"])) * 1e3
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="1,8,32")
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    print(f"{'other shards':>12} {'plain ms':>9} {'keyed ms':>9} {'keyed/plain':>12}")
    for n in (int(s) for s in args.shards.split(",")):
        plain, keyed = run(n, args.episodes, args.calls)
        print(f"{n:>12} {plain:>9.2f} {keyed:>9.2f} {keyed / plain:>11.2f}x")


if __name__ == "__main__":
    main()
