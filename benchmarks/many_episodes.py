"""Bulk import of many short episodes: episodes/s of ``end_episode(flush=False)``, trajstore source trees side by side.

Each ``--src LABEL=DIR`` runs in a fresh process of its own (``PYTHONPATH=DIR``, see
``peers/_harness.py`` ``run_sources``). A process makes an unbounded buffer of a low-dim step
(``observation`` {``state`` float32 (8,), ``image`` uint8 (16, 16, 3)}, ``action`` float32 (2,), the
default DictStorage routing) and records ``--episodes`` episodes through the public API per case:
``append`` each step, ``end_episode(flush=False)`` (with ``final_observation=`` or not), and
``flush()`` every ``--flush-every`` episodes and at the end. Cases: 1-step and 10-step episodes,
with and without final observations; each case gets its own folder.

Reported per case: episodes/s for each tree (wall time of the whole import, the last flush
included) and the ratio tree / the first ``--src``; ``fsync``: fsync/fdatasync calls the case made
(counted by wrapping ``os.fsync``/``os.fdatasync`` in the child; HDF5's own syncs are not counted).

    python benchmarks/many_episodes.py --src before=/work/main/src --src after=src [--episodes 2000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

CASES = [(1, False), (1, True), (10, False), (10, True)]  # (steps per episode, final observation)


def child(config: dict) -> dict:
    import os

    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    syncs = [0]
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def counted(fd, _real=real):
            syncs[0] += 1
            return _real(fd)
        setattr(os, name, counted)

    space = DictSpace({
        "observation": DictSpace({"state": BoxSpace(-1, 1, (8,), np.float32),
                                  "image": BoxSpace(0, 255, (16, 16, 3), np.uint8)}),
        "action": BoxSpace(-1, 1, (2,), np.float32),
    })
    obs = {"state": np.zeros(8, np.float32), "image": np.zeros((16, 16, 3), np.uint8)}
    step = {"observation": obs, "action": np.zeros(2, np.float32)}
    out = {}
    root = Path(config["folder"])
    for steps, final in CASES:
        key = f"{steps}-step{' +final' if final else ''}"
        syncs[0] = 0
        t0 = time.perf_counter()
        rb = ReplayBuffer.create(DictStorage, space, cache_path=str(root / key.replace(" +", "_")),
                                 **dict_storage_kwargs_from_space(space))
        for e in range(config["episodes"]):
            for _ in range(steps):
                rb.append(step)
            if final:
                rb.end_episode(flush=False, final_observation=obs)
            else:
                rb.end_episode(flush=False)
            if (e + 1) % config["flush_every"] == 0:
                rb.flush()
        rb.close()
        wall = time.perf_counter() - t0
        check = ReplayBuffer.load_from(str(root / key.replace(" +", "_")))
        assert len(check.episodes) == config["episodes"], (key, len(check.episodes))
        assert len(check) == config["episodes"] * steps
        out[key] = {"eps": config["episodes"] / wall, "fsync": syncs[0]}
    return out


def main() -> None:
    import _harness

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", type=_harness.parse_src, metavar="LABEL=DIR", required=True)
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--flush-every", type=int, default=1000)
    ap.add_argument("--python", type=Path, default=Path(sys.executable))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    cons = [_harness.Contender(label, Path(__file__), args.python,
                               dict(_harness.base_env(), PYTHONPATH=str(src))) for label, src in args.src]
    work = _harness.workdir(argparse.Namespace(workdir=None), "many_episodes-")
    cfg = lambda i, folder: {"folder": str(folder), "episodes": args.episodes, "flush_every": args.flush_every}
    results = _harness.run_sources(cons, work, Path(__file__), "--child", cfg, timeout=3600, keep=False)
    base = results[cons[0].label]
    print(f"{args.episodes} episodes per case, flush() every {args.flush_every}; episodes/s (fsync calls)")
    print(f"{'case':<16}" + "".join(f"{c.label:>28}" for c in cons) + "   ratio")
    for steps, final in CASES:
        key = f"{steps}-step{' +final' if final else ''}"
        row = f"{key:<16}"
        for c in cons:
            r = results[c.label]
            row += f"{'failed':>28}" if "failed" in r else f"{r[key]['eps']:>18.0f} ({r[key]['fsync']:>6})"
        last = results[cons[-1].label]
        if "failed" not in base and "failed" not in last:
            row += f"   {last[key]['eps'] / base[key]['eps']:.1f}x"
        print(row)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
    else:
        main()
