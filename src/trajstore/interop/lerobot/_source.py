"""Read and check what a LeRobot v3.0 dataset folder says about itself, before anything is imported.

The layout is LeRobot's (``lerobot/datasets/utils.py`` of lerobot 0.4.x, format ``codebase_version``
``"v3.0"``)::

    meta/info.json                      fps, features, data_path / video_path templates
    meta/tasks.parquet                  task_index -> task (the task text is the pandas index)
    meta/episodes/chunk-*/file-*.parquet one row per episode: length, data file, per-video-key
                                        chunk/file index and from/to timestamps in that file
    data/chunk-*/file-*.parquet         one row per frame, many episodes per file
    videos/<key>/chunk-*/file-*.mp4     many episodes per file, one after the other

:func:`read_source` checks the version, the features, the episode table and that every file the
selected episodes need exists, and returns a :class:`LeRobotSource`; every problem is a
:class:`~trajstore.errors.FormatError` naming the file (and column or feature).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from trajstore._fs import path_inside, read_json
from trajstore.errors import FormatError
from trajstore.interop.lerobot._bounds import DataFileSizes, check_frame_values, check_sizes, check_template
from trajstore.interop.lerobot._import_meta import choose_episodes, place_features
from trajstore.interop.lerobot._trajstore_meta import read_entry
from trajstore.storages.frames import FrameLayout

#: Versions of the LeRobot format this importer reads.
SUPPORTED_VERSIONS = ("v3.0",)
#: Per-frame columns LeRobot adds to every dataset; derivable from the episode table, not imported as leaves.
BOOKKEEPING = ("timestamp", "frame_index", "episode_index", "index", "task_index")
#: Feature dtypes stored as encoded frames.
CAMERA_DTYPES = ("video", "image")


@dataclass(frozen=True)
class Feature:
    """One LeRobot feature to import.

    Attributes:
        key: LeRobot's name (``"observation.images.front"``).
        path: the trajstore leaf path, ``key`` split at ``"."`` (``("observation", "images", "front")``).
        dtype: LeRobot's dtype: ``"video"``, ``"image"`` or a NumPy dtype name (``"float32"``, ``"bool"``).
        shape: per-frame shape; for cameras always ``(H, W, C)`` whatever order LeRobot listed.
        names: LeRobot's ``names`` (a list, a dict or None), kept as leaf metadata.
        space: the leaf's space kept by a trajstore export (info.json's ``trajstore`` entry), or None.
        metadata: the leaf metadata that entry kept (when it kept no space), or None.
    """

    key: str
    path: tuple[str, ...]
    dtype: str
    shape: tuple[int, ...]
    names: Any = None
    space: Any = None
    metadata: dict[str, Any] | None = None

    @property
    def is_camera(self) -> bool:
        return self.dtype in CAMERA_DTYPES

    @property
    def channel_first(self) -> bool:
        """A camera whose kept leaf is ``(C, H, W)`` (layout ``"CHW"``): its ``(H, W, C)`` frames are transposed."""
        return (self.is_camera and self.space is not None and len(self.space.shape) == 3
                and str(self.space.metadata.get("layout") or "HWC").upper() == "CHW")

    def to_leaf(self, frames: np.ndarray) -> np.ndarray:
        """Decoded frames ``(..., H, W, C)`` as values of the leaf: ``(..., C, H, W)`` for a CHW leaf."""
        return FrameLayout("CHW").to_user(frames) if self.channel_first else frames


@dataclass(frozen=True)
class VideoSpan:
    """Where one episode's frames of one video feature are: ``file`` from ``from_timestamp`` (s) on."""

    file: Path
    from_timestamp: float
    to_timestamp: float


@dataclass(frozen=True)
class EpisodeEntry:
    """One row of ``meta/episodes``: LeRobot's episode ``index``, its ``length`` in frames, its data file,
    per video feature key its :class:`VideoSpan`, and the ``meta/episodes`` file that lists it."""

    index: int
    length: int
    data_file: Path
    videos: dict[str, VideoSpan] = field(default_factory=dict)
    listed_in: Path | None = None


@dataclass(frozen=True)
class LeRobotSource:
    """A checked LeRobot v3.0 dataset: what :func:`read_source` returns.

    ``entry`` is info.json's ``trajstore`` entry (None when LeRobot wrote the dataset); ``data`` the
    episode data of each selected episode index when the entry keeps it; ``finals`` the final observation
    file the entry names (inside ``root``), or None."""

    root: Path
    version: str
    fps: float
    features: tuple[Feature, ...]
    episodes: tuple[EpisodeEntry, ...]
    tasks: dict[int, str]
    entry: Any = None
    data: dict[int, dict[str, Any]] = field(default_factory=dict)
    finals: Path | None = None


