"""Import a LeRobot v3.0 dataset folder into a new trajstore buffer folder: what
``trajstore import lerobot SRC OUT`` calls.

Reads the folder with pyarrow and PyAV only (the ``lerobot`` extra); LeRobot itself is not needed.
Format: LeRobot's ``codebase_version`` ``"v3.0"`` (lerobot >= 0.4), see
:mod:`~trajstore.interop.lerobot._source` for the files read.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from trajstore._fs import staged_folder
from trajstore.errors import FormatError, InvalidValueError
from trajstore.interop.lerobot._frames import VideoFrames, array_values, decode_image
from trajstore.interop.summary import ImportSummary
from trajstore.interop.lerobot._source import (BOOKKEEPING, EpisodeEntry, Feature, LeRobotSource,
                                                    read_parquet, read_source)
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space

#: Frames decoded and appended at a time: bounds the memory an episode takes (a 1000-frame episode of
#: two 480x640 cameras would be 1.8 GB at once).
BLOCK_FRAMES = 64


#: The summary :func:`import_lerobot` returns (the name it had before imports shared one).
LeRobotImportSummary = ImportSummary


def import_lerobot(src: str | os.PathLike, out: str | os.PathLike, *, camera: str = "jpeg",
                   episodes: Iterable[int] | str | None = None, key_map: Mapping[str, str] | None = None,
                   progress: bool = True) -> ImportSummary:
    """Copy a LeRobot v3.0 dataset (a local folder) into a new unbounded trajstore buffer folder ``out``.

    One LeRobot frame becomes one step; one LeRobot episode one trajstore episode, in the order of
    ``episodes`` (default: all, by episode index).

    - Each feature of ``meta/info.json`` becomes a leaf; a dotted name is nested at its dots:
      ``"observation.images.front"`` -> ``observation/images/front`` of the step's ``DictSpace``
      (``rb[i]["observation"]["images"]["front"]``). The feature's ``names`` are kept in the leaf's
      metadata (``{"names": [...]}``).
    - ``video`` and ``image`` features become camera leaves ``(H, W, 3)`` uint8 with metadata
      ``{"kind": "image", "layout": "HWC", "fps": <dataset fps>}``, stored the way ``camera`` says
      through :func:`~trajstore.storages.dict_storage_kwargs_from_space`. Frame ``i`` of a video
      episode is the frame nearest to its ``from_timestamp + i / fps`` in the (shared) video file.
    - Numeric features keep their dtype and shape (``BoxSpace`` on the dtype's range, unbounded for
      floats; ``bool`` -> ``BinarySpace``).
    - LeRobot's per-frame bookkeeping (``timestamp``, ``frame_index``, ``episode_index``, ``index``,
      ``task_index``) is not stored: it is the step's position in its episode. The task becomes
      episode data: ``rb.episode(k).data == {"task": "...", "lerobot_episode_index": e}`` (``task`` is a
      list, in order of first use, for an episode with several tasks).
    - A dataset written by :func:`~trajstore.interop.lerobot.export_lerobot` (info.json has a
      ``"trajstore"`` entry, see :mod:`~trajstore.interop.lerobot._trajstore_meta`) gives the buffer
      back: each feature goes to its original leaf path with its own shape (``()`` for a scalar that
      LeRobot calls ``[1]``), metadata and space (bounds included); each episode gets exactly the data
      it had (from the ``episode_data/<key>`` columns of ``meta/episodes``, no ``lerobot_episode_index``),
      its interrupted flag, and its final observation (``rb.final_observation(k)``; frames exact PNG in the
      side file, then stored the way ``camera`` says).

    Args:
        src: the dataset folder (``meta/info.json``, ``data/``, ``videos/``).
        out: the buffer folder to make; it must not exist (or be an empty folder). It appears only
            once the import is complete: the buffer is written to a hidden sibling folder and renamed.
        camera: ``"jpeg"`` (``ImageStorage`` JPEG, quality 90, lossy), ``"png"`` (lossless) or
            ``"video"`` (H.264 ``VideoStorage``, lossy); see
            :func:`~trajstore.recording.gymnasium.camera_routing`.
        episodes: LeRobot episode indices to import (in that order), a selection text as ``trajstore copy
            --episodes`` takes, over LeRobot episode indices and the data the import gives (``"0,3-5"``,
            ``'task == "push the T"'``, ``'success == true'``), or None for all.
        key_map: ``{LeRobot feature key: leaf path}`` (``{"observation.image": "observation/pixels"}``);
            other features keep the trajstore entry's leaf, else their key split at its dots.
        progress: show a progress bar (tqdm, in frames) on stderr.

    Returns:
        A :class:`LeRobotImportSummary`; open the folder with ``ReplayBuffer.load_from(out)``.

    Raises:
        FormatError: the dataset is not LeRobot v3.0 (v2.x: names ``meta/info.json`` and its version), a
            file it needs is missing (names it), a path it names leads outside ``src`` (``..``, absolute,
            a symlink out of it: nothing outside is read), a declared size its files do not hold or that
            is beyond the import's bounds (checked before anything is allocated), or its content does not
            match ``info.json`` (a video frame missing near its timestamp, a column of the wrong size, an
            undecodable image); a ``trajstore`` entry with a field of the wrong type or another version, a
            shape or space that does not fit its feature, a leaf name that is empty, has a ``/`` or is
            ``.``/``..``, an episode data column not named ``episode_data/...`` or missing from
            meta/episodes, interrupted indices or feature keys that are not the dataset's, an episode data
            cell of another encoding or that the buffer cannot keep (JSON nested too deep, NaN: names the
            file, column and row), a final observations file outside ``src``, missing, or with a value of
            the wrong size (names the file and field); a value the leaf's space refuses (NaN, outside the
            entry's bounds: names the data file, episode and feature); see
            :func:`~trajstore.interop.lerobot._source.read_source`.
        StorageExistsError: ``out`` is a file or a non-empty folder.
        ValueError: an unknown ``camera``, an episode listed twice.
        InvalidValueError (a ValueError): ``key_map`` names a feature the dataset does not have (names the
            features held) or a bad leaf path; a malformed selection or one that selects nothing.
        ImportError: pyarrow or PyAV is not installed: ``pip install 'trajstore[lerobot]'``.
        Everything is checked that can be before anything is written; an error during the copy removes
        what was written, so ``out`` is never left half made.
    """
    from trajstore._cameras import camera_routing
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    routing = camera_routing(camera)
    out = Path(out)
    source = read_source(src, episodes, key_map)
    space = source_space(source)
    with staged_folder(out) as staging:  # `out` appears whole or not at all
        with ReplayBuffer.create(DictStorage, space, cache_path=staging,
                                 **dict_storage_kwargs_from_space(space, **routing)) as rb:
            steps = _copy_episodes(source, rb, progress)
    return ImportSummary(path=out, episodes=len(source.episodes), steps=steps,
                                leaves={f.key: "/".join(f.path) for f in source.features})


def source_space(source: LeRobotSource) -> DictSpace:
    """The trajstore space of one LeRobot frame (see :func:`import_lerobot` for the mapping)."""
    tree: dict[str, Any] = {}
    for f in source.features:
        node = tree
        for part in f.path[:-1]:
            node = node.setdefault(part, {})
        node[f.path[-1]] = _leaf_space(f, source.fps)

    def build(node: dict[str, Any]) -> DictSpace:
        return DictSpace({k: build(v) if isinstance(v, dict) else v for k, v in node.items()})

    return build(tree)


def _leaf_space(f: Feature, fps: float) -> Space:
    if f.space is not None:  # kept by a trajstore export
        return f.space
    meta: dict[str, Any] = {"names": f.names} if f.names is not None else {}
    meta = dict(f.metadata) if f.metadata is not None else meta
    if f.is_camera:
        fps_value = int(fps) if float(fps).is_integer() else fps
        return BoxSpace(0, 255, f.shape, np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": fps_value,
                                                              **meta})
    dtype = np.dtype(f.dtype)
    if dtype.kind == "b":
        return BinarySpace(f.shape, metadata=meta)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return BoxSpace(info.min, info.max, f.shape, dtype, metadata=meta)
    return BoxSpace(-np.inf, np.inf, f.shape, dtype, metadata=meta)


def _copy_episodes(source: LeRobotSource, rb: Any, progress: bool) -> int:
    from tqdm import tqdm

    columns = [f.key for f in source.features if f.dtype != "video"] + ["frame_index", "episode_index", "task_index"]
    tables = _DataFiles(columns)
    videos = VideoFrames()
    finals = None
    if source.finals is not None:
        from trajstore.interop.lerobot._final_observations import FinalObservations, observation_features

        finals = FinalObservations(source.finals, observation_features(source.features))
    steps = 0
    try:
        with tqdm(total=sum(e.length for e in source.episodes), unit="frame", disable=not progress,
                  desc=f"importing {source.root.name}") as bar:
            for entry in source.episodes:
                rows = tables.episode_rows(entry)
                blocks = _episode_blocks(source, entry, rows, videos)
                for block, n in blocks:
                    _extend(rb, block, source, entry)
                    bar.update(n)
                if source.entry is None:
                    rb.end_episode(task=_task_of(source, entry, rows), lerobot_episode_index=entry.index)
                else:
                    final = finals.get(entry.index, source.root) if finals is not None else None
                    try:
                        rb.end_episode(final, interrupted=entry.index in source.entry.interrupted,
                                       **source.data[entry.index])
                    except InvalidValueError as exc:  # a final observation outside its space (NaN, bounds)
                        where = source.finals if final is not None else entry.listed_in
                        raise FormatError(f"LeRobot episode {entry.index} ({where}): {exc}") from None
                steps += entry.length
    finally:
        videos.close()
    return steps


def _extend(rb: Any, block: dict[str, Any], source: LeRobotSource, entry: EpisodeEntry) -> None:
    """``rb.extend(block)``; a value the leaf's space refuses (NaN, outside the bounds the ``trajstore``
    entry keeps) becomes a FormatError naming the data file, the episode and the feature."""
    try:
        rb.extend(block)
    except InvalidValueError as exc:
        space = rb.space
        for f in source.features:  # the feature whose values are refused
            node, leaf = block, space
            for part in f.path:
                node, leaf = node[part], leaf[part]
            try:
                leaf.validate(node, batched=True, path="/".join(f.path))
            except InvalidValueError:
                raise FormatError(f"LeRobot episode {entry.index} ({entry.data_file}): feature {f.key!r} "
                                  f"(leaf {'/'.join(f.path)!r}): {exc}") from None
        raise FormatError(f"LeRobot episode {entry.index} ({entry.data_file}): {exc}") from None


class _DataFiles:
    """Reads data parquet files (only the imported columns), keeping the last one: episodes of one
    file come one after the other."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self._path: Path | None = None
        self._table: Any = None
        self._episode_of_row: np.ndarray | None = None

    def episode_rows(self, entry: EpisodeEntry) -> Any:
        """The rows of one episode, in ``frame_index`` order; a FormatError unless they are frames
        ``0 .. length-1``."""
        if entry.data_file != self._path:
            self._table = read_parquet(entry.data_file, "LeRobot data", self.columns)
            self._episode_of_row = self._table.column("episode_index").to_numpy()
            self._path = entry.data_file
        rows = self._table.take(np.flatnonzero(self._episode_of_row == entry.index))
        frame_index = rows.column("frame_index").to_numpy()
        order = np.argsort(frame_index, kind="stable")
        if not np.array_equal(frame_index[order], np.arange(entry.length)):
            raise _episode_error(entry, f"has frames {_span(frame_index)} in {entry.data_file}, "
                                        f"meta/episodes says {entry.length} (0..{entry.length - 1})")
        return rows.take(order)


