"""What the peer benchmarks share: the contenders, how one is run, and the tables.

A contender is one script in this folder, ``run_<library>.py``, run by a python of its own:

* ``trajstore`` once per ``--src LABEL=DIR``, with the project's python (the one running the
  benchmark, or ``--python``) and ``PYTHONPATH=DIR``, so that each source tree is measured in
  processes of its own (a tree that fails to import or run is reported as failed, and the
  others go on);
* every peer (``unienv``, ``torchrl``, ``lerobot``) with its venv's python (see ``_venvs``); a peer whose
  venv cannot be built is listed with the reason and skipped.

Each run is a fresh process that prints one JSON line (``_workload.run_contender``). Bytecode
is cached under ``~/.cache/trajstore-peers/pycache`` (``PYTHONPYCACHEPREFIX``), for every
contender alike, so that source trees are never written to and a process does not recompile
what an installed package would have had compiled.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import _venvs

HERE = Path(__file__).resolve().parent
REPO_SRC = HERE.parent.parent / "src"
PEER_NAMES = list(_venvs.PEERS)


class ContenderError(RuntimeError):
    """A contender's process failed or printed no result."""


@dataclasses.dataclass
class Contender:
    label: str
    script: Path
    python: Path | None
    env: dict[str, str]
    unavailable: str | None = None  # why this contender is skipped
    failed: str | None = None  # why it stopped during the run

    @property
    def ok(self) -> bool:
        return self.unavailable is None and self.failed is None

    @property
    def status(self) -> str:
        return f"unavailable: {self.unavailable}" if self.unavailable else f"failed: {self.failed}"

    def run(self, *args: str, timeout: float = 600) -> tuple[float, dict[str, Any]]:
        """Run the script with ``args`` in a fresh process: ``(wall seconds, its JSON result)``."""
        cmd = [str(self.python), str(self.script), *args]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ContenderError(f"{' '.join(args[:1])} timed out after {timeout:.0f} s") from exc
        wall = time.perf_counter() - t0
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
            raise ContenderError(f"{args[0]} exited with {proc.returncode}: {tail[:300]}")
        return wall, json.loads(lines[-1])


def _base_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("PYTHONPATH", "TRAJSTORE_SRC", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME"):
        env.pop(var, None)
    env["PYTHONPYCACHEPREFIX"] = str(_venvs.peers_root() / "pycache")
    return env


def base_env() -> dict[str, str]:
    """The environment every contender process gets: this one's, without a ``PYTHONPATH`` (or another
    variable that would point a peer's python at this checkout), bytecode cached under the peers' folder."""
    return _base_env()


def parse_src(value: str) -> tuple[str, Path]:
    label, sep, path = value.partition("=")
    if not sep:
        label, path = Path(value).resolve().parent.name, value
    p = Path(path).expanduser().resolve()
    if not (p / "trajstore").is_dir():
        raise argparse.ArgumentTypeError(f"{p} holds no trajstore package")
    return label, p


def add_source_arguments(ap: argparse.ArgumentParser) -> None:
    """``--src LABEL=DIR`` (repeatable) and ``--python``: the trajstore trees a before/after benchmark runs."""
    ap.add_argument("--src", action="append", type=parse_src, metavar="LABEL=DIR",
                    help=f"a trajstore source tree to measure (repeatable; default: this checkout's {REPO_SRC})")
    ap.add_argument("--python", type=Path, default=Path(sys.executable), help="the python that runs trajstore")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--src", action="append", type=parse_src, metavar="LABEL=DIR",
                    help="a trajstore source tree to measure (repeatable; the first is the baseline of the ratios; "
                         f"default: this checkout's {REPO_SRC})")
    ap.add_argument("--python", type=Path, default=Path(sys.executable),
                    help="the python that runs trajstore (default: the one running this script; it needs the "
                         "project's dependencies)")
    ap.add_argument("--peers", default=",".join(PEER_NAMES),
                    help=f"comma-separated peers to compare with (default: {','.join(PEER_NAMES)}; '' for none)")
    ap.add_argument("--no-install", action="store_true", help="use peer venvs that exist; never build one")
    ap.add_argument("--workdir", type=Path,
                    help="where workload and buffers go (default: a new folder under ~/.cache/trajstore-peers/tmp, "
                         "removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")


