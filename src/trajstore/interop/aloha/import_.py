"""Import a folder of ALOHA / ACT ``episode_N.hdf5`` files into a new trajstore buffer folder: what
``trajstore import aloha DIR OUT`` calls. See :mod:`trajstore.interop.aloha` for the layout read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._fs import staged_folder
from trajstore.errors import FormatError, InvalidValueError
from trajstore.interop.aloha._frames import decode_frames
from trajstore.interop.aloha._source import (COMPRESS_LEN, Entry, EpisodeFile, check_alike, episode_files,
                                             h5py_module, read_episode_file)
from trajstore.interop.source_selection import SourceEpisode, select_source_episodes
from trajstore.interop.summary import ImportSummary
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space

#: Bytes of decoded source data per block of steps: bounds the memory an import takes.
BLOCK_BYTES = 64 << 20
#: ALOHA's control rate: ``DT = 0.02`` s in ACT's and aloha's ``constants.py`` (50 Hz).
DEFAULT_FPS = 50.0


def default_leaf(key: str) -> str:
    """The leaf path of a source key: ``observations/...`` -> ``observation/...``, others as they are
    (``"observations/images/cam_high"`` -> ``"observation/images/cam_high"``, ``"action"`` -> ``"action"``)."""
    head, sep, rest = key.partition("/")
    return f"observation{sep}{rest}" if head == "observations" else key


def leaf_paths(keys: list[str], key_map: Mapping[str, str] | None, source: str) -> dict[str, str]:
    """Source key -> leaf path, ``key_map`` applied (a key there may start with ``/``).

    Raises:
        InvalidValueError: a ``key_map`` key the files do not have (names it and the keys held), an empty or
            malformed leaf path, two sources on one leaf, or a leaf that is the prefix of another.
    """
    given = {str(k).lstrip("/"): v for k, v in (key_map or {}).items()}
    unknown = [k for k in given if k not in keys]
    if unknown:
        raise InvalidValueError(f"{source}: key_map names {unknown}, which the episodes do not hold; they hold "
                                f"{keys}")
    out: dict[str, str] = {}
    for key in keys:
        leaf = given.get(key, default_leaf(key))
        if not isinstance(leaf, str) or not leaf or any(not p for p in leaf.split("/")):
            raise InvalidValueError(f"{source}: leaf path {leaf!r} for /{key} is not of the form 'a/b/c'")
        out[key] = leaf
    by_leaf = sorted((leaf, key) for key, leaf in out.items())
    for (a, ka), (b, kb) in zip(by_leaf, by_leaf[1:]):
        if a == b or b.startswith(a + "/"):
            raise InvalidValueError(f"{source}: /{ka} and /{kb} would be the leaves {a!r} and {b!r}: one leaf "
                                    "cannot be another or hold it")
    return out


def _leaf_space(e: Entry, fps: float) -> Space:
    if e.camera is not None:
        return BoxSpace(0, 255, e.frame, np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": fps})
    if e.dtype.kind == "b":
        return BinarySpace(e.shape)
    if e.dtype.kind in "iu":
        info = np.iinfo(e.dtype)
        return BoxSpace(info.min, info.max, e.shape, e.dtype)
    return BoxSpace(-np.inf, np.inf, e.shape, e.dtype)


def step_space(first: EpisodeFile, leaves: dict[str, str], fps: float, aloha: dict[str, Any]) -> DictSpace:
    """The step space: each dataset's leaf at its path; ``aloha`` as the root's ``{"aloha": ...}`` metadata."""
    tree: dict[str, Any] = {}
    for key, e in first.entries.items():
        parts = leaves[key].split("/")
        node = tree
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = _leaf_space(e, fps)

    def build(node: dict[str, Any], meta: Any = None) -> DictSpace:
        return DictSpace({k: build(v) if isinstance(v, dict) else v for k, v in node.items()}, metadata=meta)

    return build(tree, {"aloha": aloha})


def _fps_value(fps: Any) -> float | int:
    if isinstance(fps, bool) or not isinstance(fps, (int, float, np.integer, np.floating)) or not (
            0 < float(fps) < float("inf")):
        raise InvalidValueError(f"fps must be a positive number of frames per second (Hz), got {fps!r}")
    return int(fps) if float(fps).is_integer() else float(fps)


def import_aloha(src_folder: str | os.PathLike, out: str | os.PathLike, *, episodes: Iterable[int] | str | None = None,
                 key_map: Mapping[str, str] | None = None, camera: str = "jpeg", fps: float = DEFAULT_FPS,
                 progress: bool = False) -> ImportSummary:
    """Copy a folder of ALOHA / ACT ``episode_N.hdf5`` files into a new unbounded buffer folder ``out``.

    One file is one episode, imported in the order of N (``episode_10`` after ``episode_9``); other files
    are ignored. Every dataset of ``(T, ...)`` becomes a leaf, ``observations/...`` renamed ``observation/...``:
    ``observation/qpos``, ``observation/qvel`` (T, 14), ``observation/effort`` (real robot), ``action`` (T, 14),
    ``base_action`` (T, 2) (mobile ALOHA), keeping their dtype (float32 as the recorders write them). Cameras
    ``/observations/images/<cam>`` become ``observation/images/<cam>`` leaves ``(H, W, 3)`` uint8 with metadata
    ``{"kind": "image", "layout": "HWC", "fps": fps}``: raw frames exactly, JPEG rows (root attribute
    ``compress``) decoded in the order ACT's loader gives them (see :mod:`~trajstore.interop.aloha._frames`).
    Depth (or grey) cameras, ``(T, H, W)`` or ``(T, H, W, 1)`` unsigned or float, are plain leaves of their shape
    and dtype (exact, in HDF5; not camera storages, not in ``cameras`` below).
    ``/compress_len`` is checked, not imported. Episode data: ``{"file": "episode_N.hdf5", ...the root
    attributes}`` (``sim`` when the file has it: a file without one gets none); the root space's metadata
    ``{"aloha": {"source", "fps", "cameras": {cam: "raw" | "jpeg"}, "attrs": root attributes equal in every
    episode imported, "episodes": [N, ...]}}``.

    Args:
        src_folder: the folder of ``episode_N.hdf5`` files (not searched recursively).
        out: a new (or empty) folder; it appears only once the import succeeded.
        episodes: which files, by N: indices, or a selection text (``"0,3,5-9"``, ``"sim == true"``,
            ``"steps > 400"``; see :mod:`~trajstore.interop.source_selection`); default all.
        key_map: ``{source key: leaf path}``, e.g. ``{"observations/images/cam_high": "observation/images/top"}``.
        camera: ``"jpeg"`` (default, lossy), ``"png"`` (exact) or ``"video"``.
        fps: frames per second of the camera leaves (Hz); the files keep no rate. Default 50 (ALOHA's DT = 0.02 s).
        progress: show a progress bar (tqdm, in steps) on stderr.

    Warns:
        AlohaWarning: names ``episode_N.hdf5`` files left out (an N of more than 9 digits).

    Raises:
        FormatError: names the file and key: a file that is not HDF5, a dataset storing less than it declares
            (never written), a damaged chunk, a missing dataset, a link, virtual
            dataset, declared size beyond the bounds or layout error (see
            :func:`~trajstore.interop.aloha._source.read_episode_file`), episodes whose datasets differ; a JPEG
            frame that does not decode (found while copying: ``out`` is then not made).
        InvalidValueError: a bad selection, ``key_map`` or ``fps``; a value the buffer refuses (NaN); ``out``
            inside ``src_folder``.
        StorageExistsError: ``out`` is a file or a non-empty folder.
        FileNotFoundError / NotADirectoryError: ``src_folder`` is not a folder.
        ValueError: an unknown ``camera``.
    """
    from tqdm import tqdm

    from trajstore._cameras import camera_routing
    from trajstore._fs import check_new_folder
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    from trajstore.ops.copy import refuse_nested

    routing = camera_routing(camera)
    fps_value = _fps_value(fps)
    out = Path(out)
    check_new_folder(out)
    if Path(src_folder).is_dir():
        refuse_nested([src_folder], out)  # out inside the source would be read as one of its files next time
    source = str(src_folder)
    files = {n: read_episode_file(n, p) for n, p in episode_files(src_folder)}
    chosen = select_source_episodes([SourceEpisode(n, f.steps, f.data()) for n, f in files.items()], episodes,
                                    source=source)
    picked = [files[n] for n in chosen]
    check_alike(picked)
    leaves = leaf_paths(list(picked[0].entries), key_map, source)
    space = step_space(picked[0], leaves, fps_value, _aloha_metadata(src_folder, picked, fps_value))
    total = sum(f.steps for f in picked)
    with staged_folder(out) as tmp, tqdm(total=total, unit="step", disable=not progress,
                                         desc=f"import {Path(src_folder).name}") as bar:
        with ReplayBuffer.create(DictStorage, space, cache_path=tmp,
                                 **dict_storage_kwargs_from_space(space, **routing)) as rb:
            for f in picked:
                _copy_episode(f, leaves, rb, bar)
                rb.end_episode(**f.data())
    return ImportSummary(out, len(picked), total, {k: leaves[k] for k in picked[0].entries})


def _aloha_metadata(src: str | os.PathLike, files: list[EpisodeFile], fps: float | int) -> dict[str, Any]:
    first = files[0]
    same = {k: v for k, v in first.attrs.items() if all(f.attrs.get(k, None) == v for f in files)}
    return {"source": Path(src).name, "fps": fps, "episodes": [f.index for f in files], "attrs": same,
            "cameras": {k.rsplit("/", 1)[1]: e.camera for k, e in first.entries.items() if e.camera}}


def _block_steps(f: EpisodeFile) -> int:
    step = sum(int(np.prod(e.frame or e.shape, dtype=np.int64)) * (1 if e.camera else e.dtype.itemsize)
               + (e.shape[0] if e.camera == "jpeg" else 0) for e in f.entries.values())
    return max(1, BLOCK_BYTES // max(step, 1))


def _copy_episode(f: EpisodeFile, leaves: dict[str, str], rb: Any, bar: Any) -> None:
    """Append ``f``'s steps in blocks of :func:`_block_steps` (reads one block of every dataset at a time;
    a block is flushed before the next is handed over, so memory is bounded by two blocks whatever the
    episode's length)."""
    h5py = h5py_module()
    block = _block_steps(f)
    try:
        h5 = h5py.File(f.path, "r")
    except (OSError, ValueError) as exc:
        raise FormatError(f"{f.path}: not an HDF5 file ({exc})") from None
    with h5:
        for start in range(0, f.steps, block):
            stop = min(start + block, f.steps)
            lengths = _read(h5, COMPRESS_LEN, f, start, stop, axis=1) if f.compress_len else None
            batch: dict[str, Any] = {}
            for key, e in f.entries.items():
                values = _read(h5, key, f, start, stop)
                if e.camera == "jpeg":
                    frames = np.empty((stop - start, *e.frame), np.uint8)
                    decode_frames(values, frames, lengths, f"{f.path}: /{key}", start)
                    values = frames
                node = batch
                parts = leaves[key].split("/")
                for p in parts[:-1]:
                    node = node.setdefault(p, {})
                node[parts[-1]] = values
            if start:
                # The block before is written and committed before this one is handed over (it was written
                # behind while this one was read): the buffer's write-behind queue is bounded in blocks of its
                # own size, and one extend of a block here is one such block however large, so without this a
                # long episode of big frames piles up in RAM. Two blocks at most are held.
                rb.flush()
            try:
                rb.extend(batch)
            except InvalidValueError as exc:
                raise InvalidValueError(f"{f.path}: steps {start}..{stop - 1}: {exc}") from None
            bar.update(stop - start)


def _read(h5: Any, key: str, f: EpisodeFile, start: int, stop: int, axis: int = 0) -> np.ndarray:
    try:
        d = h5[key]
        return np.asarray(d[start:stop] if axis == 0 else d[:, start:stop])
    except (OSError, ValueError, KeyError) as exc:  # a damaged chunk, a missing filter
        raise FormatError(f"{f.path}: /{key}: steps {start}..{stop - 1} cannot be read ({exc})") from None
