"""Which files of a buffer or storage folder are *payload* and which are *small*, in the storages' own words.

Every storage declares its payload files (``SpaceStorage.payload_files``: globs relative to its
folder, e.g. ``chunks/*.bin`` for :class:`~trajstore.storages.ImageStorage`); every other file is
small. This module applies those declarations to a folder on disk (:func:`list_files`) or to a list
of paths whose descriptors can be read (:func:`classify`, for a published copy), reading only the
``storage.json`` descriptors and looking their type names up in the registry (nothing named in a
file is imported). A folder holding a ``storage.json`` is a storage folder; a file belongs to the
deepest storage folder above it (a :class:`~trajstore.storages.DictStorage`'s parts have folders
of their own, so each part's files follow the part's declaration); a file in no storage folder (a
buffer's ``trajstore.json``, episode log, ``stats.json``) is small.

*Payload* files are big, written once or append-only, and read by byte range or whole: a published
copy keeps them in object storage and reads them on demand. *Small* files (metadata, indexes, HDF5,
memmap data) are fetched whole when a published copy opens. :mod:`trajstore.remote` publishes and
opens from this and knows no storage's file names.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from trajstore._json import loads_bounded
from trajstore.storages._opening import STORAGE_FILE, storage_type

PAYLOAD = "payload"
SMALL = "small"


@dataclass(frozen=True)
class FolderFile:
    """One file of a folder: ``relpath`` (``/``-separated, relative to the folder listed), ``kind``
    (:data:`PAYLOAD` or :data:`SMALL`), and ``storage``, the relative path of the storage folder it
    belongs to (``""`` for the folder itself), or ``None`` for a file in no storage folder."""

    relpath: str
    kind: str
    storage: str | None


def _parent(relpath: str) -> str:
    return relpath.rsplit("/", 1)[0] if "/" in relpath else ""


def _owner(relpath: str, storage_dirs: set[str]) -> str | None:
    """The deepest storage folder holding ``relpath`` (``""``: the root), or ``None``."""
    folder = _parent(relpath)
    while True:
        if folder in storage_dirs:
            return folder
        if not folder:
            return None
        folder = _parent(folder)


def _descriptor_paths(relpaths: Iterable[str]) -> dict[str, str]:
    """``{storage folder: its descriptor's relpath}`` for every ``storage.json`` among ``relpaths``."""
    return {_parent(p): p for p in relpaths if p.rsplit("/", 1)[-1] == STORAGE_FILE}


def classify(relpaths: Iterable[str], read: Callable[[str], bytes], where: str) -> list[FolderFile]:
    """The kind of each of ``relpaths`` (``/``-separated, relative to one folder), in the order given.

    ``read(relpath)`` returns the bytes of a descriptor among them (only ``storage.json`` files are
    read); ``where`` names the folder or URL in messages.

    Raises:
        FormatError: a descriptor is not JSON or has no type (names it).
        UnknownTypeError: a descriptor names a storage type this process has not registered.
    """
    relpaths = list(relpaths)
    patterns: dict[str, tuple[str, ...]] = {}
    for folder, desc_path in _descriptor_paths(relpaths).items():
        desc = loads_bounded(read(desc_path), source=f"{where}/{desc_path} is not a storage descriptor: it")
        patterns[folder] = tuple(storage_type(desc, f"{where}/{desc_path}").payload_files)
    out = []
    for rel in relpaths:
        owner = _owner(rel, set(patterns))
        kind = SMALL
        if owner is not None:
            inner = rel[len(owner) + 1:] if owner else rel
            if any(fnmatch.fnmatchcase(inner, p) for p in patterns[owner]):
                kind = PAYLOAD
        out.append(FolderFile(rel, kind, owner))
    return out


def walk(folder: Path) -> list[str]:
    """Relative paths (``/``-separated, sorted) of every file under ``folder``."""
    out = []
    for top, _, files in os.walk(folder):
        rel_top = Path(top).relative_to(folder).as_posix()
        out.extend(name if rel_top == "." else f"{rel_top}/{name}" for name in files)
    return sorted(out)


def list_files(folder: str | os.PathLike) -> list[FolderFile]:
    """Every file under ``folder`` (a buffer folder, or one storage's folder) with its kind, sorted by path.

    Raises:
        FormatError, UnknownTypeError: as :func:`classify`.
    """
    folder = Path(folder)
    return classify(walk(folder), lambda rel: (folder / rel).read_bytes(), str(folder))


def referenced_payload(folder: str | os.PathLike) -> list[str]:
    """The payload files (relative to ``folder``) that the small files under ``folder`` point to
    (``SpaceStorage.referenced_payload`` of each storage folder found): what a copy must also hold.
    ``folder`` may hold the small files only (a publisher's copy of them).

    Raises:
        FormatError: a descriptor or an index is damaged.
        UnknownTypeError: a descriptor names a storage type this process has not registered.
    """
    folder = Path(folder)
    out = []
    for sub, desc_path in sorted(_descriptor_paths(walk(folder)).items()):
        desc = loads_bounded((folder / desc_path).read_bytes(),
                             source=f"{folder / desc_path} is not a storage descriptor: it")
        prefix = f"{sub}/" if sub else ""
        out.extend(prefix + rel for rel in storage_type(desc, folder / desc_path).referenced_payload(folder / sub))
    return out
