"""Which files of a buffer folder are *payload* and which are *small*, and where they go in a bucket.

A published buffer (``trajstore push``) is, under its URL::

    trajstore-manifest.json      the one mutable object: maps every file of the folder to its object
    objects/<sha256, 32 hex>     the files' bytes, named by their content (immutable)
    manifests/<generation>.json  copies of recent manifests (:mod:`~trajstore.remote.retention`)
    push.lock                    held by the push under way (:mod:`~trajstore.remote.push_lock`)

Which files are *payload* (big, append-only or written once, read remotely by byte range or whole:
image chunks, video segments) and which are *small* (metadata, indexes, HDF5, memmap data: a reader
downloads them all once when it opens the buffer) is the storages' word, not this package's: each
storage declares its payload files, and :func:`trajstore.storages.files.list_files` applies the
declarations to a folder. A push records each file's kind in the manifest.

Not published: the writer's lock and files a writer is still building (``*.tmp``, hidden names).
"""

from __future__ import annotations

from pathlib import Path

from trajstore._lock import LOCK_FILE
from trajstore._urls import MANIFEST_NAME
from trajstore.storages.files import PAYLOAD, SMALL, list_files

__all__ = ["MANIFEST", "OBJECTS", "PAYLOAD", "SMALL", "is_published", "folder_files", "object_key", "check_relpath"]

MANIFEST = MANIFEST_NAME
OBJECTS = "objects"


def is_published(relpath: str) -> bool:
    """False for the writer's lock and for temporary files (``*.tmp``, ``*.partial``, hidden names, files
    in hidden folders)."""
    parts = relpath.split("/")
    name = parts[-1]
    return (name != LOCK_FILE and not any(p.startswith(".") for p in parts)
            and not name.endswith((".tmp", ".partial")))


def folder_files(folder: Path) -> dict[str, str]:
    """``{relative path: kind}`` (``/``-separated, sorted; kind :data:`PAYLOAD` or :data:`SMALL`, as the
    folder's storages declare) of the published files under ``folder``.

    Raises:
        FormatError, UnknownTypeError: a damaged storage descriptor, or one naming an unregistered type.
    """
    return {f.relpath: f.kind for f in list_files(folder) if is_published(f.relpath)}


def object_key(sha256_hex: str) -> str:
    """``objects/<first 32 hex digits of the SHA-256>``: 128 bits, so two different files never meet."""
    return f"{OBJECTS}/{sha256_hex[:32]}"


def check_relpath(relpath: str, where: str) -> str:
    """A manifest's file path, checked before it becomes a local path: relative, no ``..``, no ``\\``.

    Raises:
        FormatError: names ``where`` (the manifest) and the path.
    """
    from trajstore.errors import FormatError

    parts = relpath.split("/")
    if (not relpath or relpath.startswith("/") or "\\" in relpath or "\0" in relpath
            or any(p in ("", ".", "..") for p in parts)):
        raise FormatError(f"{where} names an unsafe file path {relpath!r}")
    return relpath
