"""Reading a storage folder's ``storage.json``: the registered type, format version, space and capacity.

The registry of storage type names and the descriptor's file name live here, so that the listing of
a folder's files (:mod:`trajstore.storages.files`) and :meth:`SpaceStorage.load_from` read a
descriptor the same way. Re-exported by :mod:`trajstore.storages.base`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trajstore._damage import damaged_file
from trajstore._fs import read_json
from trajstore._registry import Registry
from trajstore.errors import FormatError
from trajstore.spaces import Space, space_from_json
from trajstore.storages._validation import check_capacity, stored_space

#: Registry of storage type names (``"hdf5"``, ``"image"``, ``"dict"``, ...).
STORAGE_TYPES: Registry = Registry("storage")

#: Name of the descriptor file inside every storage folder.
STORAGE_FILE = "storage.json"


def storage_type(desc: Any, where: Path | str) -> type:
    """The registered class a parsed descriptor names.

    Raises:
        FormatError: the descriptor has no ``"type"`` (names ``where``).
        UnknownTypeError: the type is not registered (lists the known ones).
    """
    if not isinstance(desc, dict) or not isinstance(desc.get("type"), str):
        raise FormatError(f"{where} has no 'type' field")
    return STORAGE_TYPES.get(desc["type"])


def read_descriptor(path: Path, expected: type | None, space: Space | None,
                    capacity: Any) -> tuple[Any, Space, int | None, dict[str, Any]]:
    """``(class, space, stored capacity, descriptor)`` of the storage folder ``path``.

    ``expected``: the class the caller opens (``None``: whichever the descriptor names). ``space``,
    ``capacity``: if given (``capacity`` other than ``"stored"``), checked against the stored ones.

    Raises:
        FormatError: no/corrupt ``storage.json``, another storage type, a newer format version.
        UnknownTypeError: the recorded type is not registered.
        ValueError: ``space`` or ``capacity`` differ from the recorded ones.
    """
    with damaged_file(path / STORAGE_FILE):
        desc = read_json(path / STORAGE_FILE, "storage descriptor")
        if not isinstance(desc, dict) or "type" not in desc:
            raise FormatError(f"{path / STORAGE_FILE} has no 'type' field")
        target = STORAGE_TYPES.get(desc["type"]) if expected is None else expected
        if desc["type"] != target.type_name:
            raise FormatError(f"{path} holds a {desc['type']!r} storage, not {target.type_name!r}")
        if int(desc.get("format_version", 0)) > target.format_version:
            raise FormatError(f"{path}: format version {desc.get('format_version')} is newer than this "
                              f"trajstore reads ({target.format_version}); upgrade trajstore")
        stored = desc.get("space")
        parsed = None if space is not None and stored == space.to_json() else space_from_json(stored)
        stored_capacity = desc.get("capacity")
        if stored_capacity is not None:
            check_capacity(stored_capacity)
    the_space = stored_space(path, stored, space, parsed)
    if capacity != "stored" and check_capacity(capacity) != stored_capacity:
        raise ValueError(f"{path}: capacity {capacity!r} differs from the stored {stored_capacity!r}")
    return target, the_space, stored_capacity, desc


def reopen_read_only(type_name: str, path: str, multiprocessing: bool) -> Any:
    """The unpickling side of a storage: its folder, reopened read-only."""
    return STORAGE_TYPES.get(type_name).load_from(path, read_only=True, multiprocessing=multiprocessing)
