"""Reopening a recorded buffer in a fresh process: trajstore sources side by side with the peers.

The workload (``benchmarks/peers/_workload.py``): 2048 steps in 16 episodes of 128, one step a
128x128x3 uint8 camera frame (``kind="image"``) and four low-dim leaves. Each contender first
records it into a folder of its own as ``benchmarks/append.py`` does (``--record append``: step
by step, its end-of-episode call every 128 steps; ``extend``: one batch per episode), and reads
it all back once to check it. Then, ``--processes`` times (at least 7), each
contender in turn (the order rotates every round) runs two fresh processes:

* ``reopen``: start python, import the library, then, timed inside the process, open the
  folder (trajstore and UniEnv ``ReplayBuffer.load_from``; TorchRL ``ReplayBuffer.loads`` onto
  rebuilt matching components) and read one step (``--index``, all leaves, each copied into an
  owned NumPy array), then exit;
* ``import``: start python, do the same imports, exit.

Reported, as medians over the processes:

* ``open+read ms``: open plus first read, timed in the process after its imports (what a
  worker pays for the folder itself). The imports include the storage modules and codecs of
  the layout that a library would otherwise import lazily while opening (UniEnv's HDF5 and
  image storages with h5py and Pillow, trajstore's JPEG codec);
* ``open ms`` and ``read ms``: the two parts;
* ``process ms``: wall time of the whole ``reopen`` process, as the benchmark sees it
  (interpreter start, imports, open, read, exit);
* ``import ms``: wall time of the ``import`` process; ``process - import``: the difference,
  another estimate of what opening and reading cost;
* ``range``: max - min of the processes over their median, for the column before it (other
  load on the machine widens it);
* ratios: contender / the first trajstore ``--src`` (> 1: slower than it).

All files are in the page cache (the folder was just written and read): this measures CPU,
syscalls and imports, not the disk. Bytecode of every contender is cached outside the source
trees before the timed rounds (see ``peers/_harness.py``). No timing is asserted anywhere.

Run (the project's python; peers get venvs of their own under ``~/.cache/trajstore-peers``)::

    python benchmarks/reopen.py --src before=OLD_CHECKOUT/src --src after=src [--processes 9]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402
import _workload as wl  # noqa: E402

MIN_FRAME_PSNR = 25.0  # dB; the frame read must also match its own step better than the neighbouring ones


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_arguments(ap)
    ap.add_argument("--processes", type=int, default=9, help="fresh processes per contender (>= 7; default 9)")
    ap.add_argument("--index", type=int, default=1234, help="the step read after opening (default 1234)")
    ap.add_argument("--record", choices=["append", "extend"], default="append",
                    help="how the buffers are recorded before the rounds (default: append, step by step)")
    args = ap.parse_args()
    if args.processes < 7:
        ap.error("--processes must be at least 7")
    cons = hx.contenders(args)
    work = hx.workdir(args, "reopen-")
    try:
        run(args, cons, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, cons: list[hx.Contender], work: Path) -> None:
    workload = wl.generate(work / "workload")
    folders = {}
    checks = {}
    for i, c in enumerate(cons):
        if not c.ok:
            continue
        folders[c.label] = work / f"buffer{i}"
        try:
            _, res = c.run("write", "--workload", str(workload), "--out", str(folders[c.label]), "--mode", args.record,
                           "--check")
            checks[c.label] = res
            _, res = c.run("reopen", "--path", str(folders[c.label]), "--index", str(args.index),
                           "--workload", str(workload))  # warms bytecode and page cache; checks the step
            q, q_near = res.get("frame_psnr") or 0.0, res.get("frame_psnr_neighbours") or 0.0
            if not res.get("step_ok") or not (q >= MIN_FRAME_PSNR and q > q_near):
                raise hx.ContenderError(f"step {args.index} read after reopening differs from the one written "
                                        f"(low-dim equal: {res.get('step_ok')}, frame PSNR {q:.1f} dB, "
                                        f"{q_near:.1f} dB against the neighbouring steps' frames)")
            c.run("import")
        except hx.ContenderError as exc:
            c.failed = str(exc)
        print(f"{c.label}: recorded and checked" if c.ok else f"{c.label}: {c.status}", file=sys.stderr, flush=True)

    samples: dict[str, dict[str, list[float]]] = {c.label: {k: [] for k in ("open", "read", "wall", "imp")}
                                                 for c in cons}
    live = [c for c in cons if c.ok]
    for r in range(args.processes):
        for c in live[r % max(1, len(live)):] + live[:r % max(1, len(live))]:
            if not c.ok:
                continue
            try:
                wall, res = c.run("reopen", "--path", str(folders[c.label]), "--index", str(args.index))
                imp, _ = c.run("import")
            except hx.ContenderError as exc:
                c.failed = str(exc)
                continue
            s = samples[c.label]
            s["open"].append(res["open_ms"])
            s["read"].append(res["read_ms"])
            s["wall"].append(wall * 1e3)
            s["imp"].append(imp * 1e3)
        print(f"round {r + 1}/{args.processes} done", file=sys.stderr, flush=True)

    report(args, cons, samples, checks)


def report(args: argparse.Namespace, cons: list[hx.Contender], samples: dict, checks: dict) -> None:
    med = {}
    for c in cons:
        s = samples[c.label]
        if c.ok and s["open"]:
            both = [o + r for o, r in zip(s["open"], s["read"])]
            med[c.label] = {"both": hx.median(both), "both_spread": hx.spread(both),
                            "open": hx.median(s["open"]), "read": hx.median(s["read"]),
                            "wall": hx.median(s["wall"]), "wall_spread": hx.spread(s["wall"]),
                            "imp": hx.median(s["imp"]),
                            "diff": hx.median([w - i for w, i in zip(s["wall"], s["imp"])])}
    base_label = cons[0].label
    base = med.get(base_label, {})
    rows = []
    for c in cons:
        if c.label not in med:
            rows.append([c.label, c.status])
            continue
        m = med[c.label]
        rows.append([c.label, m["both"], m["both_spread"], m["open"], m["read"], m["wall"], m["wall_spread"],
                     m["imp"], m["diff"],
                     hx.ratio(m["both"], base.get("both")), hx.ratio(m["wall"], base.get("wall"))])
    print(f"\nReopen a {wl.STEPS}-step buffer ({wl.STEPS // wl.EPISODE_LEN} episodes of {wl.EPISODE_LEN}; "
          f"{wl.H}x{wl.W}x3 camera + 4 low-dim leaves; recorded with {args.record}) in a fresh process and "
          f"read step {args.index}; medians of {args.processes} processes per contender, alternating; "
          f"ratios vs {base_label}")
    print(hx.table(["contender", "open+read ms", "range", "open ms", "read ms", "process ms", "range", "import ms",
                    "process-import ms", "ratio open+read", "ratio process"], rows))
    print("\nbuffers as recorded (checked by reading every step back):")
    for c in cons:
        res = checks.get(c.label)
        if res is None:
            continue
        ck = res.get("check", {})
        print(f"  {c.label}: {res['bytes'] / 1e6:.1f} MB, camera {res.get('camera')}, low-dim exact "
              f"{ck.get('low_dim_exact')}, PSNR min/mean {hx.fmt(ck.get('psnr_min'))}/{hx.fmt(ck.get('psnr_mean'))} dB"
              + (f", problems: {'; '.join(ck['problems'])}" if ck.get("problems") else ""))
    for c in cons:
        if c.label in med and not c.ok:
            print(f"  {c.label}: stopped during the rounds: {c.failed}")


if __name__ == "__main__":
    main()
