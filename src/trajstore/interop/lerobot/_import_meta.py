"""What an import takes from a LeRobot dataset beyond the format, decided before anything is written:
each feature's leaf (``key_map``, else the ``"trajstore"`` entry of info.json, else the key split at its
dots), its shape and space (the entry's, when they agree with the feature), the episodes chosen
(:func:`~trajstore.interop.source_selection.select_source_episodes`) and the episode data each gets.

Episode data: a dataset with the entry gives each episode the data its ``episode_data/<key>`` columns
keep (:mod:`~trajstore.interop.lerobot._episode_data`), exactly; a dataset LeRobot wrote gives
``{"task": <text, or list of texts>, "lerobot_episode_index": e}``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from trajstore.errors import FormatError
from trajstore.interop.lerobot._episode_data import decode
from trajstore.interop.lerobot._key_maps import import_paths
from trajstore.interop.lerobot._trajstore_meta import TrajstoreEntry


def place_features(features: Sequence[Any], entry: TrajstoreEntry | None, key_map: Mapping[str, str] | None,
                   info_path: Path) -> tuple[Any, ...]:
    """``features`` (:class:`~trajstore.interop.lerobot._source.Feature`) with their leaf path, shape and
    leaf space decided.

    Raises:
        InvalidValueError: ``key_map`` names a feature the dataset lacks, or a bad leaf path.
        FormatError: the entry's shape or space of a feature disagrees with info.json's feature (dtype,
            number of values), or its space cannot be read; two features on one leaf (names them).
    """
    renamed = import_paths([f.key for f in features], key_map)
    out = []
    for f in features:
        kept = entry.features.get(f.key) if entry is not None else None
        if kept is not None:
            f = _with_entry(f, kept, info_path)
        if f.key in renamed:
            f = dataclasses.replace(f, path=renamed[f.key])
        out.append(f)
    seen: dict[tuple[str, ...], str] = {}
    for f in out:
        if f.path in seen:
            raise FormatError(f"{info_path}: features {seen[f.path]!r} and {f.key!r} both become leaf "
                              f"{'/'.join(f.path)!r}; give one another leaf (key_map)")
        seen[f.path] = f.key
    return tuple(out)


def _with_entry(f: Any, kept: Any, info_path: Path) -> Any:
    where = f"{info_path}: entry 'trajstore' features[{f.key!r}]"
    shape = tuple(kept.shape)
    if f.is_camera:  # a CHW leaf (kept metadata layout "CHW") holds the (H, W, C) frames channel first
        chw = len(shape) == 3 and str(kept.metadata.get("layout") or "HWC").upper() == "CHW"
        frame = (f.shape[2], *f.shape[:2]) if chw else f.shape
        if shape != frame:
            raise FormatError(f"{where}: shape {list(shape)} is not the camera's {list(frame)}"
                              + (" (CHW)" if chw else ""))
    elif math.prod(shape) != math.prod(f.shape):
        raise FormatError(f"{where}: shape {list(shape)} does not hold the {math.prod(f.shape)} values of "
                          f"shape {list(f.shape)}")
    space = None
    if kept.space is not None:
        if kept.space.get("shape", []) != list(shape):  # checked before anything is built from it (text: none)
            raise FormatError(f"{where}: space shape {kept.space.get('shape')!r:.40} is not {list(shape)}")
        try:
            from trajstore.spaces import space_from_json

            space = space_from_json(kept.space)
            dtype_ok = (space.type_name == "text" if f.dtype == "string"
                        else np.dtype(space.dtype) == np.dtype("uint8" if f.is_camera else f.dtype))
        except Exception as exc:  # UnknownTypeError, KeyError, TypeError, ValueError of a bad config
            raise FormatError(f"{where}: space cannot be read: {type(exc).__name__}: {exc}") from None
        if tuple(space.shape) != shape or not dtype_ok:
            raise FormatError(f"{where}: space {space!r:.80} does not fit the feature ({f.dtype}, {list(f.shape)})")
        if f.is_camera and space.metadata.get("kind") != "image":
            space = None  # a camera stays a camera: the default camera leaf
    if f.is_camera and shape != f.shape and (space is None or str(space.metadata.get("layout")).upper() != "CHW"):
        raise FormatError(f"{where}: a CHW camera needs its kept space (kind 'image', layout 'CHW')")
    return dataclasses.replace(f, path=kept.path, shape=f.shape if f.is_camera else shape, space=space,
                               metadata=dict(kept.metadata))


def choose_episodes(root: Path, table: Mapping[str, list[Any]], entry: TrajstoreEntry | None,
                    episodes: Iterable[int] | str | None) -> tuple[list[int], dict[int, dict[str, Any]]]:
    """The LeRobot episode indices to import, in import order, and the data of each.

    Raises:
        FormatError: ``episodes`` lists an index the dataset does not have; an episode data column is
            missing or holds a value of another encoding (names the file and column).
        InvalidValueError: a malformed selection, an index listed twice, a selection of nothing.
    """
    from trajstore.interop.source_selection import SourceEpisode, select_source_episodes

    indices = table["episode_index"]
    if entry is not None:
        datas = decode(entry.episode_data, table, range(len(indices)), f"LeRobot episodes ({root / 'meta/episodes'})")
    else:
        tasks = table.get("tasks") or [None] * len(indices)
        datas = [{"task": _task_text(t), "lerobot_episode_index": e} for t, e in zip(tasks, indices)]
    data_of = dict(zip(indices, datas))
    if episodes is not None and not isinstance(episodes, str):
        episodes = [int(e) for e in episodes]
        missing = [e for e in episodes if e not in data_of]
        if missing:
            raise FormatError(f"{root}: no episode {missing} in meta/episodes (it has {len(indices)}: "
                              f"{min(indices, default=None)}..{max(indices, default=None)})")
    lengths = dict(zip(indices, table["length"]))
    candidates = [SourceEpisode(e, max(int(lengths[e]), 0), data_of[e]) for e in sorted(data_of)]
    order = select_source_episodes(candidates, episodes, source=str(root))
    return order, {e: data_of[e] for e in order}


def _task_text(tasks: Any) -> Any:
    if isinstance(tasks, list) and all(isinstance(t, str) for t in tasks) and tasks:
        return tasks[0] if len(tasks) == 1 else tasks
    return None
