"""``MemmapStorage``: one fixed-shape numeric leaf as a raw little-endian array file.

``data.bin`` holds ``len`` rows of ``space.shape`` and ``space.dtype`` back to back, C
order, no header (shape and dtype are in ``storage.json``). Reads are one NumPy gather on
a memory map; writes go through the same map. Unbounded storages grow the file to the
exact row count, so the row count is ``file size / row stride`` after a reopen.

The row stride is the row's bytes, or 1 for a zero-element leaf (shape ``(0,)``, ``(3, 0)``):
such rows hold no data, so the file carries one zero byte per row, which is all that tells how
many there are after a reopen.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._lock import WriterLock
from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import BinarySpace, BoxSpace, Space
from trajstore.storages._selection import Selection
from trajstore.storages.base import STORAGE_TYPES, SpaceStorage

DATA_FILE = "data.bin"


@STORAGE_TYPES.register("memmap")
class MemmapStorage(SpaceStorage):
    """Uncompressed slots of one :class:`BoxSpace` or :class:`BinarySpace` leaf.

    In memory (``cache_path=None``) it is a NumPy array that doubles when it grows.
    """

    def __init__(self, space: Space, **kwargs: Any):
        super().__init__(space, **kwargs)
        self._dtype = np.dtype(space.dtype).newbyteorder("<")
        self._row_bytes = int(np.prod(space.shape, dtype=np.int64)) * self._dtype.itemsize
        #: Bytes per row in ``data.bin``: at least 1, so the file size carries the row count.
        self._row_stride = max(1, self._row_bytes)
        self._array: np.ndarray | None = None  # memory map or in-memory array (may be longer than _length)
        self._length = 0

    @classmethod
    def check_space(cls, space: Space) -> None:
        if not isinstance(space, (BoxSpace, BinarySpace)):
            raise UnsupportedSpaceError(f"MemmapStorage takes one BoxSpace or BinarySpace leaf, got {space!r}")

    @classmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, config: dict[str, Any],
                multiprocessing: bool, lock: WriterLock | None) -> "MemmapStorage":
        storage = cls(space, capacity=capacity, cache_path=path, multiprocessing=multiprocessing, lock=lock)
        if path is None:
            storage._array = np.zeros((capacity or 16, *space.shape), storage._dtype)
            storage._length = capacity or 0
        else:
            with open(path / DATA_FILE, "wb") as f:
                f.truncate((capacity or 0) * storage._row_stride)
            storage._map(capacity or 0)
        return storage

    @classmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: dict[str, Any], read_only: bool,
              multiprocessing: bool, lock: WriterLock | None) -> "MemmapStorage":
        storage = cls(space, capacity=capacity, cache_path=path, read_only=read_only, multiprocessing=multiprocessing,
                      lock=lock)
        storage.refresh()
        return storage

    def get_config(self) -> dict[str, Any]:
        return {}

    def _file_rows(self) -> int:
        size = os.path.getsize(self.cache_path / DATA_FILE)  # type: ignore[operator]
        return size // self._row_stride

    def _map(self, rows: int) -> None:
        self._length = rows
        if rows == 0 or self._row_bytes == 0:
            self._array = np.zeros((rows, *self.space.shape), self._dtype)
            return
        mode = "r" if self.read_only else "r+"
        self._array = np.memmap(self.cache_path / DATA_FILE, dtype=self._dtype, mode=mode,  # type: ignore[operator]
                                shape=(rows, *self.space.shape))

    def __len__(self) -> int:
        return self._length

    def _read(self, sel: Selection) -> list[np.ndarray]:
        slots = sel.slots
        if len(slots) and int(slots[-1]) - int(slots[0]) + 1 == len(slots):  # one run: a slice copy, no gather
            rows = np.array(self._array[int(slots[0]):int(slots[-1]) + 1], dtype=self.space.dtype)  # type: ignore
        else:  # a gather is a copy already (no second one; not sel.runs, which walks every run in Python)
            rows = np.asarray(self._array[slots]).view(np.ndarray).astype(self.space.dtype, copy=False)  # type: ignore
        return [rows]

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        if len(sel.runs) > 2:  # scattered slots: one NumPy scatter
            self._array[sel.slots] = leaves[0]  # type: ignore[index]
            return
        for row, first, n in sel.runs:  # a ring write is at most two runs
            self._array[first:first + n] = leaves[0][row:row + n]  # type: ignore[index]

    def _resize(self, length: int) -> None:
        if self.cache_path is None:
            if length > len(self._array):  # type: ignore[arg-type]
                grown = np.zeros((max(length, 2 * len(self._array)), *self.space.shape), self._dtype)  # type: ignore
                grown[: self._length] = self._array[: self._length]  # type: ignore[index]
                self._array = grown
            self._length = length
            return
        self._release()
        with open(self.cache_path / DATA_FILE, "r+b") as f:
            f.truncate(length * self._row_stride)
        self._map(length)

    def flush(self) -> None:
        if isinstance(self._array, np.memmap) and not self.read_only:
            self._array.flush()  # msync: the pages reach the file

    def refresh(self) -> None:
        """See rows another process appended; raises FormatError if ``data.bin`` is shorter than the capacity."""
        if self.cache_path is not None:
            rows = self.capacity if self.capacity is not None else self._file_rows()
            if self.capacity is not None and self._file_rows() < self.capacity:
                raise FormatError(f"{self.cache_path / DATA_FILE} is truncated: {self._file_rows()} rows of "
                                  f"{self._row_stride} bytes, expected {self.capacity}")
            if self._array is None or rows != self._length:
                self._release()
                self._map(rows)

    def _release(self) -> None:
        if isinstance(self._array, np.memmap):
            self._array.flush() if not self.read_only else None
            del self._array
        self._array = None

    def _close(self) -> None:
        self._release()

    def _after_fork(self) -> None:
        if self.cache_path is not None:  # a private read-only map for this process
            self._array = None
            self._map(self._length)