def read_source(root: str | os.PathLike, episodes: Iterable[int] | str | None = None,
                key_map: Mapping[str, str] | None = None) -> LeRobotSource:
    """Check the dataset folder ``root`` and describe it.

    Nothing outside ``root`` is read: every path the dataset names (``data_path`` / ``video_path`` filled
    in, the ``meta`` files) goes through :func:`trajstore._fs.path_inside`. Declared sizes are checked
    before anything is allocated (:mod:`~trajstore.interop.lerobot._bounds`): template widths, values per
    frame, each episode's ``length`` and each numeric column against the data file's footer.

    Args:
        episodes: LeRobot episode indices to import (any order; imported in that order), a selection text
            (:func:`~trajstore.interop.source_selection.select_source_episodes`), or None for all.
        key_map: ``{feature key: leaf path}`` (:func:`~trajstore.interop.lerobot._import_meta.place_features`).

    Raises:
        FormatError: ``root`` or a file is missing (names it), ``codebase_version`` is not v3.0 (names
            ``meta/info.json`` and the version), a feature of an unsupported dtype or shape, keys that
            clash as paths, a column missing from ``meta/episodes`` or holding a null or a value of the
            wrong type, an episode that is not there, a path that leads outside ``root`` (absolute,
            ``..``, a symlink), a path template with other fields or a width above 32, a shape of more
            than ``MAX_FRAME_VALUES`` values per frame, or an episode ``length`` / numeric feature shape
            its data file does not hold (names the file).
        ImportError: pyarrow is not installed (``pip install 'trajstore[lerobot]'``).
    """
    root = Path(root)
    if not root.is_dir():
        raise FormatError(f"{root}: no LeRobot dataset folder there")
    info_path = path_inside(root, "meta/info.json", "LeRobot dataset info")
    info = read_json(info_path, "LeRobot dataset info")
    version = info.get("codebase_version") if isinstance(info, dict) else None
    if version not in SUPPORTED_VERSIONS:
        raise FormatError(f"{info_path}: codebase_version {version!r} is not supported; trajstore imports LeRobot "
                          f"{', '.join(SUPPORTED_VERSIONS)} datasets (convert v2.x ones with LeRobot's "
                          "v2.1 -> v3.0 conversion script first)")
    fps = info.get("fps")
    if not isinstance(fps, (int, float)) or isinstance(fps, bool) or not math.isfinite(fps) or fps <= 0:
        raise FormatError(f"{info_path}: fps must be a positive finite number, got {fps!r}")
    if not isinstance(info.get("data_path"), str):
        raise FormatError(f"{info_path}: data_path is missing")
    check_template(info["data_path"], ("chunk_index", "file_index"), info_path, "data_path")
    if isinstance(info.get("video_path"), str):
        check_template(info["video_path"], ("video_key", "chunk_index", "file_index"), info_path, "video_path")
    entry = read_entry(info, info_path)
    features = place_features(_features(info, info_path, entry), entry, key_map, info_path)
    _check_paths_do_not_clash(list(features), info_path)
    tasks = _tasks(path_inside(root, "meta/tasks.parquet", "LeRobot tasks"))
    data_columns = [c.column for c in entry.episode_data] if entry is not None else []
    table = _episode_table(root, features, ["tasks", *data_columns], required=data_columns)
    if entry is not None:
        _check_entry_matches(entry, info, info_path, table)
    order, data = choose_episodes(root, table, entry, episodes)
    entries = _entries(root, info, info_path, features, table, order)
    check_sizes(entries, [f for f in features if not f.is_camera], DataFileSizes())
    finals = None
    if entry is not None and entry.final_observations is not None:
        finals = path_inside(root, entry.final_observations, f"{info_path}: entry 'trajstore' final_observations")
        if not finals.is_file():
            raise FormatError(f"{info_path}: entry 'trajstore' names {finals}, which does not exist")
    return LeRobotSource(root=root, version=version, fps=float(fps), features=features, episodes=entries, tasks=tasks,
                         entry=entry, data=data if entry is not None else {}, finals=finals)


