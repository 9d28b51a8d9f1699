"""What every contender of the training-loader benchmark shares: its command line, the truth, the check
of a batch and the measurement (NumPy, the standard library and torch only: it runs in every venv).

A contender script ``run_<name>.py`` (run by its library's python) does::

    args = parse_args()
    truth = load_truth(args.data)
    if args.build: ...write its folder from DATA/raw or DATA/lerobot...; return
    measure(make_loader, to_numpy, truth, args)

Frames are checkable: each one carries the code of its global step and camera (``_frame_code``, whose
names this module re-exports); state and action code the global step exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _frame_code import (CAMERA_BITS, CODE_COLS, CODE_ROWS, MAX_CELL_ERROR, ONE, STEP_BITS,  # noqa: E402,F401
                         ZERO, action_values, cell_size, code_bits, decode_frames, paint_code, state_values)

# ---- the windows ---------------------------------------------------------------------------------

OBS_OFFSETS = (-1, 0)  # cameras and state
ACTION_OFFSETS = tuple(range(16))
STATE_KEY = "observation/state"
ACTION_KEY = "action"
INDEX_KEY = "index"
PAD_SUFFIX = "_is_pad"  # "<key>_is_pad": (B, T) bool, True where offset o of the window lies outside the episode

# ---- the command line and the truth --------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``--data DATA --workers N --batch 32 --warmup-batches W --batches K --out RESULT.json [--build]``
    (plus ``--min-seconds S``: time until both K batches and S seconds are reached; ``--variant`` for a contender with several layouts and ``--seed`` for the shuffle)."""
    ap = argparse.ArgumentParser(description="one contender of benchmarks/training_loader.py")
    ap.add_argument("--data", required=True, help="the shape's data folder (raw/, meta.json, contenders' folders)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    ap.add_argument("--batch", type=int, default=32, help="windows per batch (default 32)")
    ap.add_argument("--warmup-batches", type=int, default=4, help="checked, untimed batches after the first")
    ap.add_argument("--batches", type=int, default=20, help="at least this many timed batches (each checked)")
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="keep timing batches until at least this many seconds have passed too (default 0)")
    ap.add_argument("--out", help="where the result JSON goes (also printed as one line)")
    ap.add_argument("--build", action="store_true", help="write the contender's own folder and exit")
    ap.add_argument("--variant", default="", help="a layout of the contender (e.g. trajstore: jpeg, video)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the shuffle")
    return ap.parse_args(argv)


