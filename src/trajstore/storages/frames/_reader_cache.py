"""``ReaderCache``: the segment tables (:class:`~trajstore.storages.frames._segment_reader.SegmentIndex`)
of a :class:`~trajstore.storages.frames.video.VideoStorage`, by file id.

A table is a few KB (three int64 per frame) and holds no open file or decoder, so many are
kept (``size``, least recently used dropped first) and threads share them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Protocol


class Reader(Protocol):
    def close(self) -> None: ...


class ReaderCache:
    """Segment tables by file id, least recently used dropped first. Thread-safe.

    Args:
        open_reader: reads the table of a file id (raises ``FileNotFoundError`` for a deleted file).
        size: tables kept at most.
    """

    def __init__(self, open_reader: Callable[[int], Reader], size: int):
        self._open = open_reader
        self._size = size
        self._readers: OrderedDict[int, Reader] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, file_id: int) -> Reader:
        """The table of ``file_id``, read on first use (two threads may both read it: one is kept)."""
        with self._lock:
            reader = self._readers.get(file_id)
            if reader is not None:
                self._readers.move_to_end(file_id)
                return reader
        reader = self._open(file_id)
        closing = []
        with self._lock:
            self._readers[file_id] = reader
            while len(self._readers) > self._size:
                closing.append(self._readers.popitem(last=False)[1])
        for r in closing:
            r.close()
        return reader

    def file_ids(self) -> list[int]:
        with self._lock:
            return list(self._readers)

    def drop(self, file_id: int) -> None:
        """Forget the table of ``file_id`` (before its file is deleted)."""
        with self._lock:
            reader = self._readers.pop(file_id, None)
        if reader is not None:
            reader.close()

    def clear(self) -> None:
        for file_id in self.file_ids():
            self.drop(file_id)
