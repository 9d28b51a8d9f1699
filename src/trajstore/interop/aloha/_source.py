"""Read and check the layout of an ALOHA / ACT ``episode_N.hdf5`` folder, before anything is written.

One file per episode (see :mod:`trajstore.interop.aloha` for the layout and where it comes from). Each file
is opened with h5py and walked without following a soft or external link; every dataset's declared shape,
dtype, chunk size and storage is checked against the bounds below; the root attributes become JSON. Files
are compared with each other by :func:`check_alike`.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._fs import path_inside
from trajstore.errors import FormatError
from trajstore.interop.aloha._attrs import root_attrs

#: File names taken as episodes: ``episode_<N>.hdf5`` (N decimal, at most :data:`MAX_INDEX_DIGITS` digits).
#: Other files are ignored; ``episode_<N>.hdf5`` with a longer N is skipped with an :class:`AlohaWarning`.
EPISODE_FILE = re.compile(r"episode_([0-9]+)\.hdf5")
MAX_INDEX_DIGITS = 9
#: The dataset of compressed frame byte lengths, ``(num_cams, T)``: bookkeeping, not a leaf.
COMPRESS_LEN = "compress_len"
#: Where the cameras are.
IMAGES = "observations/images"
#: Datasets every episode has (ACT's loaders read them).
REQUIRED = ("observations/qpos", "observations/qvel", "action")

#: Bounds on what a file may declare (checked before anything is read or allocated).
MAX_STEPS = 10_000_000
MAX_STEP_BYTES = 64 << 20      # one step of one dataset (a 4096x4096 RGB frame is 48 MiB)
MAX_FRAME_PIXELS = 1 << 26     # H * W of a camera frame
MAX_CHUNK_BYTES = 256 << 20    # one HDF5 chunk (h5py decompresses whole chunks)
MAX_DATASETS = 256
MAX_OBJECTS = 4096             # groups and datasets walked
MAX_DEPTH = 8


@dataclass(frozen=True)
class Entry:
    """One dataset of an episode file.

    Attributes:
        key: its path in the file without the leading ``/`` (``"observations/qpos"``).
        shape: the shape of one step (the dataset's shape without its leading ``T``).
        dtype: its dtype.
        camera: ``None`` (not a camera), ``"raw"`` (``(T, H, W, 3)`` uint8 frames) or ``"jpeg"``
            (``(T, padded_size)`` uint8 rows of JPEG bytes followed by zeros).
        frame: ``(H, W, 3)`` of a camera's frames (for JPEG: read from frame 0's header).
    """

    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    camera: str | None = None
    frame: tuple[int, ...] = ()


@dataclass
class EpisodeFile:
    """What one ``episode_N.hdf5`` holds, as checked by :func:`read_episode_file`.

    Attributes:
        index: its N.
        path: the file.
        steps: T, the length of every dataset.
        entries: source key -> :class:`Entry`, in the file's (name) order.
        attrs: the root attributes as JSON values.
        compress_len: whether it has ``/compress_len``.
    """

    index: int
    path: Path
    steps: int
    entries: dict[str, Entry]
    attrs: dict[str, Any] = field(default_factory=dict)
    compress_len: bool = False

    @property
    def name(self) -> str:
        return self.path.name

    def data(self) -> dict[str, Any]:
        """The episode data the import gives it: ``{"file": name, **root attributes}`` (``sim`` only when the
        file has it: none is invented for a file without one)."""
        return {"file": self.name, **self.attrs}


class AlohaWarning(UserWarning):
    """Something of an ALOHA folder that the import leaves out (named in the message)."""


def h5py_module() -> Any:
    try:
        import h5py
    except ImportError:  # pragma: no cover - h5py is a dependency of trajstore
        raise ImportError("ALOHA import needs h5py: pip install h5py") from None
    return h5py


def episode_files(folder: str | os.PathLike) -> list[tuple[int, Path]]:
    """``(N, path)`` of every ``episode_N.hdf5`` in ``folder`` (not its subfolders), by N.

    Warns:
        AlohaWarning: names the ``episode_N.hdf5`` files left out because N has more than
            :data:`MAX_INDEX_DIGITS` digits.

    Raises:
        FileNotFoundError / NotADirectoryError: ``folder`` is not a folder.
        FormatError: no episode file (names the files skipped for a too long N), two files with one N
            (``episode_7`` and ``episode_07``), an episode name that is not a file, or a symlink
            leading out of ``folder``.
    """
    root = Path(folder)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such folder")
    if not root.is_dir():
        raise NotADirectoryError(f"{root}: not a folder (give the folder of episode_N.hdf5 files)")
    found: dict[int, Path] = {}
    skipped: list[str] = []
    for entry in sorted(os.listdir(root)):
        m = EPISODE_FILE.fullmatch(entry)
        if m is None:
            continue
        if len(m.group(1)) > MAX_INDEX_DIGITS:
            skipped.append(entry)
            continue
        path = path_inside(root, entry, "episode file")
        if not path.is_file():
            raise FormatError(f"{path}: not a file")
        n = int(m.group(1))
        if n in found:
            raise FormatError(f"{root}: {found[n].name} and {entry} are both episode {n}")
        found[n] = path
    listed = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
    why = f"an N of more than {MAX_INDEX_DIGITS} digits"
    if not found:
        also = f"; skipped {listed}: {why}" if skipped else ""
        raise FormatError(f"{root}: no episode_N.hdf5 file with N of 1..{MAX_INDEX_DIGITS} digits (ALOHA / ACT "
                          f"record one file per episode){also}")
    if skipped:
        warnings.warn(AlohaWarning(f"{root}: {len(skipped)} file(s) left out, {why}: {listed}"), stacklevel=3)
    return sorted(found.items())


def read_episode_file(index: int, path: Path) -> EpisodeFile:
    """Open ``path`` and check its layout (nothing but frame 0 of each JPEG camera and ``compress_len`` is read).

    Cameras: ``/observations/images/<cam>`` of ``(T, H, W, 3)`` uint8 (raw colour frames), ``(T, padded_size)``
    uint8 with ``compress`` (JPEG rows), or ``(T, H, W)`` / ``(T, H, W, 1)`` unsigned or float (depth or grey
    frames: a plain :class:`Entry`, ``camera=None``, imported exactly).

    Raises:
        FormatError: names the file and the key: not an HDF5 file; a soft or external link, a virtual
            dataset or one with external storage, a named datatype; a required dataset missing
            (:data:`REQUIRED`); a dataset whose length is not T, of a non-numeric dtype, or beyond the bounds
            (:data:`MAX_STEPS`, :data:`MAX_STEP_BYTES`, :data:`MAX_CHUNK_BYTES`, :data:`MAX_FRAME_PIXELS`); a
            camera that is not ``(T, H, W, 3)`` uint8 (or, with ``compress``, ``(T, padded_size)`` uint8); JPEG
            cameras without a ``compress_len`` of shape ``(num_jpeg_cams, T)`` holding whole numbers in
            ``1..padded_size``; a frame 0 that is not a JPEG (or, H * W * 3, more than :data:`MAX_STEP_BYTES`);
            a root attribute that is not a small JSON value; a dataset storing less than it declares (chunks or
            bytes never written, see :func:`_check_stored`); a read that fails (a damaged chunk, a missing
            filter).
    """
    h5py = h5py_module()
    try:
        f = h5py.File(path, "r")
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: not an HDF5 file ({exc})") from None
    with f:
        datasets = _walk(f, path, h5py)
        attrs = root_attrs(f, path)
        compress = attrs.get("compress", False)
        for name in ("sim", "compress"):
            if name in attrs and not isinstance(attrs[name], bool):
                raise FormatError(f"{path}: root attribute {name!r} is {attrs[name]!r}, expected a bool")
        for key in REQUIRED:
            if key not in datasets:
                raise FormatError(f"{path}: no dataset /{key} (an ALOHA episode has /observations/qpos, "
                                  "/observations/qvel and /action)")
        steps = _steps(datasets["action"], path, "action")
        entries: dict[str, Entry] = {}
        for key, d in datasets.items():
            if key == COMPRESS_LEN:
                continue
            try:
                entries[key] = _entry(d, key, steps, bool(compress), path)
            except FormatError:
                raise
            except (OSError, RuntimeError, ValueError, KeyError, TypeError) as exc:
                raise FormatError(f"{path}: /{key} cannot be read ({exc})") from None
        jpeg = [e for e in entries.values() if e.camera == "jpeg"]
        has_len = COMPRESS_LEN in datasets
        if jpeg:
            if not has_len:
                raise FormatError(f"{path}: JPEG cameras ({', '.join(e.key for e in jpeg)}) but no /compress_len")
            _check_compress_len(datasets[COMPRESS_LEN], len(jpeg), steps, max(e.shape[0] for e in jpeg), path)
            for e in jpeg:
                entries[e.key] = Entry(e.key, e.shape, e.dtype, "jpeg", _jpeg_frame(datasets[e.key], e.key, path))
    return EpisodeFile(index, Path(path), steps, entries, attrs, has_len)


def check_alike(files: list[EpisodeFile]) -> None:
    """Every file has the datasets of the first one, with the same step shapes, dtypes and camera kinds.

    Raises:
        FormatError: names both files and the first dataset that differs.
    """
    first = files[0]
    for other in files[1:]:
        if list(other.entries) != list(first.entries):
            extra = sorted(set(other.entries) ^ set(first.entries))
            raise FormatError(f"{other.path}: its datasets differ from {first.name}'s "
                              f"(only in one of them: {', '.join('/' + k for k in extra)})")
        for key, a in first.entries.items():
            b = other.entries[key]
            if (a.camera, a.frame, a.dtype) != (b.camera, b.frame, b.dtype) or (
                    a.camera != "jpeg" and a.shape != b.shape):
                raise FormatError(f"{other.path}: /{key} is {_describe(b)}, but {_describe(a)} in {first.name}")


def _describe(e: Entry) -> str:
    if e.camera == "jpeg":
        return f"JPEG frames of {e.frame[1]}x{e.frame[0]}"
    return f"{e.dtype} steps of shape {e.shape}" + (" (raw frames)" if e.camera == "raw" else "")


def _walk(f: Any, path: Path, h5py: Any) -> dict[str, Any]:
    """Every dataset under the root by key (``"observations/qpos"``), links refused, in name order."""
    out: dict[str, Any] = {}
    seen = [0]

    def visit(group: Any, prefix: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise FormatError(f"{path}: groups nested deeper than {MAX_DEPTH} levels at /{prefix}")
        try:
            names = list(group.keys())
        except (OSError, RuntimeError, ValueError, KeyError) as exc:
            raise FormatError(f"{path}: group /{prefix} cannot be read ({exc})") from None
        for name in names:
            key = f"{prefix}{name}"
            seen[0] += 1
            if seen[0] > MAX_OBJECTS:
                raise FormatError(f"{path}: more than {MAX_OBJECTS} groups and datasets")
            try:
                visit_one(group, name, key, depth)
            except FormatError:
                raise
            except (OSError, RuntimeError, ValueError, KeyError) as exc:
                raise FormatError(f"{path}: /{key} cannot be read ({exc})") from None

    def visit_one(group: Any, name: str, key: str, depth: int) -> None:
        link = group.get(name, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            raise FormatError(f"{path}: /{key} is an external link (to {link.filename}); not followed")
        if isinstance(link, h5py.SoftLink):
            raise FormatError(f"{path}: /{key} is a soft link (to {link.path}); not followed")
        obj = group[name]
        if isinstance(obj, h5py.Group):
            visit(obj, key + "/", depth + 1)
        elif isinstance(obj, h5py.Dataset):
            if obj.is_virtual:
                raise FormatError(f"{path}: /{key} is a virtual dataset (its data is in other files); refused")
            if obj.external:
                raise FormatError(f"{path}: /{key} keeps its data in external files; refused")
            out[key] = obj
            if len(out) > MAX_DATASETS:
                raise FormatError(f"{path}: more than {MAX_DATASETS} datasets")
        else:
            raise FormatError(f"{path}: /{key} is a {type(obj).__name__}, not a dataset or group")

    visit(f, "", 0)
    return out


def _steps(d: Any, path: Path, key: str) -> int:
    if d.shape is None or len(d.shape) < 1:
        raise FormatError(f"{path}: /{key} has shape {d.shape}, expected (T, ...)")
    steps = int(d.shape[0])
    if not 1 <= steps <= MAX_STEPS:
        raise FormatError(f"{path}: /{key} has {steps} steps, expected 1..{MAX_STEPS}")
    return steps


def _entry(d: Any, key: str, steps: int, compress: bool, path: Path) -> Entry:
    if d.shape is None or len(d.shape) < 1 or int(d.shape[0]) != steps:
        raise FormatError(f"{path}: /{key} has shape {d.shape}, expected ({steps}, ...) like /action")
    dtype = np.dtype(d.dtype)
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        raise FormatError(f"{path}: /{key} has dtype {dtype}, expected a number or bool dtype")
    shape = tuple(int(s) for s in d.shape[1:])
    step_bytes = math.prod(shape) * dtype.itemsize
    if step_bytes > MAX_STEP_BYTES:
        raise FormatError(f"{path}: /{key} declares {step_bytes} bytes a step (shape {d.shape}), more than "
                          f"{MAX_STEP_BYTES}")
    if d.chunks is not None and math.prod(d.chunks) * dtype.itemsize > MAX_CHUNK_BYTES:
        raise FormatError(f"{path}: /{key} declares chunks {d.chunks}, more than {MAX_CHUNK_BYTES} bytes each")
    _check_stored(d, key, steps, dtype, path)
    if not key.startswith(IMAGES + "/"):
        return Entry(key, shape, dtype)
    cam = key[len(IMAGES) + 1:]
    if "/" in cam:
        raise FormatError(f"{path}: /{key}: cameras are datasets directly in /{IMAGES}")
    if len(shape) in (2, 3) and (len(shape) == 2 or shape[2] in (1, 3)) and (
            shape[0] * shape[1] > MAX_FRAME_PIXELS or 0 in shape):
        raise FormatError(f"{path}: /{key} declares {shape[1]}x{shape[0]} frames, expected 1..{MAX_FRAME_PIXELS} "
                          "pixels")
    if dtype == np.uint8 and len(shape) == 3 and shape[2] == 3:
        return Entry(key, shape, dtype, "raw", shape)
    if dtype.kind in "uf" and (len(shape) == 2 or (len(shape) == 3 and shape[2] == 1)):
        return Entry(key, shape, dtype)  # a depth (or grey) camera: a plain leaf, exact
    if compress and dtype == np.uint8 and len(shape) == 1:
        if shape[0] < 4:
            raise FormatError(f"{path}: /{key} rows of {shape[0]} bytes cannot hold a JPEG frame")
        return Entry(key, shape, dtype, "jpeg")
    wanted = (f"({steps}, H, W, 3) uint8 colour frames, ({steps}, H, W) or ({steps}, H, W, 1) unsigned or float "
              "depth frames" + (f", or ({steps}, padded_size) uint8 JPEG rows" if compress else ""))
    raise FormatError(f"{path}: camera /{key} has shape {d.shape} and dtype {dtype}, expected {wanted}")


def _check_stored(d: Any, key: str, steps: int, dtype: np.dtype, path: Path) -> None:
    """Refuse a dataset whose file holds less than it declares (chunks never written read as the fill value:
    a tiny file could declare terabytes of zeros). Contiguous: its allocated bytes; chunked: its allocated
    chunks, which must be every chunk the shape needs (a compressed chunk's size says nothing)."""
    shape = tuple(int(s) for s in d.shape)
    declared = math.prod(shape) * dtype.itemsize
    if declared == 0:
        return
    try:
        if d.chunks is None:
            stored = int(d.id.get_storage_size())
            if stored < declared:
                raise FormatError(f"{path}: /{key} declares {steps} steps ({declared} bytes) but stores only "
                                  f"{stored} bytes (never written?)")
            return
        expected = math.prod(-(-s // c) for s, c in zip(shape, d.chunks))
        stored = int(d.id.get_num_chunks())
    except FormatError:
        raise
    except (OSError, ValueError, RuntimeError) as exc:
        raise FormatError(f"{path}: /{key}: its storage cannot be read ({exc})") from None
    if stored < expected:
        raise FormatError(f"{path}: /{key} declares {steps} steps but stores only {stored} of its {expected} chunks "
                          f"of {d.chunks} (the others were never written; they would read as fill values)")


def _read_checked(d: Any, selection: Any, key: str, path: Path) -> np.ndarray:
    """``d[selection]`` as an array; a damaged chunk or a missing filter -> FormatError naming file and key."""
    try:
        return np.asarray(d[selection])
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise FormatError(f"{path}: /{key} cannot be read ({exc})") from None


def _check_compress_len(d: Any, cams: int, steps: int, padded: int, path: Path) -> None:
    if tuple(d.shape or ()) != (cams, steps):
        raise FormatError(f"{path}: /{COMPRESS_LEN} has shape {d.shape}, expected ({cams}, {steps}): one row per "
                          "JPEG camera, one column per step")
    dtype = np.dtype(d.dtype)
    if dtype.kind not in "iuf" or dtype.fields is not None:
        raise FormatError(f"{path}: /{COMPRESS_LEN} has dtype {dtype}, expected numbers")
    block = max(1, (8 << 20) // max(cams * dtype.itemsize, 1))
    for start in range(0, steps, block):
        values = _read_checked(d, np.s_[:, start:start + block], COMPRESS_LEN, path).astype(np.float64)
        bad = ~(np.isfinite(values) & (values == np.round(values)) & (values >= 1) & (values <= padded))
        if bad.any():
            row, col = (int(i[0]) for i in np.nonzero(bad))
            raise FormatError(f"{path}: /{COMPRESS_LEN}[{row}, {start + col}] is {values[row, col]!r}, expected a "
                              f"whole number of bytes in 1..{padded}")


def _jpeg_frame(d: Any, key: str, path: Path) -> tuple[int, int, int]:
    from trajstore.interop.aloha._frames import jpeg_size

    h, w = jpeg_size(_read_checked(d, 0, f"{key}[0]", path), f"{path}: /{key}[0]")
    return (h, w, 3)
