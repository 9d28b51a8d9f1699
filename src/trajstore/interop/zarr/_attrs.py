"""trajstore's attributes of a zarr group, read as data and checked: never passed on as keywords.

``<group>.attrs["trajstore_keys"]`` must be a list of strings, ``data/<key>.attrs["trajstore_path"]``
a string, and ``data/<key>.attrs["trajstore_layout"]`` ``"CHW"`` or ``"HWC"`` (absent: ``"HWC"``), and
``<group>.attrs["trajstore_episode_data"]`` a list of one object per episode::

    {"id": int, "data": {str: JSON value}, "interrupted": bool, "overwritten": bool}

(every member optional). A ``data`` key that ``ReplayBuffer.end_episode`` takes as a parameter
(:data:`RESERVED_DATA_KEYS`) is refused rather than passed as that parameter: no buffer can hold such
a key, so a group holding one was not written by :func:`~trajstore.interop.zarr.export_zarr`.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from trajstore.errors import FormatError, InvalidValueError

ATTR_PATH = "trajstore_path"
ATTR_SPACE = "trajstore_space"
ATTR_KEYS = "trajstore_keys"
ATTR_EPISODE_DATA = "trajstore_episode_data"
#: ``data/<key>.attrs["trajstore_layout"] = "CHW"``: the leaf's frames are channel first ``(C, H, W)``
#: in trajstore; the array holds them channel last ``(N, H, W, C)``, as Diffusion Policy reads frames.
ATTR_LAYOUT = "trajstore_layout"

#: Names of ``ReplayBuffer.end_episode``'s own parameters: not episode data keys.
RESERVED_DATA_KEYS = ("self", "final_observation", "interrupted", "flush")
#: Members of one ``trajstore_episode_data`` entry and the JSON type each must have.
_ENTRY_TYPES: dict[str, tuple[type, ...]] = {"id": (int,), "data": (dict,), "interrupted": (bool,),
                                             "overwritten": (bool,)}


def read_attrs(node: Any, what: str) -> dict[str, Any]:
    """``dict(node.attrs)``, an unreadable attribute file (bad JSON) being a :class:`FormatError` naming ``what``."""
    try:
        return dict(node.attrs)
    except Exception as exc:  # JSONDecodeError, zarr's errors for a damaged zarr.json / .zattrs
        raise FormatError(f"{what}: its attributes cannot be read ({type(exc).__name__}: {exc})") from None


def key_order(attrs: Mapping[str, Any], src: Any) -> dict[str, int]:
    """``{data key: position}`` from ``trajstore_keys`` (empty when the attribute is absent).

    Raises:
        FormatError: the attribute is not a list of strings (names ``src`` and the attribute).
    """
    keys = attrs.get(ATTR_KEYS)
    if keys is None:
        return {}
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise FormatError(f"{src}: attribute {ATTR_KEYS} must be a list of data keys (strings), got {keys!r:.200}")
    return {k: i for i, k in enumerate(keys)}


def leaf_path_attr(attrs: Mapping[str, Any], name: str) -> str | None:
    """The ``trajstore_path`` attribute of array ``name`` (``"data/img"``), or None.

    Raises:
        FormatError: the attribute is not a non-empty string (names the array and the attribute).
    """
    path = attrs.get(ATTR_PATH)
    if path is None:
        return None
    if not isinstance(path, str) or not path:
        raise FormatError(f"{name}: attribute {ATTR_PATH} must be a leaf name (a string), got {path!r:.200}")
    return path


def channel_first_attr(attrs: Mapping[str, Any], name: str) -> bool:
    """True when array ``name``'s ``trajstore_layout`` attribute is ``"CHW"`` (absent or ``"HWC"``: False).

    Raises:
        FormatError: another value (names the array and the attribute).
    """
    layout = attrs.get(ATTR_LAYOUT, "HWC")
    if layout not in ("HWC", "CHW"):
        raise FormatError(f"{name}: attribute {ATTR_LAYOUT} must be 'HWC' or 'CHW', got {layout!r:.100}")
    return layout == "CHW"


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _checked_entry(entry: Any, k: int, src: Any) -> dict[str, Any]:
    from trajstore.replay_buffer.episode_data import episode_data as json_only

    where = f"{src}: attribute {ATTR_EPISODE_DATA}[{k}]"
    if not isinstance(entry, dict):
        raise FormatError(f"{where} must be an object, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(_ENTRY_TYPES))
    if unknown:
        raise FormatError(f"{where} has the unknown member(s) {unknown} (known: {sorted(_ENTRY_TYPES)})")
    for member, types in _ENTRY_TYPES.items():
        if member in entry and not _is(entry[member], types):
            raise FormatError(f"{where}: {member!r} must be a JSON {'/'.join(t.__name__ for t in types)}, got "
                              f"{entry[member]!r:.100}")
    data = entry.get("data", {})
    reserved = sorted(set(data) & set(RESERVED_DATA_KEYS))
    if reserved:
        raise FormatError(f"{where}: data key(s) {reserved} are parameters of end_episode, not episode data "
                          "(no trajstore buffer holds them)")
    try:
        data = json_only(data)
    except InvalidValueError as exc:
        raise InvalidValueError(f"{where}: {exc}") from None
    return {"data": data, "interrupted": entry.get("interrupted", False)}


def episode_data(attrs: Mapping[str, Any], episodes: int, src: Any) -> tuple[dict[str, Any], ...] | None:
    """trajstore's per-episode data, checked: one ``{"data": dict, "interrupted": bool}`` per episode, or
    None when the group keeps none or it no longer matches the episodes (with a warning).

    Raises:
        FormatError: the attribute is not a list of objects, an entry has an unknown member, a member of
            the wrong type (``interrupted`` not a JSON bool), or a data key of :data:`RESERVED_DATA_KEYS`;
            the message names ``src``, the attribute and the entry.
        InvalidValueError: a data value that is not JSON the buffer keeps (too deep; names the key).
    """
    kept = attrs.get(ATTR_EPISODE_DATA)
    if kept is None:
        return None
    if not isinstance(kept, list):
        raise FormatError(f"{src}: attribute {ATTR_EPISODE_DATA} must be a list of objects with a 'data' object")
    checked = tuple(_checked_entry(entry, k, src) for k, entry in enumerate(kept))
    if len(checked) != episodes:
        warnings.warn(f"{src}: {ATTR_EPISODE_DATA} has {len(kept)} entries for {episodes} episodes (the group was "
                      "changed after trajstore wrote it); episode data is not imported", stacklevel=4)
        return None
    return checked
