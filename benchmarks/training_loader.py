"""Training-loader throughput: Diffusion-Policy windows through each library's loader, workers as in training.

The same recorded data for every contender (``training/_data.py``, NumPy): ``pusht`` (one 96x96 camera,
state and action (2,), 100 episodes of 200 steps, 10 fps) and ``aloha`` (four 480x640 cameras, state and
action (14,), 6 episodes of 120 steps, 50 fps). Every frame codes its step and camera in flat cells, state
and action code the step exactly, so every batch is checked (``training/_loader_common.check_batch``).
One sample is a window: cameras and state at offsets ``[-1, 0]``, action at ``0..15``, edge-padded at
episode boundaries; batch 32, shuffled.

Contenders (``training/run_<name>.py``, each in its own python; see each script's docstring):

* ``trajstore-jpeg`` / ``trajstore-video``: ``ReplayBufferDataset(folder, delta_indices=...)`` in a
  ``DataLoader(num_workers=N, persistent_workers=True, shuffle=True)``; cameras JPEG (the default
  routing) or H.264 (``VideoStorage``); the project's python with this checkout's ``src``;
* ``lerobot``: LeRobot 0.4.4's ``LeRobotDataset(..., delta_timestamps=...)`` in the same DataLoader, over
  a v3.0 dataset LeRobot wrote itself (AV1 video, its default);
* ``torchrl``: TorchRL 0.14.1 ``SliceSampler`` over ``LazyMemmapStorage`` (raw frames), sampled in the
  main process with ``prefetch=N`` threads (TorchRL has no DataLoader dataset of windows);
* ``lancedb``: ``training/run_lancedb.py`` (the lancedb peer), when its script and venv exist.

Per row: steady-state samples/s (at least K timed batches and ``--min-seconds`` after a warm-up of at
least what the workers prefetch, wall clock), first-batch seconds (from
building the loader), peak RSS of the main process, peak PSS of the busiest worker, batches checked,
folder size, and the ratio of samples/s to the best trajstore row of the same shape and workers (> 1:
the contender is faster). Data and contenders' folders are written once into ``--workdir`` and reused by
later runs (``--fresh`` writes them again); all reads then come from the page cache. The machine's other
load makes single figures noisy: compare the ratios of one run.

Run: ``make bench-training`` or ``python benchmarks/training_loader.py [--shapes pusht,aloha] [--workers 2,4]
[--batches K] [--contenders ...] [--quick]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE / "training"))

import _data  # noqa: E402
import _harness as hx  # noqa: E402
import _venvs  # noqa: E402

TRAINING = HERE / "training"
CONTENDERS = ("trajstore-jpeg", "trajstore-video", "lerobot", "torchrl", "lancedb")
BATCHES = {"pusht": 100, "aloha": 6}  # timed batches per run (the aloha batches are ~100x bigger)
WARMUP = {"pusht": 10, "aloha": 1}
QUICK_DATA = {"pusht": (10, 100), "aloha": (2, 60)}  # (episodes, steps per episode) of --quick
QUICK_BATCHES = {"pusht": 20, "aloha": 3}  # at least this many timed batches with --quick ...
MIN_SECONDS = 3.0  # ... and at least this many seconds of steady state (both modes)
SHORT_SPAN_S = 2.0  # a row timed for less than this gets a warning under the table


def _per_shape(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


@dataclasses.dataclass
class Runner:
    """How to run one contender's script: its python, environment, and variant."""

    name: str
    script: Path
    python: Path | None
    env: dict[str, str]
    variant: str = ""
    unavailable: str | None = None

    def run(self, data: Path, *flags: str, timeout: float) -> dict:
        cmd = [str(self.python), str(self.script), "--data", str(data), *flags]
        if self.variant:
            cmd += ["--variant", self.variant]
        try:
            proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"failed": f"timed out after {timeout:.0f} s"}
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            err = [ln for ln in (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines())
                   if ln.strip() and "Svt[" not in ln]
            return {"failed": f"exit {proc.returncode}: {(err or ['no output'])[-1][:300]}"}
        return json.loads(lines[-1])


