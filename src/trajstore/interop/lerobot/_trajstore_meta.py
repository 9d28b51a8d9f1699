"""The ``"trajstore"`` entry of a LeRobot export's ``meta/info.json``: what the LeRobot format has no place
for, so that an import gives the buffer back. LeRobot 0.4.4 loads an info.json with this top-level entry
and ignores it (checked by ``interop/lerobot_check.py``). Version :data:`VERSION`::

    "trajstore": {
        "version": 1,
        "features": {                                 # one per exported feature key
            "observation.state": {
                "leaf": ["observation", "state"],     # the leaf path in the step space
                "shape": [4],                         # the leaf's own shape ([] for a scalar; LeRobot says [1])
                "metadata": {"names": [...]},         # the leaf's metadata (JSON)
                "space": {"type": "box", ...}         # the leaf's space, Space.to_json() (bounds, dtype)
            }, ...
        },
        "episode_data": {                             # data key -> its meta/episodes column (_episode_data)
            "success": {"column": "episode_data/success", "encoding": "bool"}, ...
        },
        "interrupted": [2],                           # episode_index of episodes that were interrupted
        "final_observations": "meta/trajstore/final_observations.parquet"   # or null: none
    }

Reading checks every field (:func:`read_entry`) and raises FormatError naming info.json and the field;
an entry of another version is refused, so that a newer layout is never half understood.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from trajstore.errors import FormatError
from trajstore.interop.lerobot._episode_data import ENCODINGS, PREFIX, DataColumn
from trajstore.storages._names import check_key

#: The info.json key.
ENTRY = "trajstore"
#: The entry's layout version.
VERSION = 1
#: Data keys an episode may not have (``end_episode``'s own parameters).
RESERVED_DATA_KEYS = frozenset({"final_observation", "interrupted", "flush"})


@dataclass(frozen=True)
class LeafEntry:
    """What the entry keeps of one feature's leaf: ``path``, ``shape``, ``metadata``, ``space`` (JSON)."""

    path: tuple[str, ...]
    shape: tuple[int, ...]
    metadata: dict[str, Any]
    space: dict[str, Any] | None = None


@dataclass(frozen=True)
class TrajstoreEntry:
    """A checked ``"trajstore"`` entry (see the module docstring)."""

    features: dict[str, LeafEntry]
    episode_data: tuple[DataColumn, ...] = ()
    interrupted: frozenset[int] = frozenset()
    final_observations: str | None = None
    version: int = VERSION


def build_entry(features: Sequence[Any], space_of: Any, columns: Sequence[DataColumn], interrupted: Sequence[int],
                final_observations: str | None) -> dict[str, Any]:
    """The JSON entry for the export's ``features`` (``space_of(path)`` gives each leaf's space)."""
    out: dict[str, Any] = {}
    for f in features:
        leaf = space_of(f.path)
        out[f.key] = {"leaf": list(f.path), "shape": list(leaf.shape), "metadata": leaf.metadata.to_json(),
                      "space": leaf.to_json()}
    return {"version": VERSION, "features": out, "episode_data": {c.key: c.to_json() for c in columns},
            "interrupted": list(interrupted), "final_observations": final_observations}


def _fail(info_path: Path, what: str) -> FormatError:
    return FormatError(f"{info_path}: entry {ENTRY!r}: {what}")


def _leaf_part_ok(part: Any) -> bool:
    """A name one level of a leaf path may have: what a ``DictSpace`` key nested at ``/`` and a storage
    key part may be (:func:`trajstore.storages._names.check_key`): non-empty, no ``/``, not ``.``/``..``
    (nor ``*``, which names every leaf not listed)."""
    if not isinstance(part, str) or "/" in part or part == "*":
        return False
    try:
        check_key(part, "/")
    except ValueError:
        return False
    return True


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_entry(info: dict, info_path: Path) -> TrajstoreEntry | None:
    """The checked entry of ``info`` (a loaded info.json), or None when it has none (LeRobot wrote it).

    Raises:
        FormatError: a field of the wrong type, a version other than :data:`VERSION`, an unknown encoding,
            a reserved or empty data key, a data column not named ``episode_data/...`` or named twice, a
            leaf name that is empty, has a ``/`` or is ``.``/``..``, a negative interrupted index (names
            info.json and the field). Indices and keys that must match the dataset are checked by
            :func:`~trajstore.interop.lerobot._source.read_source`.
    """
    raw = info.get(ENTRY)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _fail(info_path, "must be an object")
    if raw.get("version") != VERSION:
        raise _fail(info_path, f"version {raw.get('version')!r} is not supported (this trajstore reads {VERSION})")
    features = raw.get("features")
    if not isinstance(features, dict):
        raise _fail(info_path, "features must be an object")
    leaves = {}
    for key, spec in features.items():
        where = f"features[{key!r}]"
        if not isinstance(spec, dict):
            raise _fail(info_path, f"{where} must be an object")
        path, shape, meta, space = spec.get("leaf"), spec.get("shape"), spec.get("metadata", {}), spec.get("space")
        if not (isinstance(path, list) and path and all(_leaf_part_ok(p) for p in path)):
            raise _fail(info_path, f"{where}.leaf must be a list of leaf names (non-empty, no '/', not '.', '..' "
                                   f"or '*'), got {path!r:.80}")
        if not (isinstance(shape, list) and all(_is_int(s) and s >= 0 for s in shape)):
            raise _fail(info_path, f"{where}.shape must be a list of sizes, got {shape!r:.80}")
        if not isinstance(meta, dict) or (space is not None and not isinstance(space, dict)):
            raise _fail(info_path, f"{where}.metadata and .space must be objects")
        try:
            json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise _fail(info_path, f"{where}.metadata is not JSON ({exc})") from None
        leaves[key] = LeafEntry(tuple(path), tuple(shape), meta, space)
    columns = []
    data = raw.get("episode_data", {})
    if not isinstance(data, dict):
        raise _fail(info_path, "episode_data must be an object")
    column_of: dict[str, str] = {}
    for key, spec in data.items():
        if not key:
            raise _fail(info_path, "episode_data has an empty key; data keys are non-empty names")
        if key in RESERVED_DATA_KEYS:
            raise _fail(info_path, f"episode_data key {key!r} is a parameter of end_episode, not data")
        if not (isinstance(spec, dict) and isinstance(spec.get("column"), str) and spec.get("encoding") in ENCODINGS):
            raise _fail(info_path, f"episode_data[{key!r}] must be {{'column': str, 'encoding': one of "
                                   f"{list(ENCODINGS)}}}, got {spec!r:.80}")
        column = spec["column"]
        if not column.startswith(PREFIX) or column == PREFIX:
            raise _fail(info_path, f"episode_data[{key!r}].column {column!r:.80} is not an {PREFIX!r} column "
                                   "(the other columns of meta/episodes are LeRobot's)")
        if column in column_of:
            raise _fail(info_path, f"episode_data[{key!r}] and episode_data[{column_of[column]!r}] both name "
                                   f"column {column!r:.80}")
        column_of[column] = key
        columns.append(DataColumn(key, column, spec["encoding"]))
    interrupted = raw.get("interrupted", [])
    if not (isinstance(interrupted, list) and all(_is_int(i) and i >= 0 for i in interrupted)):
        raise _fail(info_path, f"interrupted must be a list of episode indices (integers >= 0), got {interrupted!r:.80}")
    finals = raw.get("final_observations")
    if finals is not None and not isinstance(finals, str):
        raise _fail(info_path, f"final_observations must be a path or null, got {finals!r:.80}")
    return TrajstoreEntry(leaves, tuple(columns), frozenset(interrupted), finals)
