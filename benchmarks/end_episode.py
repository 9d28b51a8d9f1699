"""The cost of one ``end_episode()`` as the number of stored episodes grows, trajstore source trees side by side.

Each ``--src LABEL=DIR`` runs in fresh processes of its own (``PYTHONPATH=DIR``). A process makes an
unbounded buffer of a low-dim step (``observation`` float32 (3,), ``action`` float32 (2,),
``reward`` float32, all in the default HDF5 storage) and stores ``N`` episodes of 5 steps (``--sizes``,
default 100 and 20,000). The history is built without a commit per episode (the steps are
appended, the episode table is closed in memory, one ``flush()`` at the end: format 2 would take
minutes to commit 20,000 episodes one by one); then ``--calls`` more episodes are recorded as a
user does, ``extend`` of 5 steps (not timed) then ``end_episode()`` (timed), with no episode data.

Reported per tree and size, medians over ``--rounds`` processes of the per-process medians:

* ``ms``: one ``end_episode()`` (wall time: flush of the staged steps, storage fsync, the episode
  commit); ``range``: max - min of the rounds over their median;
* ``written KiB``: bytes the process passed to ``write``/``pwrite`` during the call (Linux
  ``/proc/self/io`` ``wchar``), i.e. what a commit rewrites;
* ``json KiB``: the size of ``trajstore.json`` after the calls;
* ratio: tree / the first ``--src`` for ``ms``.

Run with the project's python::

    python benchmarks/end_episode.py --src before=OLD_CHECKOUT/src --src after=src [--rounds 3]
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

WORKER = r"""
import json, os, statistics, sys, time
import numpy as np
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

path, n_episodes, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
space = DictSpace({"observation": BoxSpace(-10, 10, (3,), np.float32), "action": BoxSpace(-1, 1, (2,), np.float32),
                   "reward": BoxSpace(-1, 1, (), np.float32)})
rng = np.random.default_rng(0)
batch = {"observation": rng.uniform(-1, 1, (5, 3)).astype(np.float32),
         "action": rng.uniform(-1, 1, (5, 2)).astype(np.float32), "reward": np.zeros(5, np.float32)}

def written():
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))

rb = ReplayBuffer.create(DictStorage, space, cache_path=path, **dict_storage_kwargs_from_space(space))
for _ in range(n_episodes):  # history: episodes closed in memory, one commit at the end
    rb.extend(batch)
    rb.end_episode(flush=False)
rb.flush()
assert rb.num_episodes == n_episodes
seconds, nbytes = [], []
for _ in range(calls):
    rb.extend(batch)
    w, t = written(), time.perf_counter()
    rb.end_episode()
    seconds.append(time.perf_counter() - t)
    nbytes.append(written() - w)
assert rb.num_episodes == n_episodes + calls
rb.close()
print(json.dumps({"ms": 1e3 * statistics.median(seconds), "written": statistics.median(nbytes),
                  "json": os.path.getsize(os.path.join(path, "trajstore.json"))}))
"""


def parse_src(value: str) -> tuple[str, Path]:
    label, sep, path = value.partition("=")
    if not sep:
        label, path = Path(value).resolve().parent.name, value
    src = Path(path).expanduser().resolve()
    if not (src / "trajstore").is_dir():
        raise argparse.ArgumentTypeError(f"{src} holds no trajstore package")
    return label, src


def run_once(python: str, src: Path, folder: Path, n: int, calls: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(src)
    out = subprocess.run([python, "-c", WORKER, str(folder), str(n), str(calls)], env=env, capture_output=True,
                         text=True, timeout=1800)
    shutil.rmtree(folder, ignore_errors=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", action="append", type=parse_src, metavar="LABEL=DIR",
                    help=f"a trajstore source tree (repeatable; the first is the baseline; default: {REPO_SRC})")
    ap.add_argument("--sizes", default="100,20000", help="stored episodes before the measured calls (default 100,20000)")
    ap.add_argument("--calls", type=int, default=30, help="measured end_episode() calls per process (default 30)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per tree and size (default 3)")
    ap.add_argument("--python", default=sys.executable, help="the python that runs the trees")
    args = ap.parse_args()
    if not os.path.exists("/proc/self/io"):
        ap.error("needs Linux /proc/self/io to count the bytes written")
    srcs = args.src or [("this", REPO_SRC)]
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    work = Path(tempfile.mkdtemp(prefix="end-episode-"))
    results: dict[tuple[str, int], list[dict]] = {}
    failed: dict[str, str] = {}
    try:
        for r in range(args.rounds):
            for n in sizes:
                for label, src in srcs[r % len(srcs):] + srcs[:r % len(srcs)]:  # the order rotates
                    if label in failed:
                        continue
                    print(f"round {r + 1}: {label}, {n} episodes ...", file=sys.stderr, flush=True)
                    try:
                        results.setdefault((label, n), []).append(
                            run_once(args.python, src, work / f"{label}-{n}", n, args.calls))
                    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                        failed[label] = str(exc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for n in sizes:
        base = None
        for label, _ in srcs:
            if label in failed:
                rows.append((label, n, f"failed: {failed[label]}"))
                continue
            runs = results[(label, n)]
            ms = statistics.median(r["ms"] for r in runs)
            base = ms if base is None else base
            spread = (max(r["ms"] for r in runs) - min(r["ms"] for r in runs)) / ms * 100
            rows.append((label, n, f"{ms:.2f}", f"{spread:.0f}%", f"{statistics.median(r['written'] for r in runs) / 1024:.1f}",
                         f"{statistics.median(r['json'] for r in runs) / 1024:.1f}", f"{ms / base:.2f}"))
    header = ("tree", "episodes", "ms", "range", "written KiB", "json KiB", "ms / first")
    print(f"end_episode() of a 5-step episode, medians of {args.rounds} processes x {args.calls} calls")
    widths = [max(len(str(x[i])) for x in [header] + [r for r in rows if len(r) == len(header)]) for i in range(len(header))]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        if len(row) < len(header):
            print(f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]}")
        else:
            print("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))))


if __name__ == "__main__":
    main()
