"""URLs: telling a local folder from object storage (no fsspec here; reaching a bucket is
:mod:`trajstore.remote.location`). Used by every layer that takes a path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trajstore.errors import ReadOnlyError

LOCAL_PROTOCOLS = ("file", "local")
#: The manifest of a published buffer (trajstore.remote.layout).
MANIFEST_NAME = "trajstore-manifest.json"


def protocol_of(location: str | os.PathLike) -> str | None:
    """The URL scheme of ``location`` (``"s3"``, ``"gs"``, ``"file"``, ...), or ``None`` for a plain path."""
    if not isinstance(location, str) or "://" not in location:
        return None
    return location.split("://", 1)[0].lower()


def is_remote(location: str | os.PathLike) -> bool:
    """True for a URL of a non-local fsspec file system (``s3://``, ``gs://``, ``memory://``, ...)."""
    protocol = protocol_of(location)
    return protocol is not None and protocol not in LOCAL_PROTOCOLS


def local_path(location: str | os.PathLike) -> str | os.PathLike:
    """``file:///x`` -> ``/x``; any other location as it is."""
    protocol = protocol_of(location)
    if protocol in LOCAL_PROTOCOLS:
        return str(location).split("://", 1)[1]
    return location


def is_published_folder(location: str | os.PathLike) -> bool:
    """True for a local folder that holds a pushed copy (``trajstore push FOLDER /local/path``): a
    manifest and no ``trajstore.json``."""
    folder = Path(location)
    return (folder / MANIFEST_NAME).is_file() and not (folder / "trajstore.json").exists()


def refuse_remote_write(location: Any, what: str) -> None:
    """Raise before anything is made when a writer is pointed at object storage.

    Raises:
        ReadOnlyError: names the URL and says how to publish instead.
    """
    if location is not None and is_remote(location):
        raise ReadOnlyError(f"{location}: {what} writes to a local folder only; buffers in object storage are "
                            "read-only. Record into a local folder and publish it with `trajstore push "
                            f"FOLDER {location}` (trajstore.remote.push)")