def _features(info: dict, info_path: Path, entry: Any = None) -> tuple[Feature, ...]:
    raw = info.get("features")
    if not isinstance(raw, dict) or not raw:
        raise FormatError(f"{info_path}: features is missing or empty")
    out: list[Feature] = []
    text_keys = {k for k, e in (entry.features.items() if entry is not None else ())
                 if isinstance(e.space, dict) and e.space.get("type") == "text"}
    for key, spec in raw.items():
        if key in BOOKKEEPING:
            continue
        where = f"{info_path}: feature {key!r}"
        if not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str):
            raise FormatError(f"{where} has no dtype")
        shape = spec.get("shape")
        if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                  for s in shape):
            raise FormatError(f"{where}: shape must be a list of sizes, got {shape!r}")
        check_frame_values(tuple(shape), where)
        path = tuple(key.split("."))
        if any(not part or part == "*" or "/" in part for part in path):
            raise FormatError(f"{where}: each dot-separated part must be non-empty, not '*', without '/'")
        dtype, names = spec["dtype"], spec.get("names")
        try:  # kept as leaf metadata: JSON without NaN or infinity
            json.dumps(names, allow_nan=False)
        except (ValueError, TypeError) as exc:
            raise FormatError(f"{where}: names must be JSON without NaN or infinity ({exc})") from None
        if dtype in CAMERA_DTYPES:
            shape, names = _camera_shape(shape, names, where)
        elif not _is_numeric(dtype) and not (dtype == "string" and key in text_keys):
            raise FormatError(f"{where}: dtype {dtype!r} is not imported (video, image, bool and numeric "
                              "features are, and string ones a trajstore export kept as text leaves; the task "
                              "text becomes episode data)")
        out.append(Feature(key=key, path=path, dtype=dtype, shape=tuple(shape), names=names))
    return tuple(out)


def _is_numeric(dtype: str) -> bool:
    try:
        return np.dtype(dtype).kind in "biuf"
    except (TypeError, ValueError):
        return False


def _camera_shape(shape: list[int], names: Any, where: str) -> tuple[tuple[int, int, int], Any]:
    """(H, W, C) of a camera feature and its names in that order: LeRobot lists ``shape`` in the order
    of ``names`` (``["height", "width", "channels"]`` usually, ``["channels", "height", "width"]`` in
    some datasets); frames are decoded HWC whatever it says."""
    if len(shape) != 3:
        raise FormatError(f"{where}: a camera shape has 3 sizes, got {shape}")
    if isinstance(names, list) and len(names) == 3 and str(names[0]).lower() in ("channel", "channels", "c"):
        shape, names = [shape[1], shape[2], shape[0]], [names[1], names[2], names[0]]
    if shape[2] != 3:
        raise FormatError(f"{where}: only 3-channel (RGB) cameras are imported, got shape (H, W, C) {tuple(shape)}")
    return (shape[0], shape[1], shape[2]), names


def _check_paths_do_not_clash(features: list[Feature], info_path: Path) -> None:
    paths = {f.path: f.key for f in features}
    for f in features:
        for n in range(1, len(f.path)):
            if f.path[:n] in paths:
                raise FormatError(f"{info_path}: features {paths[f.path[:n]]!r} and {f.key!r} clash: trajstore "
                                  f"nests {f.key!r} under {'/'.join(f.path[:n])}, which is a leaf")


def _pq() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("importing LeRobot datasets needs pyarrow: pip install 'trajstore[lerobot]'") from exc
    return pq


def read_parquet(path: Path, what: str, columns: list[str] | None = None) -> Any:
    """``pyarrow.parquet.read_table(path, columns=...)``, a missing or unreadable file being a FormatError."""
    pq = _pq()
    if not path.is_file():
        raise FormatError(f"{what}: {path} does not exist")
    try:
        return pq.read_table(path, columns=columns)
    except Exception as exc:  # pyarrow raises ArrowInvalid, KeyError (missing column), OSError
        raise FormatError(f"{what}: cannot read {path}: {type(exc).__name__}: {exc}") from None


def _tasks(path: Path) -> dict[int, str]:
    """task_index -> task. LeRobot writes a pandas frame indexed by the task text; a ``task`` column is read too."""
    table = read_parquet(path, "LeRobot tasks")
    names = table.column_names
    text_col = "task" if "task" in names else next((n for n in names if n.startswith("__index_level_")), None)
    if "task_index" not in names or text_col is None:
        raise FormatError(f"LeRobot tasks: {path} needs task_index and the task text (columns: {names})")
    indices = table.column("task_index").to_pylist()
    if not all(_is_int(i) for i in indices):
        raise FormatError(f"LeRobot tasks: {path} column task_index holds a value that is not an integer")
    return {int(i): str(t) for i, t in zip(indices, table.column(text_col).to_pylist())}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Columns of meta/episodes read as integers; the others (timestamps) as finite numbers.
_INT_COLUMNS = ("episode_index", "length", "chunk_index", "file_index")


def _check_entry_matches(entry: Any, info: dict, info_path: Path, table: dict[str, list[Any]]) -> None:
    """The ``trajstore`` entry speaks of this dataset only: its features are features of info.json, its
    interrupted episodes episodes of meta/episodes.

    Raises:
        FormatError: naming info.json, the field and the keys or indices that are not the dataset's.
    """
    known = info.get("features") or {}
    unknown = [k for k in entry.features if k not in known or k in BOOKKEEPING]
    if unknown:
        raise FormatError(f"{info_path}: entry 'trajstore' features name {unknown!r:.200}, which are not "
                          f"features of info.json (it has {sorted(k for k in known if k not in BOOKKEEPING)!r:.200})")
    stray = sorted(set(entry.interrupted) - set(table["episode_index"]))
    if stray:
        raise FormatError(f"{info_path}: entry 'trajstore' interrupted lists {stray!r:.200}, which are not "
                          "episodes of meta/episodes")


