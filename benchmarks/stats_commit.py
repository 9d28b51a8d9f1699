"""The cost of the statistics at ``end_episode()`` for large leaves, trajstore source trees side by side.

Each ``--src LABEL=DIR`` runs in fresh processes of its own (``PYTHONPATH=DIR``). A process makes a
buffer of one leaf in the default HDF5 storage and records ``--episodes`` (3) episodes of
``--steps`` (10) steps: ``extend`` of the episode's steps (not timed), then ``end_episode()``
(timed: the flush of the staged steps, the statistics of the block, the storage's fsync, the
commit with ``stats.json``). The leaves (``--leaves``, default both):

* ``depth``: float32 ``(240, 320)``, metadata ``kind="depth"`` (a depth camera), uniform values in
  metres, a border of zeros;
* ``wide``: uint8 ``(240, 1280)``, no kind (not a camera: HDF5 too).

Beside it, in the same process, the same bytes of each episode are written to a plain file and
fsynced (``plain ms``): what storing the episode costs without trajstore. Reported per tree and
leaf, medians over ``--rounds`` (3) processes (the trees alternate, the order rotating) of the
per-process medians over the episodes:

* ``end_episode ms`` and its ``range`` (max - min of the rounds over their median);
* ``plain ms``; ``ratio``: end_episode / plain (1 would be no cost beyond the data's own write);
* ``stats ms``: the statistics' own work for one episode, timed alone in the same process after the
  recording (counting the episode's steps into the accumulator, then serialising the file's JSON
  text), and ``stats / plain``;
* ``stats KiB``: the size of ``stats.json`` after the last episode.

Run with the project's python::

    python benchmarks/stats_commit.py --src before=OLD_CHECKOUT/src --src after=src [--rounds 3]

No timing is asserted anywhere; the machine's load moves the absolute times, the ratios of one run
are what counts.

Figures (2 cores shared with other jobs, load average 11-12; ``before``: statistics per element for
every non-image leaf, ``after``: the bounded rule), medians of 3 processes:

======  =====  ==============  ========  =====  ========  =============  =========
tree    leaf   end_episode ms  plain ms  ratio  stats ms  stats / plain  stats KiB
======  =====  ==============  ========  =====  ========  =============  =========
before  depth          1753.9       7.9  220.7    1750.9         220.34    13381.7
after   depth            49.5       7.4    6.7      18.1           2.45        8.4
before  wide           7648.3       7.9  964.4    6854.7         864.29    50157.2
after   wide             37.1       7.0    5.3       7.5           1.08        2.7
======  =====  ==============  ========  =====  ========  =============  =========

What is left of ``end_episode`` beyond the plain write is the HDF5 block write and the commit's
fsyncs, and counting the block (O(values), on the writer thread: at recording rate it runs as the
blocks are written, not at the episode's end); the statistics' commit is a write of a few KiB. On a
quieter moment counting one depth episode (768,000 values) took 3.3 ms, best of 25.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_SRC = HERE.parent / "src"
LEAVES = ("depth", "wide")

WORKER = r"""
import json, os, statistics, sys, time
import numpy as np
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

path, leaf, episodes, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
if leaf == "depth":
    space = DictSpace({"depth": BoxSpace(0, 10, (240, 320), np.float32, metadata={"kind": "depth"})})
    def make(k):
        x = rng.uniform(0.3, 2.0 + k, (steps, 240, 320)).astype(np.float32)
        x[:, :8] = 0.0
        return {"depth": x}
else:
    space = DictSpace({"wide": BoxSpace(0, 255, (240, 1280), np.uint8)})
    def make(k):
        return {"wide": rng.integers(0, 256, (steps, 240, 1280), dtype=np.uint8)}
batches = [make(k) for k in range(episodes)]  # built before any clock starts
rb = ReplayBuffer.create(DictStorage, space, cache_path=os.path.join(path, "rb"),
                         **dict_storage_kwargs_from_space(space))
ends, plains = [], []
for k, batch in enumerate(batches):
    rb.extend(batch)
    t = time.perf_counter()
    rb.end_episode()
    ends.append(time.perf_counter() - t)
    data = next(iter(batch.values()))
    t = time.perf_counter()
    with open(os.path.join(path, f"plain-{k}.bin"), "wb") as f:
        f.write(memoryview(np.ascontiguousarray(data)).cast("B"))
        f.flush()
        os.fsync(f.fileno())
    plains.append(time.perf_counter() - t)