@dataclasses.dataclass
class Truth:
    """The recorded data of one shape (``DATA/raw``).

    ``arrays``: ``{"observation/state": (N, D) float32, "action": (N, D) float32}``; ``episode_ends``:
    int64 cumulative ends (episode ``e`` holds steps ``[ends[e-1], ends[e])``); ``meta``: meta.json;
    ``frame_shape``: ``(H, W, 3)``.
    """

    data: Path
    meta: dict[str, Any]
    episode_ends: np.ndarray
    arrays: dict[str, np.ndarray]
    frame_shape: tuple[int, int, int]

    @property
    def cameras(self) -> list[str]:
        return list(self.meta["cameras"])

    @property
    def steps(self) -> int:
        return int(self.episode_ends[-1])

    @property
    def fps(self) -> float:
        return float(self.meta["fps"])

    def offsets(self) -> dict[str, tuple[int, ...]]:
        """``{key: offsets}`` of every windowed key (cameras and state ``[-1, 0]``, action ``0..15``)."""
        return {**{k: OBS_OFFSETS for k in self.cameras + [STATE_KEY]}, ACTION_KEY: ACTION_OFFSETS}

    def episode_bounds(self, steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(first, last)`` global step of the episode holding each of ``steps``."""
        ep = np.searchsorted(self.episode_ends, steps, side="right")
        starts = np.concatenate([[0], self.episode_ends[:-1]])
        return starts[ep], self.episode_ends[ep] - 1


def leaf_file(key: str) -> str:
    """The ``.npy`` name of leaf ``key`` in ``DATA/raw`` ("/" becomes "__")."""
    return key.replace("/", "__") + ".npy"


def load_truth(data: str | os.PathLike) -> Truth:
    """The raw arrays, episode ends and meta of ``DATA/raw`` (frames are not loaded: their content codes them).

    Raises FileNotFoundError naming the file when ``DATA/raw`` lacks one.
    """
    raw = Path(data) / "raw"
    meta_path = raw / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{meta_path}: no meta.json (write the data with benchmarks/training/_data.py)")
    meta = json.loads(meta_path.read_text())
    ends = np.load(raw / "episode_ends.npy").astype(np.int64)
    arrays = {k: np.load(raw / leaf_file(k)) for k in (STATE_KEY, ACTION_KEY)}
    frames = np.load(raw / leaf_file(meta["cameras"][0]), mmap_mode="r")
    return Truth(Path(data), meta, ends, arrays, tuple(frames.shape[1:]))


# ---- the check -----------------------------------------------------------------------------------

def check_batch(batch: dict[str, np.ndarray], truth: Truth) -> int:
    """Check one batch against the truth; returns the number of samples (windows) checked.

    ``batch`` (flat, "/"-joined keys, NumPy): every camera key ``(B, 2, H, W, 3)`` uint8 HWC RGB (or
    float32 ``(B, 2, 3, H, W)`` in [0, 1], LeRobot's output, checked as it is: converting whole frames
    would cost the main process more than the check),
    ``"observation/state"`` ``(B, 2, D)`` and ``"action"`` ``(B, 16, D)`` float32, ``"index"`` ``(B,)``
    int64, the global anchor step. The entry at offset ``o`` must be step ``index + o`` clamped into
    the anchor's episode (edge padding). Optional padding flags ``"<key>_is_pad"`` ``(B, T)`` bool (T =
    the key's offsets), where a loader returns them, must be True exactly where ``index + o`` lies outside
    the anchor's episode (:func:`pad_keys` lists those of a batch). Raises AssertionError naming the key
    and the sample.
    """
    for key in [INDEX_KEY, *truth.offsets()]:
        assert key in batch, f"batch: no key {key!r} (keys: {sorted(batch)})"
    index = np.asarray(batch[INDEX_KEY])
    assert index.ndim == 1 and index.dtype.kind in "iu", f"index: want (B,) int, got {index.dtype}{index.shape}"
    index = index.astype(np.int64)
    bad = np.flatnonzero((index < 0) | (index >= truth.steps))
    assert not len(bad), f"index: sample {bad[0]} has anchor {index[bad[0]]}, outside [0, {truth.steps})"
    first, last = truth.episode_bounds(index)
    b = len(index)
    for key, offsets in truth.offsets().items():
        want = np.clip(index[:, None] + np.array(offsets)[None, :], first[:, None], last[:, None])
        got = np.asarray(batch[key])
        if key in truth.cameras:
            shape, dtype = (b, len(offsets), *truth.frame_shape), np.uint8
            if got.dtype == np.float32:  # LeRobot's own frames: float CHW in [0, 1]
                h, w, c = truth.frame_shape
                shape, dtype = (b, len(offsets), c, h, w), np.float32
        else:
            shape, dtype = (b, len(offsets), truth.arrays[key].shape[1]), np.float32
        assert got.shape == shape and got.dtype == dtype, f"{key}: want {np.dtype(dtype)}{shape}, got {got.dtype}{got.shape}"
        if key in truth.cameras:
            step, cam, ok = decode_frames(got)
            wrong = ~ok | (step != want) | (cam != truth.cameras.index(key))
            if wrong.any():
                s, o = (int(x[0]) for x in np.nonzero(wrong))
                what = "unreadable frame code" if not ok[s, o] else f"frame of step {step[s, o]} camera {cam[s, o]}"
                raise AssertionError(f"{key}: sample {s} (anchor {index[s]}) offset {offsets[o]}: {what}, want "
                                     f"step {want[s, o]} camera {truth.cameras.index(key)}")
        else:
            expected = truth.arrays[key][want]
            wrong = ~np.all(got == expected, axis=-1)
            if wrong.any():
                s, o = (int(x[0]) for x in np.nonzero(wrong))
                raise AssertionError(f"{key}: sample {s} (anchor {index[s]}) offset {offsets[o]}: got {got[s, o][:3]}..., "
                                     f"want step {want[s, o]}'s {expected[s, o][:3]}...")
        if key + PAD_SUFFIX in batch:
            _check_pad(key, np.asarray(batch[key + PAD_SUFFIX]), index, offsets, first, last)
    unknown = [k for k in batch if k.endswith(PAD_SUFFIX) and k.removesuffix(PAD_SUFFIX) not in truth.offsets()]
    assert not unknown, f"{unknown[0]}: padding flags of a key the windows do not have"
    return b


def _check_pad(key: str, got: np.ndarray, index: np.ndarray, offsets: tuple[int, ...], first: np.ndarray,
               last: np.ndarray) -> None:
    """``key``'s padding flags ``(B, T)`` bool against the truth: True where ``index + o`` is outside ``[first, last]``."""
    shape = (len(index), len(offsets))
    assert got.shape == shape and got.dtype == np.bool_, f"{key}{PAD_SUFFIX}: want bool{shape}, got {got.dtype}{got.shape}"
    steps = index[:, None] + np.array(offsets)[None, :]
    want = (steps < first[:, None]) | (steps > last[:, None])
    wrong = got != want
    if wrong.any():
        s, o = (int(x[0]) for x in np.nonzero(wrong))
        raise AssertionError(f"{key}{PAD_SUFFIX}: sample {s} (anchor {index[s]}) offset {offsets[o]}: is_pad {bool(got[s, o])}, "
                             f"want {bool(want[s, o])} (episode steps {first[s]}..{last[s]})")


def pad_keys(batch: dict[str, Any]) -> list[str]:
    """The keys whose padding flags (``"<key>_is_pad"``) ``batch`` carries, sorted."""
    return sorted(k.removesuffix(PAD_SUFFIX) for k in batch if k.endswith(PAD_SUFFIX))


# ---- memory --------------------------------------------------------------------------------------

def _status_kib(pid: int | str, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def pss_kib(pid: int) -> int | None:
    """The process's proportional set size (``/proc/<pid>/smaps_rollup`` Pss), KiB, or None."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


HELPER_PROCESSES = ("resource_tracker", "forkserver")  # multiprocessing's own helpers: not workers


def _direct_children(pid: int) -> list[int]:
    out: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    for task in tasks:
        try:
            out.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            pass
    return sorted(out)


def _cmdline(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return None


def children(pid: int | None = None) -> list[int]:
    """Pids of the live worker processes under ``pid`` (default: this process): its child processes but
    multiprocessing's helpers (resource tracker, fork server), and, through those helpers, theirs.

    A ``forkserver`` DataLoader's workers are children of the fork server, not of this process; they
    inherit the fork server's command line, so a helper is a process whose command line names a helper
    and differs from its parent's (a fork of the fork server is a worker). The workers' own children
    are not listed.
    """
    pid = os.getpid() if pid is None else pid
    keep: list[int] = []
    todo = [(child, _cmdline(pid)) for child in _direct_children(pid)]
    while todo:
        child, parent_cmd = todo.pop()
        cmd = _cmdline(child)
        if cmd is None:
            continue
        if any(h in cmd for h in HELPER_PROCESSES) and cmd != parent_cmd:
            todo += [(grandchild, cmd) for grandchild in _direct_children(child)]
        else:
            keep.append(child)
    return sorted(keep)


class WorkerMemory:
    """Samples the PSS of this process's workers (:func:`children`) every ``period`` seconds on a thread; keeps each one's peak."""

    def __init__(self, period: float = 0.25) -> None:
        self.period = period
        self.peak_pss: dict[int, int] = {}
        self.peak_hwm: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "WorkerMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.sample()
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        for pid in children():
            for peak, value in ((self.peak_pss, pss_kib(pid)), (self.peak_hwm, _status_kib(pid, "VmHWM"))):
                if value is not None:
                    peak[pid] = max(peak.get(pid, 0), value)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()


# ---- the measurement -----------------------------------------------------------------------------

def folder_mib(folder: str | os.PathLike | None) -> float | None:
    """Sum of the sizes of the files under ``folder``, MiB (None without a folder)."""
    if folder is None or not Path(folder).exists():
        return None
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(folder) for f in fs)
    return total / 2**20


def write_result(result: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Write ``result`` to ``args.out`` (if given) and print it as one JSON line."""
    text = json.dumps(result)
    if getattr(args, "out", None):
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return result


def built(args: argparse.Namespace, folder: str | os.PathLike, seconds: float, contender: str | None = None) -> dict:
    """Report the end of a ``--build`` (one JSON line: ``contender``, ``built`` folder, ``build_s``, ``folder_mib``)."""
    return write_result({"contender": contender or _default_name(args), "built": str(folder), "build_s": seconds,
                         "folder_mib": folder_mib(folder)}, argparse.Namespace(out=None))


def unavailable(args: argparse.Namespace, truth_or_shape: Any, reason: str, contender: str | None = None) -> dict:
    """Report a contender that cannot run (the table prints ``unavailable: <reason>``)."""
    shape = truth_or_shape.meta["shape"] if isinstance(truth_or_shape, Truth) else str(truth_or_shape)
    return write_result({"contender": contender or _default_name(args), "shape": shape, "workers": args.workers,
                         "unavailable": reason}, args)


def _default_name(args: argparse.Namespace) -> str:
    name = Path(sys.argv[0]).stem.removeprefix("run_")
    return f"{name} {args.variant}".strip() if getattr(args, "variant", "") else name


def torch_loader(dataset: Any, args: argparse.Namespace, **kwargs: Any) -> Any:
    """The benchmark's ``DataLoader``: batch ``args.batch``, ``args.workers`` workers, persistent, shuffled
    (seeded by ``args.seed``), whole batches only; ``kwargs`` override (e.g. ``collate_fn``)."""
    import torch
    from torch.utils.data import DataLoader

    opts = dict(batch_size=args.batch, shuffle=True, num_workers=args.workers, persistent_workers=args.workers > 0,
                drop_last=True, generator=torch.Generator().manual_seed(args.seed))
    return DataLoader(dataset, **{**opts, **kwargs})


class _Batches:
    """Batches of a loader without end: a new epoch (``iter()`` again) when one is exhausted."""

    def __init__(self, loader: Iterable) -> None:
        self.loader, self.it, self.epochs = loader, iter(loader), 1

    def next(self) -> Any:
        try:
            return next(self.it)
        except StopIteration:
            self.it, self.epochs = iter(self.loader), self.epochs + 1
            return next(self.it)


def measure(make_loader: Callable[[], Iterable], to_numpy: Callable[[Any], dict], truth: Truth,
            args: argparse.Namespace, *, contender: str | None = None, folder: str | os.PathLike | None = None,
            notes: str | None = None) -> dict:
    """Build the loader, time its first batch, draw warm-up batches, then time the steady state.

    Warm-up: ``max(args.warmup_batches, prefetched)`` batches after the first, ``prefetched`` being what the
    workers load ahead (the DataLoader's ``prefetch_factor * num_workers``; ``args.workers`` for another
    loader), so no batch loaded before the clock starts is counted. Timed: batches are drawn until both
    ``args.batches`` of them and ``args.min_seconds`` have passed (new epochs when the loader runs out).
    Every batch (first, warm-up, timed) goes through ``to_numpy`` and :func:`check_batch` (padding flags
    too where ``to_numpy`` returns ``"<key>_is_pad"``; the keys are listed in ``pad_checked`` and the
    notes). The timed
    figure is the wall-clock time of the timed loop, conversion and check included: the workers keep
    loading while the main process checks, so leaving the check out would credit the loader with
    that work too; the check reads a sparse grid of pixels and a few arrays, and its share of the
    loop is reported (``check_share``). ``samples_per_s`` = timed windows / that time.
    ``first_batch_s``: from calling ``make_loader`` to the first batch (opening, worker start, first read).
    Memory: ``main_rss_mib`` this process's peak RSS (VmHWM); ``worker_rss_mib`` the peak PSS over the
    workers (:func:`children`, sampled every 0.25 s from ``/proc/<pid>/smaps_rollup``), also
    their peak RSS (``worker_hwm_mib``), None without worker processes.

    ``contender`` (default: the script's ``run_<name>`` and ``args.variant``), ``folder`` (whose size is
    ``folder_mib``) and ``notes`` go into the result; ``args.folder``/``args.notes`` are used when these are
    not given. Returns the result dict, also written to ``args.out`` and printed as one JSON line.
    """
    folder = folder if folder is not None else getattr(args, "folder", None)
    notes = notes if notes is not None else getattr(args, "notes", "")
    min_seconds = float(getattr(args, "min_seconds", 0.0) or 0.0)
    samples = batches = 0
    check_s = 0.0
    padded: list[str] = []

    def take(b: _Batches) -> None:
        nonlocal samples, batches, check_s, padded
        batch = b.next()
        t = time.perf_counter()
        flat = to_numpy(batch)
        samples += check_batch(flat, truth)
        padded = padded or pad_keys(flat)
        batches += 1
        check_s += time.perf_counter() - t

    with WorkerMemory() as memory:
        t0 = time.perf_counter()
        loader = make_loader()
        stream = _Batches(loader)
        first = stream.next()
        first_s = time.perf_counter() - t0
        flat = to_numpy(first)
        samples += check_batch(flat, truth)
        padded = pad_keys(flat)
        batches += 1
        del first, flat
        workers = getattr(loader, "num_workers", args.workers) or 0
        prefetched = (getattr(loader, "prefetch_factor", None) or 1) * workers
        warmup = max(args.warmup_batches, prefetched)
        for _ in range(warmup):
            take(stream)
        timed0, batches0, check_s = samples, batches, 0.0
        t1 = time.perf_counter()
        while batches - batches0 < args.batches or time.perf_counter() - t1 < min_seconds:
            take(stream)
        wall = time.perf_counter() - t1
        memory.sample()
    if padded:
        notes = f"{notes}; " if notes else ""
        notes += "is_pad checked: " + ", ".join(k.rsplit("/", 1)[-1] for k in padded)
    pss, hwm = memory.peak_pss, memory.peak_hwm
    result = {
        "contender": contender or _default_name(args), "shape": truth.meta["shape"], "workers": args.workers,
        "batch": args.batch, "samples_per_s": (samples - timed0) / wall if wall > 0 else None,
        "first_batch_s": first_s, "main_rss_mib": (_status_kib("self", "VmHWM") or 0) / 1024,
        "worker_rss_mib": max(pss.values()) / 1024 if pss else None,
        "worker_hwm_mib": max(hwm.values()) / 1024 if hwm else None,
        "rss_kind": "main: peak RSS (VmHWM); workers: peak PSS (smaps_rollup, sampled 4/s), max over workers",
        "worker_processes": len(pss), "batches_checked": batches, "samples_checked": samples,
        "warmup_batches": warmup, "timed_batches": batches - batches0, "timed_s": wall, "pad_checked": padded, "check_share": check_s / wall if wall > 0 else None,
        "epochs": stream.epochs, "folder_mib": folder_mib(folder), "notes": notes or "",
    }
    del stream, loader
    gc.collect()
    return write_result(result, args)
