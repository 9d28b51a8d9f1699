"""Where a storage's payload files (image chunks, video segments) are read from: given at open.

A storage folder on local disk reads its payload files itself (``os.pread``, ``av.open``): it is
opened with ``payload=None`` and that fast path is unchanged. A buffer opened from object storage
(:mod:`trajstore.remote`) is a local *mirror* folder holding every small file (metadata, indexes,
HDF5) but no payload file; its payload bytes stay in the bucket. Whoever opens such a folder hands
its storage a :class:`PayloadSource` at open (``SpaceStorage.load_from(path, payload=source)``);
a composite hands each part the source of the part's own folder (:func:`payload_under`). The
storages then ask it for byte ranges (a frame's slice of a chunk) or for a local copy of a whole
file (a video segment).

Nothing here is global: two buffers opened from two URLs (or the same folder twice) each read
through the source they were given. This module knows no URL and imports no fsspec: it is the seam
between the storages and :mod:`trajstore.remote`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence


class PayloadSource(Protocol):
    """Payload bytes of the files of one folder, by path relative to that folder."""

    def exists(self, relpath: str) -> bool:
        """Whether the snapshot holds ``relpath`` (``"chunks/000000.bin"``)."""

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


class _Under:
    """The files of ``source`` under the sub-folder ``prefix`` (ending in ``/``), by path relative to it."""

    def __init__(self, source: PayloadSource, prefix: str):
        self.source, self.prefix = source, prefix

    def exists(self, relpath: str) -> bool:
        return self.source.exists(self.prefix + relpath)

    def size(self, relpath: str) -> int:
        return self.source.size(self.prefix + relpath)

    def read_ranges(self, relpaths: Sequence[str], starts: Sequence[int], stops: Sequence[int]) -> list[bytes]:
        return self.source.read_ranges([self.prefix + p for p in relpaths], starts, stops)

    def local_copy(self, relpath: str) -> Path:
        return self.source.local_copy(self.prefix + relpath)

    def __repr__(self) -> str:
        return f"{self.source!r} under {self.prefix!r}"


def payload_under(source: PayloadSource | None, folder: str) -> PayloadSource | None:
    """The source of the sub-folder ``folder`` (``"observation.pixels"``, ``"storage/cam"``) of the folder
    ``source`` serves, or ``None`` for ``None`` (local disk)."""
    if source is None:
        return None
    prefix = folder.strip("/") + "/"
    if isinstance(source, _Under):  # one level of wrapping, however deep the folder
        return _Under(source.source, source.prefix + prefix)
    return _Under(source, prefix)
