"""``ReaderCache``: open segment readers of a :class:`~trajstore.storages.frames.video.VideoStorage`, by file id."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Protocol


class Reader(Protocol):
    def close(self) -> None: ...


class ReaderCache:
    """Open readers (:class:`~trajstore.storages.frames._video_codec.SegmentReader`) by file id, least
    recently used closed first.

    A reader is used by one thread at a time: :meth:`checkout` takes it out of the cache
    (opening one if needed) and :meth:`checkin` puts it back.

    Args:
        open_reader: opens the reader of a file id (raises ``FileNotFoundError`` for a deleted file).
        size: readers kept open at most.
    """

    def __init__(self, open_reader: Callable[[int], Reader], size: int):
        self._open = open_reader
        self._size = size
        self._readers: OrderedDict[int, Reader] = OrderedDict()
        self._lock = threading.Lock()

    def checkout(self, file_id: int) -> Reader:
        with self._lock:
            reader = self._readers.pop(file_id, None)
        return reader if reader is not None else self._open(file_id)

    def checkin(self, file_id: int, reader: Reader) -> None:
        closing = []
        with self._lock:
            if file_id in self._readers:  # another thread opened it too: keep one
                closing.append(self._readers.pop(file_id))
            self._readers[file_id] = reader
            while len(self._readers) > self._size:
                closing.append(self._readers.popitem(last=False)[1])
        for r in closing:
            r.close()

    def file_ids(self) -> list[int]:
        with self._lock:
            return list(self._readers)

    def drop(self, file_id: int) -> None:
        """Close the cached reader of ``file_id`` (before its file is deleted)."""
        with self._lock:
            reader = self._readers.pop(file_id, None)
        if reader is not None:
            reader.close()

    def clear(self) -> None:
        for file_id in self.file_ids():
            self.drop(file_id)