def workdir(args: argparse.Namespace, prefix: str) -> Path:
    """``--workdir``, or a new temporary folder next to the peer venvs (not in a shared /tmp)."""
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return args.workdir
    root = _venvs.peers_root() / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


def run_sources(cons: Sequence[Contender], work: Path, script: Path, child_flag: str,
                config: Callable[[int, Path], dict], timeout: float, keep: bool) -> dict[str, dict]:
    """Run ``script`` with ``child_flag`` under each contender (a trajstore source), one after the other:
    contender ``i`` gets ``json.dumps(config(i, work / f"src{i}"))`` and its own folder ``work/src{i}``
    (removed after unless ``keep``; ``work`` too). Returns ``{label: result}`` with ``{"failed": why}``
    for a contender that failed (its error is printed, the others still run)."""
    results: dict[str, dict] = {}
    try:
        for i, c in enumerate(cons):
            c = dataclasses.replace(c, script=script)
            try:
                _, res = c.run(child_flag, json.dumps(config(i, work / f"src{i}")), timeout=timeout)
            except ContenderError as exc:
                results[c.label] = {"failed": str(exc)}
                print(f"{c.label}: failed: {exc}", file=sys.stderr, flush=True)
                continue
            finally:
                if not keep:
                    shutil.rmtree(work / f"src{i}", ignore_errors=True)
            results[c.label] = res
            print(f"{c.label}: done", file=sys.stderr, flush=True)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return results


def contenders(args: argparse.Namespace) -> list[Contender]:
    """Every contender of the run, trajstore sources first, in the order of the command line."""
    out = []
    base = _base_env()
    for label, src in args.src or [("this", REPO_SRC)]:
        env = dict(base, PYTHONPATH=str(src), TRAJSTORE_SRC=str(src))
        out.append(Contender(f"trajstore {label}", HERE / "run_trajstore.py", args.python, env))
    for name in [p.strip() for p in args.peers.split(",") if p.strip()]:
        print(f"peer {name}: preparing its venv ...", file=sys.stderr, flush=True)
        py, reason = _venvs.peer_python(name, create=not args.no_install)
        out.append(Contender(name, HERE / f"run_{name}.py", py, dict(base), unavailable=reason))
        if reason:
            print(f"peer {name}: unavailable: {reason}", file=sys.stderr, flush=True)
    return out


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: Sequence[float]) -> str:
    """The range of ``values`` around their median, in percent: how much to trust the median."""
    if len(values) < 2:
        return "-"
    m = statistics.median(values)
    return f"{(max(values) - min(values)) / m * 100:.0f}%" if m else "-"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table; the first column is left-aligned, the others right-aligned."""
    cells = [[str(c) for c in header]] + [[c if isinstance(c, str) else fmt(c) for c in r] for r in rows]
    full = [r for r in cells if len(r) == len(header)]
    widths = [max([len(r[i]) for r in full] + [len(r[0]) for r in cells if i == 0]) for i in range(len(header))]
    lines = []
    for k, r in enumerate(cells):
        if len(r) < len(header):  # a contender that did not run: its status spans the row
            lines.append(f"{r[0]:<{widths[0]}}  {r[1]}")
            continue
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != value:
            return "-"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        a = abs(value)
        return f"{value:.0f}" if a >= 100 else f"{value:.1f}" if a >= 10 else f"{value:.2f}" if a >= 1 \
            else f"{value:.3f}"
    return str(value)


def ratio(value: float | None, base: float | None) -> str:
    if value is None or base is None or base == 0 or value != value or base != base:
        return "-"
    return f"x{value / base:.2f}"