def _episode_table(root: Path, features: tuple[Feature, ...], extra: Sequence[str] = (),
                   required: Sequence[str] = ()) -> dict[str, list[Any]]:
    """The needed columns of every meta/episodes file, one list per column, plus ``"file"``: the file of
    each row. Integer columns hold ints, timestamp columns finite floats. The ``extra`` columns are read as
    they are (a row of a file without one gets None, unless the column is one of ``required``), checked
    by whoever uses them.

    Raises:
        FormatError: no file, a file outside the dataset (a symlink), a column missing (a needed or
            ``required`` one) or with a null or a value of the wrong type (names the file and column).
    """
    folder = root / "meta" / "episodes"
    files = sorted(folder.glob("chunk-*/file-*.parquet"))
    if not files:
        raise FormatError(f"LeRobot episodes: no {folder}/chunk-*/file-*.parquet")
    needed = ["episode_index", "length", "data/chunk_index", "data/file_index"]
    for f in features:
        if f.dtype == "video":
            needed += [f"videos/{f.key}/{c}" for c in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")]
    columns: dict[str, list[Any]] = {c: [] for c in [*needed, *extra, "file"]}
    for file in files:
        file = path_inside(root, file.relative_to(root), "LeRobot episodes")
        table = read_parquet(file, "LeRobot episodes")
        for c in extra:
            if c not in table.column_names and c in required:
                raise FormatError(f"LeRobot episodes: {file} has no column {c!r}, which info.json's 'trajstore' "
                                  "entry names as episode data")
            columns[c] += table.column(c).to_pylist() if c in table.column_names else [None] * table.num_rows
        missing = [c for c in needed if c not in table.column_names]
        if missing:
            raise FormatError(f"LeRobot episodes: {file} has no column {', '.join(missing)}")
        for c in needed:
            values = table.column(c).to_pylist()
            integer = c.rsplit("/", 1)[-1] in _INT_COLUMNS
            ok = (_is_int if integer else
                  lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
            if not all(ok(v) for v in values):
                raise FormatError(f"LeRobot episodes: {file} column {c!r} holds a value that is not "
                                  f"{'an integer' if integer else 'a finite number'}")
            columns[c] += values
        columns["file"] += [file] * table.num_rows
    return columns


def _entries(root: Path, info: dict, info_path: Path, features: tuple[Feature, ...], table: dict[str, list[Any]],
             wanted: Iterable[int] | None) -> tuple[EpisodeEntry, ...]:
    rows = {e: r for r, e in enumerate(table["episode_index"])}
    order = sorted(rows) if wanted is None else [int(e) for e in wanted]
    missing = [e for e in order if e not in rows]
    if missing:
        raise FormatError(f"{root}: no episode {missing} in meta/episodes (it has {len(rows)}: "
                          f"{min(rows, default=None)}..{max(rows, default=None)})")
    if len(set(order)) != len(order):
        raise ValueError(f"episodes lists an episode twice: {order}")
    videos = [f for f in features if f.dtype == "video"]
    if videos and not isinstance(info.get("video_path"), str):
        raise FormatError(f"{info_path}: video_path is missing but {videos[0].key!r} is a video feature")
    out = []
    for e in order:
        r = rows[e]
        data_file = _file(root, info["data_path"], info_path, chunk_index=table["data/chunk_index"][r],
                          file_index=table["data/file_index"][r])
        spans = {}
        for f in videos:
            col = lambda c: table[f"videos/{f.key}/{c}"][r]  # noqa: E731
            spans[f.key] = VideoSpan(_file(root, info["video_path"], info_path, video_key=f.key,
                                           chunk_index=col("chunk_index"), file_index=col("file_index")),
                                     float(col("from_timestamp")), float(col("to_timestamp")))
        if table["length"][r] < 1:
            raise FormatError(f"{table['file'][r]}: episode {e} has length {table['length'][r]} in meta/episodes")
        out.append(EpisodeEntry(index=e, length=table["length"][r], data_file=data_file, videos=spans,
                               listed_in=table["file"][r]))
    return tuple(out)


def _file(root: Path, template: str, info_path: Path, **fields: Any) -> Path:
    """The file a path template of info.json (checked by ``check_template``) names, inside ``root``,
    checked to exist."""
    try:
        rel = template.format(**fields)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise FormatError(f"{info_path}: cannot fill the path template {template!r} with {fields}: {exc}") from None
    path = path_inside(root, rel, f"{info_path}: the path template {template!r}")
    if not path.is_file():
        raise FormatError(f"LeRobot dataset {root}: {path} does not exist")
    return path
