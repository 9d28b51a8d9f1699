"""What every contender of the training-loader benchmark shares: its command line, the truth, the check
of a batch and the measurement (NumPy, the standard library and torch only: it runs in every venv).

A contender script ``run_<name>.py`` (run by its library's python) does::

    args = parse_args()
    truth = load_truth(args.data)
    if args.build: ...write its folder from DATA/raw or DATA/lerobot...; return
    measure(make_loader, to_numpy, truth, args)

Frames are checkable (``frame_code``/``decode_frames``): the top half of every frame is a grid of
``CODE_ROWS x CODE_COLS`` flat cells, each one of two colours, coding 20 bits of the global step,
3 bits of the camera's position in ``meta["cameras"]`` and a parity bit; the bottom half is texture
(``_data.py``). A cell survives JPEG and video coding: the checker reads the mean colour of the
cell's inner half and takes the nearer of the two colours. State and action code the global step
``t`` exactly in float32: ``state[t, d] = t + d / 32``, ``action[t, d] = -(t + d / 32)``.
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

# ---- the windows ---------------------------------------------------------------------------------

OBS_OFFSETS = (-1, 0)  # cameras and state
ACTION_OFFSETS = tuple(range(16))
STATE_KEY = "observation/state"
ACTION_KEY = "action"
INDEX_KEY = "index"

# ---- the frame code ------------------------------------------------------------------------------

CODE_ROWS, CODE_COLS = 4, 6
STEP_BITS, CAMERA_BITS = 20, 3
ONE = np.array([224, 176, 48], np.float32)   # a cell whose bit is 1 (RGB)
ZERO = np.array([40, 88, 200], np.float32)   # a cell whose bit is 0
MAX_CELL_ERROR = 64.0  # largest |channel mean - colour| a decoded cell may show


def code_bits(step: int, camera: int) -> np.ndarray:
    """The ``CODE_ROWS * CODE_COLS`` bits (uint8) painted into frame ``step`` of camera number ``camera``."""
    if not 0 <= step < 1 << STEP_BITS or not 0 <= camera < 1 << CAMERA_BITS:
        raise ValueError(f"step {step} or camera {camera} outside the frame code")
    bits = [(step >> i) & 1 for i in range(STEP_BITS)] + [(camera >> i) & 1 for i in range(CAMERA_BITS)]
    return np.array([sum(bits) & 1] + bits, np.uint8)


def cell_size(h: int, w: int) -> tuple[int, int]:
    """``(height, width)`` in pixels of one code cell of an ``h x w`` frame: the grid fills the top 3/8 of
    the frame, a flat margin separates it from the texture (the bottom half), so that no coding block
    holds both a cell and texture."""
    ch, cw = (h * 3 // 8) // CODE_ROWS, w // CODE_COLS
    if ch < 4 or cw < 4:
        raise ValueError(f"a {h}x{w} frame is too small for the {CODE_ROWS}x{CODE_COLS} frame code")
    return ch, cw


def paint_code(frame: np.ndarray, step: int, camera: int) -> None:
    """Paint the code of (``step``, ``camera``) and the margin into the top half of ``frame`` ((H, W, 3) uint8), in place."""
    h, w = frame.shape[:2]
    ch, cw = cell_size(h, w)
    frame[: h // 2] = ZERO.astype(np.uint8)
    bits = code_bits(step, camera).reshape(CODE_ROWS, CODE_COLS)
    for r in range(CODE_ROWS):
        for c in range(CODE_COLS):
            frame[r * ch:(r + 1) * ch, c * cw:(c + 1) * cw] = (ONE if bits[r, c] else ZERO).astype(np.uint8)


def decode_frames(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(step, camera, ok)``, each of shape ``frames.shape[:-3]``, of ``frames``: ``(..., H, W, 3)`` uint8
    RGB (HWC), or float ``(..., 3, H, W)`` in [0, 1] (CHW, LeRobot's output); any strides: only a sparse
    grid of pixels is read, no frame is copied or converted.

    ``ok`` is False for a frame whose cells are not near either colour or whose parity is wrong
    (garbage, a CHW or BGR frame, a blend of two frames).
    """
    frames = np.asarray(frames)
    chw = frames.dtype.kind == "f"
    lead, (h, w) = frames.shape[:-3], frames.shape[-2:] if chw else frames.shape[-3:-1]
    ch, cw = cell_size(h, w)
    ny, nx = min(8, ch // 2), min(8, cw // 2)  # sample points per cell, inside its inner half
    ys = (np.arange(CODE_ROWS)[:, None] * ch + np.linspace(ch // 4, ch - ch // 4 - 1, ny).round().astype(int))
    xs = (np.arange(CODE_COLS)[:, None] * cw + np.linspace(cw // 4, cw - cw // 4 - 1, nx).round().astype(int))
    if chw:  # float (..., 3, H, W) in [0, 1]
        pts = np.moveaxis(frames[..., ys.reshape(-1)[:, None], xs.reshape(-1)[None, :]], -3, -1) * 255
    else:
        pts = frames[..., ys.reshape(-1)[:, None], xs.reshape(-1)[None, :], :]
    pts = pts.reshape(*lead, CODE_ROWS, ny, CODE_COLS, nx, 3)
    mean = pts.mean(axis=(-4, -2), dtype=np.float32).reshape(*lead, CODE_ROWS * CODE_COLS, 3)
    d1, d0 = np.abs(mean - ONE).max(-1), np.abs(mean - ZERO).max(-1)
    bits = (d1 < d0).astype(np.int64)
    ok = (np.minimum(d1, d0) < MAX_CELL_ERROR).all(-1) & (bits[..., 1:].sum(-1) % 2 == bits[..., 0])
    weights = 1 << np.arange(STEP_BITS + CAMERA_BITS, dtype=np.int64)
    step = bits[..., 1:1 + STEP_BITS] @ weights[:STEP_BITS]
    camera = bits[..., 1 + STEP_BITS:] @ weights[:CAMERA_BITS]
    return step, camera, ok


def state_values(steps: np.ndarray, dim: int) -> np.ndarray:
    """``state[t, d] = t + d / 32`` (float32, exact for t < 2**19): ``(N, dim)``."""
    return (np.asarray(steps, np.float64)[:, None] + np.arange(dim) / 32).astype(np.float32)


def action_values(steps: np.ndarray, dim: int) -> np.ndarray:
    """``action[t, d] = -(t + d / 32)``: ``(N, dim)`` float32."""
    return -state_values(steps, dim)


# ---- the command line and the truth --------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``--data DATA --workers N --batch 32 --warmup-batches W --batches K --out RESULT.json [--build]``
    (plus ``--variant`` for a contender with several layouts and ``--seed`` for the shuffle)."""
    ap = argparse.ArgumentParser(description="one contender of benchmarks/training_loader.py")
    ap.add_argument("--data", required=True, help="the shape's data folder (raw/, meta.json, contenders' folders)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    ap.add_argument("--batch", type=int, default=32, help="windows per batch (default 32)")
    ap.add_argument("--warmup-batches", type=int, default=4, help="checked, untimed batches after the first")
    ap.add_argument("--batches", type=int, default=20, help="timed batches (each checked)")
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
    the anchor's episode (edge padding). Raises AssertionError naming the key and the sample.
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
    return b


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


def children(pid: int | None = None) -> list[int]:
    """Pids of the live child processes of ``pid`` (default: this process), but multiprocessing's
    resource tracker and fork server."""
    pid = os.getpid() if pid is None else pid
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            pass
    keep = []
    for child in sorted(out):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if not any(h in cmdline for h in HELPER_PROCESSES):
            keep.append(child)
    return keep


class WorkerMemory:
    """Samples the PSS of this process's children every ``period`` seconds on a thread; keeps each one's peak."""

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
    """Build the loader, time its first batch, draw ``args.warmup_batches`` more, then time ``args.batches``.

    Every batch (first, warm-up, timed) goes through ``to_numpy`` and :func:`check_batch`. The timed
    figure is the wall-clock time of the timed loop, conversion and check included: the workers keep
    loading while the main process checks, so leaving the check out would credit the loader with
    that work too; the check reads a sparse grid of pixels and a few arrays, and its share of the
    loop is reported (``check_share``). ``samples_per_s`` = timed windows / that time.
    ``first_batch_s``: from calling ``make_loader`` to the first batch (opening, worker start, first read).
    Memory: ``main_rss_mib`` this process's peak RSS (VmHWM); ``worker_rss_mib`` the peak PSS over the
    workers (children of this process, sampled every 0.25 s from ``/proc/<pid>/smaps_rollup``), also
    their peak RSS (``worker_hwm_mib``), None without child processes.

    ``contender`` (default: the script's ``run_<name>`` and ``args.variant``), ``folder`` (whose size is
    ``folder_mib``) and ``notes`` go into the result; ``args.folder``/``args.notes`` are used when these are
    not given. Returns the result dict, also written to ``args.out`` and printed as one JSON line.
    """
    folder = folder if folder is not None else getattr(args, "folder", None)
    notes = notes if notes is not None else getattr(args, "notes", "")
    samples = batches = 0
    check_s = 0.0

    def take(b: _Batches) -> None:
        nonlocal samples, batches, check_s
        batch = b.next()
        t = time.perf_counter()
        samples += check_batch(to_numpy(batch), truth)
        batches += 1
        check_s += time.perf_counter() - t

    with WorkerMemory() as memory:
        t0 = time.perf_counter()
        loader = make_loader()
        stream = _Batches(loader)
        first = stream.next()
        first_s = time.perf_counter() - t0
        samples += check_batch(to_numpy(first), truth)
        batches += 1
        del first
        for _ in range(args.warmup_batches):
            take(stream)
        timed0, check_s = samples, 0.0
        t1 = time.perf_counter()
        for _ in range(args.batches):
            take(stream)
        wall = time.perf_counter() - t1
        memory.sample()
    pss, hwm = memory.peak_pss, memory.peak_hwm
    result = {
        "contender": contender or _default_name(args), "shape": truth.meta["shape"], "workers": args.workers,
        "batch": args.batch, "samples_per_s": (samples - timed0) / wall if wall > 0 else None,
        "first_batch_s": first_s, "main_rss_mib": (_status_kib("self", "VmHWM") or 0) / 1024,
        "worker_rss_mib": max(pss.values()) / 1024 if pss else None,
        "worker_hwm_mib": max(hwm.values()) / 1024 if hwm else None,
        "rss_kind": "main: peak RSS (VmHWM); workers: peak PSS (smaps_rollup, sampled 4/s), max over workers",
        "worker_processes": len(pss), "batches_checked": batches, "samples_checked": samples,
        "timed_batches": args.batches, "timed_s": wall, "check_share": check_s / wall if wall > 0 else None,
        "epochs": stream.epochs, "folder_mib": folder_mib(folder), "notes": notes or "",
    }
    del stream, loader
    gc.collect()
    return write_result(result, args)