rb.close()
size = os.path.getsize(os.path.join(path, "rb", "stats.json"))
# The statistics' own work, alone: count each episode's steps and serialise the file's text.
from trajstore.replay_buffer.stats_keeper import RangeStats
ranged, alone = RangeStats(space, 0, 0), []
for batch in batches:
    t = time.perf_counter()
    ranged.add(list(batch.values()), steps, [0])
    json.dumps(ranged.to_json("0" * 32), separators=(",", ":"))
    alone.append(time.perf_counter() - t)
print(json.dumps({"end_ms": statistics.median(ends) * 1e3, "plain_ms": statistics.median(plains) * 1e3,
                  "stats_ms": statistics.median(alone) * 1e3, "stats_bytes": size}))
"""


def parse_src(value: str) -> tuple[str, Path]:
    label, sep, path = value.partition("=")
    if not sep:
        label, path = Path(value).resolve().parent.name, value
    src = Path(path).expanduser().resolve()
    if not (src / "trajstore").is_dir():
        raise argparse.ArgumentTypeError(f"{src} holds no trajstore package")
    return label, src


def run_once(python: str, src: Path, folder: Path, leaf: str, episodes: int, steps: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(src)
    folder.mkdir(parents=True)
    try:
        out = subprocess.run([python, "-c", WORKER, str(folder), leaf, str(episodes), str(steps)], env=env,
                             capture_output=True, text=True, timeout=1800)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", action="append", type=parse_src, metavar="LABEL=DIR",
                    help=f"a trajstore source tree (repeatable; the first is the baseline; default: {REPO_SRC})")
    ap.add_argument("--leaves", default=",".join(LEAVES), help=f"leaves to record (default {','.join(LEAVES)})")
    ap.add_argument("--episodes", type=int, default=3, help="episodes per process (default 3)")
    ap.add_argument("--steps", type=int, default=10, help="steps per episode (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per tree and leaf (default 3)")
    ap.add_argument("--python", default=sys.executable, help="the python that runs the trees")
    args = ap.parse_args()
    srcs = args.src or [("this", REPO_SRC)]
    leaves = [x for x in args.leaves.split(",") if x.strip()]
    unknown = [x for x in leaves if x not in LEAVES]
    if unknown:
        ap.error(f"unknown leaves {unknown}; known: {', '.join(LEAVES)}")
    work = Path(tempfile.mkdtemp(prefix="stats-commit-"))
    results: dict[tuple[str, str], list[dict]] = {}
    failed: dict[str, str] = {}
    try:
        for r in range(args.rounds):
            for leaf in leaves:
                for label, src in srcs[r % len(srcs):] + srcs[:r % len(srcs)]:  # the order rotates
                    if label in failed:
                        continue
                    print(f"round {r + 1}: {label}, {leaf} ...", file=sys.stderr, flush=True)
                    try:
                        results.setdefault((label, leaf), []).append(
                            run_once(args.python, src, work / f"{label}-{leaf}-{r}", leaf, args.episodes, args.steps))
                    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                        failed[label] = str(exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    header = ("tree", "leaf", "end_episode ms", "range", "plain ms", "ratio", "stats ms", "stats / plain",
              "stats KiB")
    rows: list[tuple] = []
    for leaf in leaves:
        for label, _ in srcs:
            if label in failed:
                rows.append((label, leaf, f"failed: {failed[label]}"))
                continue
            runs = results[(label, leaf)]
            end = statistics.median(x["end_ms"] for x in runs)
            plain = statistics.median(x["plain_ms"] for x in runs)
            spread = (max(x["end_ms"] for x in runs) - min(x["end_ms"] for x in runs)) / end * 100
            own = statistics.median(x["stats_ms"] for x in runs)
            rows.append((label, leaf, f"{end:.1f}", f"{spread:.0f}%", f"{plain:.1f}", f"{end / plain:.1f}",
                         f"{own:.1f}", f"{own / plain:.2f}",
                         f"{statistics.median(x['stats_bytes'] for x in runs) / 1024:.1f}"))
    print(f"end_episode() of a {args.steps}-step episode, {args.episodes} episodes a process, "
          f"medians of {args.rounds} processes")
    full = [r for r in rows if len(r) == len(header)]
    widths = [max(len(str(x[i])) for x in [header, *full]) for i in range(len(header))]
    print("  ".join(h.ljust(w) if i < 2 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        if len(row) < len(header):
            print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}")
        else:
            print("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))))


if __name__ == "__main__":
    main()
