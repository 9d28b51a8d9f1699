"""Where a storage's payload files (image chunks, video segments) are read from.

A storage folder on local disk reads its payload files itself (``os.pread``, ``av.open``), and
that fast path is unchanged: :func:`payload_source_for` returns ``None`` for it. A buffer opened
from object storage (:mod:`trajstore.remote`) is a local *mirror* folder holding every small file
(metadata, indexes, HDF5) but no payload file; its payload bytes stay in the bucket. The mirror
registers a :class:`PayloadSource` for its root folder here, and the image and video storages
opened inside that folder ask it for byte ranges (a frame's slice of a chunk) or for a local copy
of a whole file (a video segment).

This module knows no URL and imports no fsspec: it is the seam between the storages and
:mod:`trajstore.remote`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol, Sequence


class PayloadSource(Protocol):
    """Payload bytes of the files of one mirror folder, by path relative to that folder."""

    def exists(self, relpath: str) -> bool:
        """Whether the snapshot holds ``relpath`` (``"storage/cam/chunks/000000.bin"``)."""

    def size(self, relpath: str) -> int:
        """Bytes of ``relpath`` in the snapshot.

        Raises:
            FileNotFoundError: the snapshot has no such file.
        """

    def read_ranges(self, relpaths: Sequence[str], starts: Sequence[int], stops: Sequence[int]) -> list[bytes]:
        """Bytes ``[start, stop)`` of each file, in order; adjacent or close ranges of one file may be
        fetched together, and requests run concurrently.

        Raises:
            FormatError: a range lies past the end of its file, or the object is gone from the store.
        """

    def local_copy(self, relpath: str) -> Path:
        """A local file holding the whole of ``relpath`` (fetched on first use, kept in a bounded cache)."""


_SOURCES: dict[Path, PayloadSource] = {}
_LOCK = threading.Lock()


def register(root: Path, source: PayloadSource) -> None:
    """Serve the payload files of the folder ``root`` (and its sub-folders) from ``source``."""
    with _LOCK:
        _SOURCES[Path(root).resolve()] = source


def unregister(root: Path, source: PayloadSource) -> None:
    """Stop serving ``root`` from ``source`` (a later registration of another source stays)."""
    with _LOCK:
        key = Path(root).resolve()
        if _SOURCES.get(key) is source:
            del _SOURCES[key]


def payload_source_for(folder: Path | None) -> tuple[PayloadSource, str] | None:
    """``(source, prefix)`` for a storage folder inside a registered mirror (``prefix`` is the folder
    relative to the mirror root, with a trailing ``/``), or ``None`` for an ordinary local folder."""
    if folder is None or not _SOURCES:
        return None
    folder = Path(folder).resolve()
    with _LOCK:
        for root in (folder, *folder.parents):
            source = _SOURCES.get(root)
            if source is not None:
                rel = folder.relative_to(root).as_posix()
                return source, "" if rel == "." else rel + "/"
    return None
