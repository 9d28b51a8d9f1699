"""Renames between trajstore leaves and LeRobot feature keys, checked once before anything is written.

- Export (:func:`export_keys`): ``key_map`` is ``{leaf path "a/b/c": LeRobot feature key}``; the string
  ``"policy"`` is the preset of :func:`trajstore.interop.lerobot._export_keys.policy_key_map` (the one
  low-dim observation vector -> ``observation.state``, cameras -> ``observation.images.<name>``, ``action``);
  in a mapping, the entry ``"*": "policy"`` puts that preset under the explicit entries (as ``"*"`` in a
  ``DictStorage`` map: every leaf not listed). Leaves not renamed keep their path joined by ``"."``.
- Import (:func:`import_paths`): ``key_map`` is ``{LeRobot feature key: leaf path "a/b/c"}``.

A feature key is a LeRobot name: dot-separated non-empty parts, no ``/`` or ``\\`` (it becomes a folder
name under ``videos/``), not ``*``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from trajstore.errors import InvalidValueError, UnknownLeafError
from trajstore.spaces.base import Space
from trajstore.spaces.tree import Path, leaf_paths, path_name

#: The ``key_map`` string (and the ``"*"`` entry's value) that selects LeRobot's policy names.
POLICY = "policy"


def check_feature_key(key: Any, where: str) -> str:
    """``key`` if it is a usable LeRobot feature key, else InvalidValueError naming ``where``."""
    if not isinstance(key, str) or not key or any(not p or p == "*" for p in key.split(".")) \
            or "/" in key or "\\" in key:
        raise InvalidValueError(f"{where}: LeRobot feature key {key!r} must be dot-separated non-empty parts "
                                "without '/' or '\\' (like 'observation.images.front')")
    return key


def export_keys(space: Space, key_map: Mapping[str, str] | str | None) -> dict[Path, str]:
    """The LeRobot feature key of every leaf path of ``space``.

    Raises:
        UnknownLeafError: ``key_map`` names a leaf ``space`` does not have (names it and the leaves held).
        InvalidValueError: a bad feature key, an unknown preset name, or ``key_map`` of the wrong type.
        ValueError: the policy preset cannot decide (from ``policy_key_map``: names the leaves).
    """
    paths = list(leaf_paths(space))
    keys = {p: ".".join(p) for p in paths}
    if key_map is None:
        return keys
    if isinstance(key_map, str):
        explicit, preset = {}, key_map
    elif isinstance(key_map, Mapping):
        explicit = dict(key_map)
        preset = explicit.pop("*", None)
    else:
        raise InvalidValueError(f"key_map must be a mapping {{leaf: feature key}}, {POLICY!r} or None, "
                                f"got {type(key_map).__name__}")
    if preset is not None and preset != POLICY:
        raise InvalidValueError(f"key_map preset must be {POLICY!r}, got {preset!r}")
    by_name = {path_name(p): p for p in paths}
    merged: dict[str, str] = {}
    if preset == POLICY:
        from trajstore.interop.lerobot._export_keys import policy_key_map  # lazy: the preset's own module

        merged.update(policy_key_map(space, explicit=explicit))  # explicit entries steer the preset
    merged.update(explicit)
    unknown = sorted(str(k) for k in merged if k not in by_name)
    if unknown:
        raise UnknownLeafError(f"key_map names {unknown}, not leaves of the buffer (leaves: {sorted(by_name)})")
    for name, key in merged.items():
        keys[by_name[name]] = check_feature_key(key, f"key_map entry {name!r}")
    return keys


def import_paths(feature_keys: Iterable[str], key_map: Mapping[str, str] | None) -> dict[str, tuple[str, ...]]:
    """``{feature key: leaf path}`` for the features ``key_map`` renames (``"a/b"`` -> ``("a", "b")``).

    Raises:
        InvalidValueError: ``key_map`` names a feature the dataset does not have (names it and the features
            held), or a leaf path with an empty part or ``*``.
    """
    if key_map is None:
        return {}
    if not isinstance(key_map, Mapping):
        raise InvalidValueError(f"key_map must be a mapping {{feature key: leaf path}}, got {type(key_map).__name__}")
    held = list(feature_keys)
    unknown = sorted(str(k) for k in key_map if k not in held)
    if unknown:
        raise InvalidValueError(f"key_map names {unknown}, not features of the dataset (features: {sorted(held)})")
    out = {}
    for key, leaf in key_map.items():
        parts = tuple(leaf.split("/")) if isinstance(leaf, str) else ()
        if not parts or any(not p or p == "*" for p in parts):
            raise InvalidValueError(f"key_map entry {key!r}: leaf path {leaf!r} must be '/'-separated non-empty "
                                    "names (like 'observation/state')")
        out[key] = parts
    return out