def runners(args: argparse.Namespace) -> list[Runner]:
    base = hx.base_env()
    out = []
    for name in args.contenders:
        if name.startswith("trajstore-"):
            env = dict(base, PYTHONPATH=str(args.src), TRAJSTORE_SRC=str(args.src))
            out.append(Runner(name, TRAINING / "run_trajstore.py", args.python, env, name.split("-", 1)[1]))
            continue
        script = TRAINING / f"run_{name}.py"
        if not script.exists():
            out.append(Runner(name, script, None, base, unavailable=f"no {script.relative_to(HERE.parent)}"))
            continue
        print(f"{name}: preparing its venv ...", file=sys.stderr, flush=True)
        py, reason = _venvs.peer_python(name, create=not args.no_install)
        out.append(Runner(name, script, py, dict(base), unavailable=reason))
    return out


def prepare(args: argparse.Namespace, shape: str, cons: list[Runner]) -> tuple[Path, dict[str, dict]]:
    """Write the shape's data and every contender's folder (reused when there); ``{name: build result}``."""
    data = args.workdir / ("quick-" + shape if args.quick else shape)
    if args.fresh:
        shutil.rmtree(data, ignore_errors=True)
    episodes, length = QUICK_DATA[shape] if args.quick else (None, None)
    t0 = time.perf_counter()
    _data.generate(data, shape, episodes, length)
    print(f"{shape}: data in {data} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    builds = {}
    order = sorted(cons, key=lambda c: c.name == "lancedb")  # lancedb converts DATA/lerobot
    for c in order:
        if c.unavailable:
            continue
        res = c.run(data, "--build", timeout=args.timeout * 3)
        builds[c.name] = res
        state = res.get("failed") or f"{res.get('build_s', 0):.0f} s, {res.get('folder_mib') or 0:.0f} MiB"
        print(f"{shape}: {c.name} folder: {state}", file=sys.stderr, flush=True)
    return data, builds


def measure(args: argparse.Namespace, shape: str, data: Path, cons: list[Runner], builds: dict) -> list[dict]:
    rows = []
    results = args.workdir / "results"
    batches = args.batches or (QUICK_BATCHES if args.quick else BATCHES)[shape]
    warmup = WARMUP[shape] if args.warmup is None else args.warmup
    for workers in args.workers:
        for c in cons:
            row = {"contender": c.name, "shape": shape, "workers": workers}
            if c.unavailable:
                rows.append({**row, "status": f"unavailable: {c.unavailable}"})
                continue
            if "failed" in builds.get(c.name, {}):
                rows.append({**row, "status": f"failed to build: {builds[c.name]['failed']}"})
                continue
            out = results / f"{shape}-{c.name}-{workers}.json"
            res = c.run(data, "--workers", str(workers), "--batch", str(args.batch), "--warmup-batches", str(warmup),
                        "--batches", str(batches), "--min-seconds", str(args.min_seconds), "--out", str(out),
                        timeout=args.timeout)
            if "failed" in res:
                res = {"status": f"failed: {res['failed']}"}
            elif "unavailable" in res:
                res = {"status": f"unavailable: {res['unavailable']}"}
            rows.append({**row, **res, "contender": c.name})
            print(f"{shape} workers={workers} {c.name}: "
                  f"{res.get('status') or '%.1f samples/s' % res['samples_per_s']}", file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict]) -> str:
    best = {}
    for r in rows:
        if r["contender"].startswith("trajstore") and r.get("samples_per_s"):
            k = (r["shape"], r["workers"])
            best[k] = max(best.get(k, 0.0), r["samples_per_s"])
    table = []
    for r in rows:
        label = f"{r['contender']} {r['shape']} w{r['workers']}"
        if "status" in r:
            table.append([label, r["status"]])
            continue
        checked = f"{r['batches_checked']} ({r['samples_checked']})"
        table.append([label, r["samples_per_s"], r["first_batch_s"], r["main_rss_mib"], r.get("worker_rss_mib"),
                      checked, r.get("folder_mib"), hx.ratio(r["samples_per_s"], best.get((r["shape"], r["workers"])))])
    lines = [hx.table(["contender shape workers", "samples/s", "first batch s", "main RSS MiB", "worker PSS MiB",
                       "batches (samples) checked", "folder MiB", "vs best trajstore"], table)]
    kinds = {r["rss_kind"] for r in rows if "rss_kind" in r}
    lines += [f"memory: {k}" for k in sorted(kinds)]
    notes = {}
    for r in rows:
        if r.get("notes"):
            notes.setdefault(r["contender"], r["notes"])
    lines += [f"  {name}: {text}" for name, text in notes.items()]
    for r in rows:
        if r.get("timed_s") is not None and r["timed_s"] < SHORT_SPAN_S:
            lines.append(f"warning: {r['contender']} {r['shape']} w{r['workers']} was timed over {r['timed_s']:.2f} s "
                         f"({r.get('timed_batches')} batches) only: its samples/s and ratio are noise")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="pusht,aloha", help="comma-separated shapes (pusht, aloha)")
    ap.add_argument("--workers", default="2,4", help="comma-separated DataLoader worker counts (default 2,4)")
    ap.add_argument("--batches", type=int, help=f"at least this many timed batches per run (default: "
                    f"{_per_shape(BATCHES)}; --quick: {_per_shape(QUICK_BATCHES)})")
    ap.add_argument("--min-seconds", type=float, default=MIN_SECONDS,
                    help="and at least this many seconds of timed steady state per row (default %(default)s)")
    ap.add_argument("--warmup", type=int, help=f"untimed, checked batches after the first (default: {_per_shape(WARMUP)}; "
                    "never fewer than the workers prefetch, prefetch_factor x workers)")
    ap.add_argument("--batch", type=int, default=32, help="windows per batch (default 32)")
    ap.add_argument("--contenders", default=",".join(CONTENDERS), help=f"comma-separated (default {','.join(CONTENDERS)})")
    ap.add_argument("--quick", action="store_true", help="small data (pusht 10x100 steps, aloha 2x60), workers 2 "
                                                         "unless --workers is given, fewer batches (still >= --min-seconds)")
    ap.add_argument("--workdir", type=Path, default=_venvs.peers_root() / "training",
                    help="where data, folders and results go (kept and reused; default %(default)s)")
    ap.add_argument("--fresh", action="store_true", help="write the data and every folder again")
    ap.add_argument("--src", type=Path, default=HERE.parent / "src", help="the trajstore source tree (default: this checkout's)")
    ap.add_argument("--python", type=Path, default=Path(sys.executable), help="the python that runs trajstore (default: this one)")
    ap.add_argument("--no-install", action="store_true", help="use peer venvs that exist; never build one")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per contender run (builds: 3x)")
    args = ap.parse_args()
    if args.quick and "--workers" not in " ".join(sys.argv):
        args.workers = "2"
    args.workers = [int(w) for w in args.workers.split(",") if w]
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = [c for c in args.contenders if c not in CONTENDERS]
    shapes = [s for s in args.shapes.split(",") if s]
    if unknown or any(s not in _data.SHAPES for s in shapes):
        ap.error(f"unknown contender or shape: {unknown or shapes} (contenders {CONTENDERS}, shapes {list(_data.SHAPES)})")
    args.workdir.mkdir(parents=True, exist_ok=True)
    cons = runners(args)
    rows = []
    t0 = time.perf_counter()
    for shape in shapes:
        data, builds = prepare(args, shape, cons)
        rows += measure(args, shape, data, cons, builds)
    print(f"\nTraining loader: windows (cameras + state at [-1, 0], action 0..15, edge-padded), batch {args.batch}, "
          f"shuffled; every batch checked (frames, state, action, padding flags where returned); timed >= "
          f"{args.min_seconds:g} s per row; run took {time.perf_counter() - t0:.0f} s"
          + (" (--quick: small data)" if args.quick else ""))
    print(report(rows))
    (args.workdir / "results").mkdir(exist_ok=True)
    (args.workdir / "results" / "last-run.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
