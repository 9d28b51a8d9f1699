"""What an RLDS import will write, found by reading (and checking) every episode of the split once before
anything is written: the episodes chosen, each leaf's source feature and path, the step space.

Mapping (see :func:`~trajstore.interop.rlds.import_rlds`): ``steps/<a>/<b>`` -> leaf ``a/b``;
``is_terminal`` -> ``terminated``; a made leaf ``truncated`` = ``is_last and not is_terminal``;
``is_first``/``is_last`` mark the boundaries and are not leaves (unless ``key_map`` names them);
``language_instruction`` -> episode data ``task``, and a leaf only when it changes within an imported
episode (or ``key_map`` names it); the episode-level features -> episode data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._json import dumps_checked
from trajstore.errors import FormatError, InvalidValueError
from trajstore.interop.rlds._episode import (check_boundaries, check_image, episode_data, episode_length,
                                             step_values)
from trajstore.interop.rlds._features import FeatureSpec, leaf_space
from trajstore.interop.rlds._source import RldsSource, iter_episodes
from trajstore.interop.rlds._tfrecord import RecordRef
from trajstore.interop.source_selection import SourceEpisode, select_source_episodes
from trajstore.spaces import BinarySpace, DictSpace, Space

__all__ = ["EpisodePlan", "ImportPlan", "LANGUAGE", "LeafPlan", "MAX_TEXT_CHARS", "plan_import"]

#: The step feature that gives an episode its ``task``.
LANGUAGE = "language_instruction"
#: Step features renamed by default (source name -> leaf path).
RENAMED = {"is_terminal": "terminated"}
#: Step features that are not leaves unless ``key_map`` names them: they mark the episode's boundaries.
BOUNDARIES = ("is_first", "is_last")
#: The longest text (characters) of a per-step Text feature: a longer one is refused (the leaf is as wide
#: as the longest text of the imported episodes, at every step: 4 bytes a character).
MAX_TEXT_CHARS = 4096
#: Leaves the import adds (not source features): ``truncated`` = ``is_last and not is_terminal`` (RLDS ends
#: an episode cut by a time limit with ``is_last`` and no ``is_terminal``); ``terminated`` when the dataset
#: has no ``is_terminal`` (then all False).
TRUNCATED, TERMINATED = "truncated", "terminated"
#: Episode data keys the import sets itself or that ``end_episode`` takes as its own parameters.
RESERVED = ("rlds_index", "interrupted", "final_observation", "flush")


@dataclass(frozen=True)
class EpisodePlan:
    """One episode to import: its position in the split (``index``), record, length and episode data;
    ``text_length`` the longest text of each step Text feature (by name), ``language_varies`` whether its
    ``language_instruction`` changes."""

    index: int
    ref: RecordRef
    steps: int
    data: dict[str, Any]
    text_length: dict[str, int] = field(default_factory=dict)
    language_varies: bool = False


@dataclass(frozen=True)
class LeafPlan:
    """One leaf: the step feature it comes from and its path in the step space; ``spec`` None for a leaf
    the import makes (``path`` :data:`TRUNCATED` or :data:`TERMINATED`, bool of shape ``()``)."""

    spec: FeatureSpec | None
    path: tuple[str, ...]


@dataclass(frozen=True)
class ImportPlan:
    source: RldsSource
    episodes: tuple[EpisodePlan, ...]
    leaves: tuple[LeafPlan, ...]
    space: DictSpace

    @property
    def steps(self) -> int:
        return sum(e.steps for e in self.episodes)


@dataclass
class _Scan:
    """What the first pass learns about the step text features of one episode."""

    text_length: dict[str, int]
    language_varies: bool = False


def _scan_episode(example: dict, source: RldsSource, scan: _Scan, where: str) -> tuple[int, dict[str, Any]]:
    steps = episode_length(example, where)
    check_boundaries(example, steps, where)
    tasks: list[str] = []
    for spec in source.features.steps:
        values = step_values(example, spec, steps, where)
        if spec.kind == "image":
            for t, data in enumerate(values):
                check_image(data, spec, f"{where}: {spec.key!r} step {t}")
        elif spec.kind == "text":
            longest = max(map(len, values))
            if longest > MAX_TEXT_CHARS:
                at = next(t for t, v in enumerate(values) if len(v) == longest)
                raise FormatError(f"{where}: {spec.key!r} step {at} holds a text of {longest} characters, more "
                                  f"than the {MAX_TEXT_CHARS} a per-step text leaf takes")
            scan.text_length[spec.name] = max(scan.text_length.get(spec.name, 1), longest)
            if spec.name == LANGUAGE:
                tasks = list(dict.fromkeys(values))
                scan.language_varies |= len(tasks) > 1
        elif values.dtype.kind == "f":
            nan = np.flatnonzero(np.isnan(values).any(axis=tuple(range(1, values.ndim))))
            if len(nan):
                raise FormatError(f"{where}: {spec.key!r} is NaN at step {nan[0]} (a step value must be a number)")
    data = episode_data(example, source.features.episode, where)
    reserved = RESERVED + (("task",) if tasks else ())
    clash = [k for k in data if k in reserved]
    if clash:
        raise FormatError(f"{where}: episode metadata {clash[0]!r} has the name of an episode data key the "
                          f"import sets ({', '.join(reserved)})")
    if tasks:
        data["task"] = tasks[0] if len(tasks) == 1 else tasks
    try:
        dumps_checked(data, what=f"{where}: episode metadata")
    except InvalidValueError as exc:
        raise FormatError(str(exc)) from None
    return steps, data


def _path(target: str, source_key: str) -> tuple[str, ...]:
    parts = tuple(target.split("/"))
    if not all(parts) or any(p in (".", "..") for p in parts):
        raise InvalidValueError(f"key_map: {source_key!r} -> {target!r} is not a leaf path ('a/b/c' expected)")
    return parts


def _leaves(source: RldsSource, key_map: Mapping[str, str], scan: _Scan) -> tuple[LeafPlan, ...]:
    names = [s.name for s in source.features.steps]
    key_map = {k[len("steps/"):] if k.startswith("steps/") and k[len("steps/"):] in names else k: v
               for k, v in key_map.items()}
    unknown = [k for k in key_map if k not in names]
    if unknown:
        raise InvalidValueError(f"key_map names {unknown[0]!r}, which {source.root} does not have; its step "
                                f"features: {', '.join(names)}")
    out = []
    for spec in source.features.steps:
        if spec.name not in key_map and (spec.name in BOUNDARIES or (spec.name == LANGUAGE
                                                                     and not scan.language_varies)):
            continue
        target = key_map.get(spec.name, RENAMED.get(spec.name, spec.name))
        out.append(LeafPlan(spec, _path(target, spec.name)))
    for made in (TERMINATED, TRUNCATED):
        if not any(p.path == (made,) for p in out):
            out.append(LeafPlan(None, (made,)))
    paths = {p.path for p in out}
    if len(paths) != len(out):
        raise InvalidValueError(f"key_map: two source features go to one leaf ({sorted('/'.join(p.path) for p in out)})")
    for p in out:
        if any(p.path[:k] in paths for k in range(1, len(p.path))):
            raise InvalidValueError(f"key_map: leaf {'/'.join(p.path)!r} lies inside another leaf")
    if not out:
        raise FormatError(f"{source.root}: no step feature to import")
    return tuple(out)


def _space(source: RldsSource, leaves: tuple[LeafPlan, ...], scan: _Scan, fps: Any) -> DictSpace:
    tree: dict[str, Any] = {}
    for leaf in leaves:
        node = tree
        for part in leaf.path[:-1]:
            node = node.setdefault(part, {})
        node[leaf.path[-1]] = BinarySpace(()) if leaf.spec is None else \
            leaf_space(leaf.spec, fps=fps, text_length=scan.text_length.get(leaf.spec.name, 1))

    def build(node: dict[str, Any], metadata: Any = None) -> DictSpace:
        return DictSpace({k: v if isinstance(v, Space) else build(v) for k, v in node.items()}, metadata=metadata)

    return build(tree, {"rlds": {"name": source.name, "version": source.version, "split": source.split}})


def plan_import(source: RldsSource, episodes: Iterable[int] | str | None, key_map: Mapping[str, str] | None,
                fps: Any) -> ImportPlan:
    """Read every episode of the split once (framing, CRCs, protobuf, counts, boundaries, image headers,
    episode data), choose the episodes and build the step space. Nothing is decoded beyond image headers
    and nothing is kept of an episode but its record, length and episode data.

    Raises:
        FormatError: see :func:`~trajstore.interop.rlds.import_rlds`.
        InvalidValueError: a bad selection or ``key_map``.
    """
    found: list[EpisodePlan] = []
    for index, (ref, example) in enumerate(iter_episodes(source)):
        scan = _Scan({})
        steps, data = _scan_episode(example, source, scan, ref.where())
        found.append(EpisodePlan(index, ref, steps, {**data, "rlds_index": index}, scan.text_length,
                                 scan.language_varies))
    chosen = select_source_episodes([SourceEpisode(e.index, e.steps, e.data) for e in found], episodes,
                                    source=str(source.root))
    picked = tuple(found[i] for i in chosen)
    scan = _Scan({})  # text widths and a varying instruction: of the imported episodes only
    for e in picked:
        for name, n in e.text_length.items():
            scan.text_length[name] = max(scan.text_length.get(name, 1), n)
        scan.language_varies |= e.language_varies
    leaves = _leaves(source, dict(key_map or {}), scan)
    return ImportPlan(source, picked, leaves, _space(source, leaves, scan, fps))
