"""The cost of ``sample_windows`` does not grow with the number of episodes.

Two buffers of the same 200,000 steps: 200 episodes of 1000 steps, and 20,000 episodes of 10
steps. Each step is three small leaves (a float32 ``(2,)`` state, a float32 ``(2,)`` action, an
int64 step number), each in a ``MemmapStorage`` of a ``DictStorage`` in a temporary folder, so
the read itself is cheap and the sampling shows. For each buffer it times, as the median of
``--repeats`` calls (after one warm-up call that builds the cached anchor index):

* ``window``: ``sample_windows(B, 8)`` (the plain form);
* ``delta``: ``sample_windows(B, delta_indices={"observation": [-1, 0], "action": range(8)})``;
* ``episodes``: building ``rb.episodes`` (one object per episode), for scale.

and prints the ratio short-episodes / long-episodes (about 1 when the cost is independent of
the episode count). No timing is asserted anywhere.

Run::

    python benchmarks/window_sampling.py [--batch 256] [--repeats 51]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, MemmapStorage

SPACE = DictSpace({"observation": BoxSpace(-1, 1, (2,), np.float32), "action": BoxSpace(-1, 1, (2,), np.float32),
                   "step": BoxSpace(0, 1 << 40, (), np.int64)})
STEPS = 200_000


def build(path: Path, episode_len: int) -> ReplayBuffer:
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, storage_cls_map={
        "observation": MemmapStorage, "action": MemmapStorage, "step": MemmapStorage})
    ids = np.arange(STEPS, dtype=np.int64)
    state = np.zeros((STEPS, 2), np.float32)
    for start in range(0, STEPS, episode_len):
        part = slice(start, start + episode_len)
        rb.extend({"observation": state[part], "action": state[part], "step": ids[part]})
        rb.end_episode(flush=False)  # closed without a commit per episode; one flush below
    rb.flush()
    return rb


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up: builds the cached anchor index
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=51)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    delta = {"observation": [-1, 0], "action": range(8)}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for episode_len in (1000, 10):
            rb = build(Path(tmp) / f"len{episode_len}", episode_len)
            reader = ReplayBuffer.load_from(rb.cache_path)
            rb.close()
            results[episode_len] = {
                "window": median_ms(lambda: reader.sample_windows(args.batch, 8, rng=rng), args.repeats),
                "delta": median_ms(lambda: reader.sample_windows(args.batch, delta_indices=delta, rng=rng),
                                   args.repeats),
                "episodes": median_ms(lambda: reader.episodes, max(3, args.repeats // 10)),
            }
            print(f"{STEPS // episode_len:>6} episodes x {episode_len:>4} steps: " + ", ".join(
                f"{k} {v:.3f} ms" for k, v in results[episode_len].items()))
            reader.close()
    print("ratio 20,000 x 10 / 200 x 1000: " + ", ".join(
        f"{k} {results[10][k] / results[1000][k]:.2f}" for k in results[10]))


if __name__ == "__main__":
    main()
