"""Names on both sides of a robomimic file: a *source key* is a dataset's path inside ``data/demo_N``
(``"obs/agentview_image"``, ``"actions"``, ``"datagen_info/eef_pose"``), a *leaf path* is the trajstore
step space's (``"observation/agentview_image"``, ``"action"``).

Default mapping, both ways: ``obs/<k>`` <-> ``observation/<k>``, ``actions`` <-> ``action``, ``rewards`` <->
``reward``, ``dones`` <-> ``done``, ``states`` <-> ``state``; any other dataset keeps its path. On export a
nested observation leaf ``observation/images/front`` becomes ``obs/images_front`` (robomimic's obs keys are
flat names).

A leaf that an import named otherwise than the default (``key_map``, or a nested ``obs/a/b``) keeps its
source key in its metadata, :data:`KEY_METADATA` (``{"robomimic_key": "obs/agentview_image"}``), where an
export finds it again when no ``key_map`` entry names that leaf.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from trajstore.errors import InvalidValueError

#: Source datasets with a trajstore name of their own (robomimic's plural names -> the step space's).
RENAMED = {"actions": "action", "rewards": "reward", "dones": "done", "states": "state"}
#: The reverse of :data:`RENAMED`.
EXPORTED = {v: k for k, v in RENAMED.items()}
OBS, NEXT_OBS, OBSERVATION = "obs", "next_obs", "observation"
#: The leaf metadata key holding the source key an import read the leaf from (when not the default).
KEY_METADATA = "robomimic_key"


def default_leaf(key: str) -> str:
    """The leaf path of source key ``key`` (see the module docstring)."""
    if key.startswith(OBS + "/"):
        return OBSERVATION + key[len(OBS):]
    return RENAMED.get(key, key)


def default_export_key(path: tuple[str, ...]) -> str:
    """The source key a leaf at ``path`` is written to (see the module docstring)."""
    if path[0] == OBSERVATION:
        return f"{OBS}/{'_'.join(path[1:]) or OBSERVATION}"
    return EXPORTED.get("/".join(path), "/".join(path))


def check_name(name: str, what: str) -> tuple[str, ...]:
    """``name`` split at ``/`` after checking each part can name an HDF5 object and a space key (not
    empty, not ``.`` or ``..``, no NUL, no leading ``/``).

    Raises:
        InvalidValueError: names ``what`` and the problem.
    """
    if not isinstance(name, str) or not name:
        raise InvalidValueError(f"{what}: {name!r} is not a non-empty name")
    parts = tuple(name.split("/"))
    if any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise InvalidValueError(f"{what}: {name!r} is not a path of names joined by '/' (no empty part, '.', "
                                "'..' or NUL)")
    return parts


def import_leaves(keys: Iterable[str], key_map: Mapping[str, str] | None, source: str) -> dict[str, str]:
    """``{source key: leaf path}`` for every source key, ``key_map`` applied over the defaults.

    Raises:
        InvalidValueError: ``key_map`` names a key the source does not hold (lists the ones held), maps to a
            bad path, maps an ``obs/`` key outside ``observation/`` or another key inside it (the final
            observation is the ``observation`` subtree), or two keys land on one leaf, or one leaf inside
            another.
    """
    keys = list(keys)
    given = dict(key_map or {})
    unknown = sorted(set(given) - set(keys))
    if unknown:
        raise InvalidValueError(f"{source}: key_map names {unknown}, which the demos do not hold (their keys: "
                                f"{keys})")
    out: dict[str, str] = {}
    for key in keys:
        leaf = given.get(key) or default_leaf(key)
        parts = check_name(leaf, f"{source}: the leaf for {key!r}")
        inside = parts[0] == OBSERVATION and len(parts) > 1
        if key.startswith(OBS + "/") != inside:
            raise InvalidValueError(
                f"{source}: {key!r} -> {leaf!r}: obs/ keys must become leaves under 'observation/' and other keys "
                "leaves outside it (the final observation, from next_obs, is the 'observation' subtree)")
        out[key] = "/".join(parts)
    _check_distinct(out, source)
    return out


def _check_distinct(mapping: Mapping[str, str], source: str) -> None:
    by_leaf: dict[str, str] = {}
    for key, leaf in mapping.items():
        if leaf in by_leaf:
            raise InvalidValueError(f"{source}: {by_leaf[leaf]!r} and {key!r} both become the leaf {leaf!r}; "
                                    "rename one with key_map (--key)")
        by_leaf[leaf] = key
    for leaf, key in by_leaf.items():
        for other, other_key in by_leaf.items():
            if other.startswith(leaf + "/"):
                raise InvalidValueError(f"{source}: the leaf {leaf!r} (from {key!r}) would hold the leaf {other!r} "
                                        f"(from {other_key!r}); rename one with key_map (--key)")