def _episode_error(entry: EpisodeEntry, what: str) -> FormatError:
    return FormatError(f"LeRobot episode {entry.index} {what}")


def _span(values: np.ndarray) -> str:
    return f"{len(values)} ({values.min()}..{values.max()})" if len(values) else "none"


def _episode_blocks(source: LeRobotSource, entry: EpisodeEntry, rows: Any,
                    videos: VideoFrames) -> Iterator[tuple[dict[str, Any], int]]:
    """The episode as nested step batches of at most :data:`BLOCK_FRAMES` steps, with their sizes."""
    where = f"LeRobot episode {entry.index} ({entry.data_file})"
    arrays = {f.key: array_values(rows, f, where) for f in source.features if not f.is_camera}
    images = {f.key: rows.column(f.key).to_pylist() for f in source.features if f.dtype == "image"}
    streams = {f.key: videos.episode(entry.videos[f.key], entry.length, source.fps, f, where)
               for f in source.features if f.dtype == "video"}
    for start in range(0, entry.length, BLOCK_FRAMES):
        stop = min(start + BLOCK_FRAMES, entry.length)
        leaves: dict[str, np.ndarray] = {}
        for f in source.features:
            if f.dtype == "video":
                leaves[f.key] = f.to_leaf(np.stack(list(itertools.islice(streams[f.key], stop - start))))
            elif f.dtype == "image":
                leaves[f.key] = f.to_leaf(np.stack([decode_image(cell, f, source.root, f"{where} frame {start + i}")
                                                    for i, cell in enumerate(images[f.key][start:stop])]))
            else:
                leaves[f.key] = arrays[f.key][start:stop]
        yield _nest(source.features, leaves), stop - start


def _nest(features: tuple[Feature, ...], leaves: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in features:
        node = out
        for part in f.path[:-1]:
            node = node.setdefault(part, {})
        node[f.path[-1]] = leaves[f.key]
    return out


def _task_of(source: LeRobotSource, entry: EpisodeEntry, rows: Any) -> str | list[str]:
    """The episode's task text (a list in order of first use when it has several)."""
    indices = rows.column("task_index").to_numpy(zero_copy_only=False)
    if indices.dtype.kind not in "iu":
        raise _episode_error(entry, f"has task_index values of type {rows.column('task_index').type} in "
                                    f"{entry.data_file}, not integers")
    first_use = [int(t) for t in dict.fromkeys(indices.tolist())]
    unknown = [t for t in first_use if t not in source.tasks]
    if unknown:
        raise _episode_error(entry, f"uses task_index {unknown} in {entry.data_file}, which meta/tasks.parquet "
                                    "does not list")
    texts = [source.tasks[t] for t in first_use]
    return texts[0] if len(texts) == 1 else texts


__all__ = ["BOOKKEEPING", "LeRobotImportSummary", "import_lerobot", "source_space"]
