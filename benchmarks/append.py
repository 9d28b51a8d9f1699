"""Recording cost: trajstore sources side by side with the peers, step by step and episode by episode.

The workload (``benchmarks/peers/_workload.py``): 2048 steps in 16 episodes of 128, one step a
128x128x3 uint8 camera frame (``kind="image"``) and four low-dim leaves (joint positions and
velocities, action, reward). Every contender records it into a new folder, in a fresh process
of its own, in two modes:

* ``append``: one call per step, and the contender's end-of-episode call every 128 steps;
* ``extend``: one call per episode with its 128 steps as a batch, then the end-of-episode call.

The end of an episode is the point where the episode is on disk and the folder reopens with it:
trajstore ``end_episode()`` (flushes and commits); UniEnv ``mark_segment_end()`` (after appends)
and ``dumps()`` into the buffer's own folder; TorchRL ``dumps()`` (no copy: its memory-mapped
storage lives in that folder); LeRobot ``save_episode()`` (parquet rows, the episode's video,
metadata; it records with ``add_frame`` per step only, so it has no ``extend`` row). See each ``peers/run_<library>.py`` for the exact calls. Steps
are built before the clock starts (nested dicts of NumPy arrays; TensorDicts for TorchRL).

Measured per contender and mode, medians of ``--rounds`` (3) rounds, the contenders alternating
(the order rotates every round), each run a fresh process:

* ``us/step``: from creating the buffer to closing it, over the 2048 steps; ``range``: max - min
  of the rounds over their median (other load on the machine widens it);
* ``episode end ms``: the end-of-episode call alone, per episode (part of ``us/step``);
* ``MB``: bytes of all files in the folder; ``MB alloc``: what the file system allocated;
* correctness (first round): the folder is reopened and every step read back; low-dim leaves
  must be exact (``low-dim``), frames are compared by PSNR (min / mean dB; ``inf`` = exact);
  trajstore must also record 16 episodes;
* ratios: contender / the first trajstore ``--src`` (> 1: slower or larger than it).

Camera storage: trajstore JPEG quality 75 (if the source takes the option) in chunk files;
UniEnv JPEG quality 75 (Pillow, one file per frame); TorchRL raw frames; LeRobot AV1 video
(its default: PNG files from 4 writer threads, encoded by libsvtav1 at ``save_episode``). Files stay in the page
cache; only trajstore asks for fsync at its commit points. No timing is asserted anywhere.

Mode ``validate`` (trajstore sources only, no peer, no disk): the caller's validation of one step,
``validated_step`` as ``ReplayBuffer.append`` runs it, on 64 steps built by the recorder
(``StepRecorder.record``, as ``RecordEpisodes`` does: observation leaves, action, ``np.float32``
reward, Python bool ``terminated``/``truncated``) for three layouts: ``camera`` (the workload's
observation leaves, a (7,) float32 action), ``camera+text`` (the same with a ``TextSpace(64)``
instruction among the observation leaves) and ``cartpole`` ((4,) float32 observation, a
Discrete(2) action as ``np.int64``). Beside it, in the same process with the repeats alternating: the same step
without the two flags, the flags as bool ``BoxSpace`` leaves, and the full validation
(``Space.validate``, the path any ``BinarySpace`` leaf forced before). us/step: the fastest of 40
repeats of 500 calls per process, median of ``--rounds`` processes per source.

Run (the project's python; peers get venvs of their own under ``~/.cache/trajstore-peers``)::

    python benchmarks/append.py --src before=OLD_CHECKOUT/src --src after=src [--rounds 3]
    python benchmarks/append.py --src before=OLD_CHECKOUT/src --src after=src --modes validate --peers ''

Figures (2 cores shared with other jobs: load average 2-9 during the runs, so absolute times move by
2x between runs; the ratios of one run are what counts). ``main`` is the tree before the speed
work, ``speed`` after it; us/step, medians of 3 alternating rounds, three runs (A and B with a later
reverted commit that counted statistics during the block write, C the final tree):

==============  ============  ============  ============  ===========  ===========  ===========  =====
contender       append A      append B      append C      extend A     extend B     extend C     MB
==============  ============  ============  ============  ===========  ===========  ===========  =====
trajstore main  990           1344          807           584          602          428          4.84
trajstore speed 434           677           441           364          448          424          3.57
unienv          5116 (11.8x)  4180 (6.2x)   5233 (11.9x)  2389 (6.6x)  2873 (6.4x)  1845 (4.4x)  4.74
torchrl         6782 (15.6x)  11121 (16x)   4686 (10.6x)  459 (1.3x)   724 (1.6x)   320 (0.75x)  101
lerobot         14368 (33x)   -             -             unsupported  -            -            1.55
==============  ============  ============  ============  ===========  ===========  ===========  =====

(x: peer / trajstore speed. TorchRL's per-step ``add`` is Python-heavy and suffered most from the
load: on a quieter machine before this work it took 419-439 us/step against main's 515-572, so
"append <= TorchRL" is shown here only under load. ``extend`` >= 5x UniEnv held in A and B, not in
C (4.4x, ranges of 65-81% in that run).) Disk at UniEnv's settings (q75 4:2:0): 3.57 MB = 0.75x
UniEnv's 4.74, every frame decoding as main's did (33.8 / 35.3 dB). What gave what (``speed``
commits one by one, CPU us/step of the append workload in-process, medians of 2 under load): 640
main; 574 a validation fast path (``spaces/step_check.py``: 92 -> 16 us per step); 498 HDF5 block
writes through h5py's low-level calls (379 -> 107 us per leaf and block); 484 the commit's fsyncs
in parallel; the JPEG header kept once: -1.27 MB (623 of ~2177 bytes a frame); 491 float leaves'
statistics joined (3.0 -> 1.4 ms per 21-step block); 364 blocks of 4 MiB instead of 1 MiB.

On a quiet machine after every merge (``--peers unienv,torchrl --rounds 3``, two runs), us/step:
append trajstore 347 / 344, UniEnv 2731 / 3519 (7.9x / 10.2x), TorchRL 426 / 431 (1.23x / 1.25x);
extend trajstore 252 / 241, UniEnv 1348 / 1591 (5.35x / 6.6x), TorchRL 159 / 176 (0.63x / 0.73x);
disk 3.57 MB, 0.75x UniEnv's 4.74 MB at the same JPEG settings (PSNR 33.8 / 35.3 dB).

Validation, one pass for every leaf type (``--modes validate --peers '' --rounds 5``; ``before`` the
tree where a ``BinarySpace`` leaf turned the fast path off, ``after`` one fast path that bool, text
and box leaves all take; load average 9-21 on 2 cores; three runs), us/step:

* camera: before 18.0 / 21.1 / 17.9, after 5.61 / 5.57 / 5.97 (x0.31 / x0.26 / x0.33); the flags'
  cost (step / no flags) before x3.6-4.5, after x1.15-1.18; full validation 17-21;
* cartpole: before 13.3 / 13.1 / 13.0, after 6.74 / 6.76 / 7.05 (x0.51 / x0.52 / x0.54); the flags'
  cost before x2.1-2.3, after x1.11-1.14; full validation 12-13;
* camera+text (a fourth run, the others in it as above to 0.2 us): before 19.4, after 6.33 (x0.33);
  without the flags before 17.3 (the text leaf alone left the fast path), after 5.55: the text leaf
  costs 0.65 us over ``camera`` (4.90), like one more box leaf.

The two flags now cost what two bool ``BoxSpace`` leaves do (step / box flags x0.96-0.99; before
x0.86-0.94, as a Python bool for a Box leaf also left the fast path); ``full``, the old path for
such a step, is x3-3.7 (camera) and x1.8-1.9 (cartpole) the new one. The recording rows above do
not change: the workload has no bool or text leaf (``--peers '' --rounds 5``, load average 3-9:
append 291 before, 225 after; extend 203 / 238, ranges 99-242%: noise).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402
import _workload as wl  # noqa: E402

MODES = ("append", "extend", "validate")
RECORDING_MODES = ("append", "extend")


def main() -> None:
    if sys.argv[1:2] == [VALIDATION_CHILD]:
        print(json.dumps(validation_child()))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_arguments(ap)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every contender and mode (default 3)")
    ap.add_argument("--modes", default=",".join(MODES), help="append, extend, validate (default: all three)")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        ap.error(f"--modes takes {', '.join(MODES)}")
    recording = [m for m in modes if m in RECORDING_MODES]
    cons = hx.contenders(args) if recording else hx.contenders(argparse.Namespace(**{**vars(args), "peers": ""}))
    work = hx.workdir(args, "append-")
    try:
        if recording:
            results = run(args, cons, recording, work)
            report(args, cons, recording, results)
        if "validate" in modes:
            report_validation(args, run_validation(args, [c for c in cons if c.script.name == "run_trajstore.py"]))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, cons: list[hx.Contender], modes: list[str], work: Path) -> dict:
    workload = wl.generate(work / "workload")
    results: dict[tuple[str, str], list[dict]] = {(c.label, m): [] for c in cons for m in modes}
    failed: dict[tuple[str, str], str] = {}
    live = [c for c in cons if c.ok]
    for r in range(args.rounds):
        k = r % max(1, len(live))
        for c in live[k:] + live[:k]:
            for mode in modes:
                if (c.label, mode) in failed:
                    continue
                out = work / f"{cons.index(c)}-{mode}-{r}"
                extra = ["--check"] if r == 0 else []
                try:
                    _, res = c.run("write", "--workload", str(workload), "--out", str(out), "--mode", mode, *extra)
                except hx.ContenderError as exc:
                    failed[(c.label, mode)] = str(exc)
                    continue
                finally:
                    shutil.rmtree(out, ignore_errors=True)
                if "unsupported" in res:
                    failed[(c.label, mode)] = f"unsupported: {res['unsupported']}"
                    continue
                results[(c.label, mode)].append(res)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    return {"runs": results, "failed": failed}


def report(args: argparse.Namespace, cons: list[hx.Contender], modes: list[str], results: dict) -> None:
    runs, failed = results["runs"], results["failed"]
    base_label = cons[0].label
    print(f"\nRecord {wl.STEPS} steps ({wl.STEPS // wl.EPISODE_LEN} episodes of {wl.EPISODE_LEN}; "
          f"{wl.H}x{wl.W}x3 camera + 4 low-dim leaves); medians of {args.rounds} round(s), alternating; "
          f"ratios vs {base_label}")
    for mode in modes:
        what = "append per step" if mode == "append" else f"extend per episode ({wl.EPISODE_LEN} steps)"
        print(f"\n== {what}, plus the end-of-episode call every {wl.EPISODE_LEN} steps")
        med = {}
        for c in cons:
            rs = runs[(c.label, mode)]
            if rs:
                us = [x["total_s"] / x["steps"] * 1e6 for x in rs]
                med[c.label] = {"us": hx.median(us), "spread": hx.spread(us),
                                "end": hx.median([x["end_episode_s"] / (x["steps"] / wl.EPISODE_LEN) * 1e3
                                                  for x in rs]),
                                "mb": rs[0]["bytes"] / 1e6, "alloc": rs[0]["bytes_allocated"] / 1e6,
                                "check": rs[0].get("check", {}), "camera": rs[0].get("camera", "")}
        base = med.get(base_label, {})
        rows = []
        for c in cons:
            if c.label not in med:
                why = failed.get((c.label, mode))
                status = (why if why.startswith("unsupported") else f"failed: {why}") if why else c.status
                rows.append([c.label, status])
                continue
            m, ck = med[c.label], med[c.label]["check"]
            psnr = f"{hx.fmt(ck.get('psnr_min'))} / {hx.fmt(ck.get('psnr_mean'))}" if ck else "-"
            exact = "-" if not ck else ("exact" if ck.get("low_dim_exact") and not ck.get("problems") else "WRONG")
            rows.append([c.label, m["us"], m["spread"], m["end"], m["mb"], m["alloc"], psnr, exact,
                         hx.ratio(m["us"], base.get("us")), hx.ratio(m["mb"], base.get("mb")), m["camera"]])
        print(hx.table(["contender", "us/step", "range", "episode end ms", "MB", "MB alloc", "PSNR min / mean dB",
                        "low-dim", "ratio time", "ratio MB", "camera"], rows))
        for c in cons:
            ck = med.get(c.label, {}).get("check", {})
            if ck.get("problems"):
                print(f"  {c.label}: {'; '.join(ck['problems'])}")
            if (c.label, mode) in failed and c.label in med:
                print(f"  {c.label}: a later round failed: {failed[(c.label, mode)]}")


# -- validate: the caller's validation time per step, with the recorder's step layout -------------
VALIDATION_CHILD = "--validation-child"
VALIDATION_CALLS = 500  # calls per timed repeat
VALIDATION_REPEATS = 40  # repeats per process; the fastest is the process's figure (the least disturbed by load)


def run_validation(args: argparse.Namespace, cons: list[hx.Contender]) -> dict[str, list[dict[str, Any]]]:
    """Every trajstore source's validation figures, ``--rounds`` fresh processes each, alternating."""
    runs: dict[str, list[dict[str, Any]]] = {c.label: [] for c in cons}
    live = [c for c in cons if c.ok]
    for r in range(args.rounds):
        k = r % max(1, len(live))
        for c in live[k:] + live[:k]:
            proc = subprocess.run([str(c.python), str(Path(__file__).resolve()), VALIDATION_CHILD], env=c.env,
                                  capture_output=True, text=True, timeout=600)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"{c.label}: validation failed: {tail[:300]}", file=sys.stderr, flush=True)
                continue
            runs[c.label].append(json.loads(lines[-1]))
        print(f"validation round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    return runs


def report_validation(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> None:
    labels = [label for label, rs in runs.items() if rs]
    if not labels:
        print("\n== validate: no trajstore source ran")
        return
    base = labels[0]
    print(f"\n== validate: the caller's validation of one step (validated_step, as ReplayBuffer.append runs it), "
          f"us/step; medians of {args.rounds} process(es), each the fastest of {VALIDATION_REPEATS} repeats of "
          f"{VALIDATION_CALLS} calls; ratios vs {base}")
    med = {label: {layout: {k: hx.median([r[layout][k] for r in rs]) for k in rs[0][layout]}
                   for layout in rs[0]} for label, rs in runs.items() if rs}
    rows = []
    for label in labels:
        for layout, m in med[label].items():
            b = med[base].get(layout, {})
            rows.append([f"{label} {layout}", m["step"], hx.ratio(m["step"], b.get("step")),
                         m["no_flags"], hx.ratio(m["step"], m["no_flags"]), m["box_flags"],
                         hx.ratio(m["step"], m["box_flags"]), m["full"], hx.ratio(m["step"], m["full"])])
    print(hx.table(["source, layout", "us/step", "ratio", "no flags", "step / no flags", "box flags",
                    "step / box flags", "full", "step / full"], rows))
    print("  no flags: the same step without terminated/truncated; box flags: with the flags as bool BoxSpace "
          "leaves instead of BinarySpace ones; full: Space.validate of the step, its leaves as arrays (the path a "
          "step with a bool leaf took before the one-pass check)")


def validation_child() -> dict[str, dict[str, float]]:
    """In a process of one trajstore source: us per call of ``validated_step`` on steps as
    ``RecordEpisodes`` builds them (``StepRecorder.record``), for three layouts."""
    import numpy as np

    from trajstore.integrations.recorded_step import StepRecorder, step_space
    from trajstore.spaces import BoxSpace, DictSpace, TextSpace, tree
    from trajstore.storages.base import validated_step

    rng = np.random.default_rng(0)
    obs_leaves = [(k.split("/", 1)[1], shape, dt, lo, hi, meta) for k, shape, dt, lo, hi, meta in wl.LEAVES
                  if k.startswith("observation/")]
    camera_obs = DictSpace({key: BoxSpace(lo, hi, shape, dt, metadata=meta or None)
                            for key, shape, dt, lo, hi, meta in obs_leaves})
    layouts = {  # (observation space, action space, one observation, one action)
        "camera": (camera_obs, BoxSpace(-1, 1, (7,), np.float32),
                   lambda: {key: rng.uniform(0, 1 if dt == "float32" else 255, shape).astype(dt)
                            for key, shape, dt, *_ in obs_leaves},
                   lambda: rng.uniform(-1, 1, 7).astype(np.float32)),
        "cartpole": (BoxSpace(-4.8, 4.8, (4,), np.float32), BoxSpace(0, 1, (), np.int64),  # Discrete(2)
                     lambda: rng.uniform(-1, 1, 4).astype(np.float32), lambda: np.int64(rng.integers(0, 2))),
    }
    # camera with a language instruction among the observation leaves (gymnasium Text(64) -> TextSpace)
    layouts["camera+text"] = (DictSpace({**camera_obs.spaces, "instruction": TextSpace(64)}), layouts["camera"][1],
                              lambda: {**layouts["camera"][2](), "instruction": "push the red block to the left"},
                              layouts["camera"][3])
    with tempfile.TemporaryDirectory() as tmp:
        recorder = StepRecorder(os.path.join(tmp, "new"), render_key=None, info_keys=(), image_keys=(),
                                capacity=None, routing=None, fps=None)
        out = {}
        for name, (obs_space, action_space, obs, action) in layouts.items():
            space = step_space(obs_space, action_space)
            steps = [recorder.record(recorder.observation(obs(), None), action(), float(rng.normal()),
                                     bool(i % 64 == 63), False, {}) for i in range(64)]
            no_flags = DictSpace({k: v for k, v in space.spaces.items() if k not in ("terminated", "truncated")})
            box_flags = DictSpace({**space.spaces, "terminated": BoxSpace(0, 1, (), bool),
                                   "truncated": BoxSpace(0, 1, (), bool)})
            bare = [{k: v for k, v in s.items() if k not in ("terminated", "truncated")} for s in steps]

            def full(s: Any, space: Any = space) -> Any:
                return [np.asarray(v)[None] for v in tree.flatten(space, space.validate(s))]

            out[name] = _time_calls({"step": (lambda s, space=space: validated_step(space, s), steps),
                                     "no_flags": (lambda s, space=no_flags: validated_step(space, s), bare),
                                     "box_flags": (lambda s, space=box_flags: validated_step(space, s), steps),
                                     "full": (full, steps)})
    return out


def _time_calls(cases: dict[str, tuple[Any, list[Any]]]) -> dict[str, float]:
    """Per case ``name: (fn, items)``, the fastest repeat's us per call of ``fn(item)`` (cycling
    through ``items``); the cases' repeats alternate, so that load on the machine hits them alike."""
    for fn, items in cases.values():
        for item in items:
            fn(item)  # warm: caches built once per space
    best = {name: float("inf") for name in cases}
    for _ in range(VALIDATION_REPEATS):
        for name, (fn, items) in cases.items():
            calls = [items[i % len(items)] for i in range(VALIDATION_CALLS)]
            t0 = time.perf_counter()
            for item in calls:
                fn(item)
            best[name] = min(best[name], (time.perf_counter() - t0) / len(calls) * 1e6)
    return best


if __name__ == "__main__":
    main()
