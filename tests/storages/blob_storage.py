"""A storage with a file layout of its own, for the storage file contract's tests.

``BlobStorage`` keeps one BoxSpace leaf as raw bytes in numbered *blob* files, one per write::

    storage.json
    blobs.idx          its own index: per slot (blob id, byte offset, length) as little-endian int64,
                       replaced whole at each flush
    blobs/<n>.dat      the bytes of the rows of write n, back to back, written once

Its payload files are ``blobs/*.dat``: it says so in ``payload_files`` and ``referenced_payload``,
and reads them by byte range from the payload source it is given at open. Nothing in
:mod:`trajstore.remote` knows these names.
"""

from __future__ import annotations

import os

import numpy as np

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import BoxSpace
from trajstore.storages import STORAGE_TYPES, SpaceStorage

INDEX_FILE = "blobs.idx"
BLOB_DIR = "blobs"


def blob_name(n: int) -> str:
    return f"{BLOB_DIR}/{n}.dat"


def _read_index(path) -> np.ndarray:
    return np.frombuffer((path / INDEX_FILE).read_bytes(), "<i8").reshape(-1, 3).copy()


@STORAGE_TYPES.register("test-blobs")
class BlobStorage(SpaceStorage):
    """One BoxSpace leaf, each write's rows appended to a new ``blobs/<n>.dat``; ``blobs.idx`` maps slots."""

    requires_cache_path = True
    payload_files = ("blobs/*.dat",)
    takes_payload = True

    def __init__(self, space, **kwargs):
        super().__init__(space, **kwargs)
        self.table = np.full((self.capacity or 0, 3), -1, np.int64)  # slot -> (blob, offset, length)
        self.payload = None
        self.next_blob = 0

    @classmethod
    def check_space(cls, space):
        if not isinstance(space, BoxSpace):
            raise UnsupportedSpaceError(f"BlobStorage takes one BoxSpace, got {space!r}")

    @classmethod
    def referenced_payload(cls, path):
        return sorted({blob_name(int(b)) for b in _read_index(path)[:, 0] if b >= 0})

    @classmethod
    def _create(cls, space, *, capacity, path, config, multiprocessing, lock):
        (path / BLOB_DIR).mkdir()
        storage = cls(space, capacity=capacity, cache_path=path, multiprocessing=multiprocessing, lock=lock)
        storage.flush()
        return storage

    @classmethod
    def _open(cls, path, space, *, capacity, config, read_only, multiprocessing, lock, payload=None):
        storage = cls(space, capacity=capacity, cache_path=path, read_only=read_only, multiprocessing=multiprocessing,
                      lock=lock)
        storage.table = _read_index(path)
        storage.payload = payload
        storage.next_blob = int(storage.table[:, 0].max(initial=-1)) + 1
        return storage

    def get_config(self):
        return {}

    def __len__(self):
        return len(self.table)

    def _resize(self, length):
        grown = np.full((length, 3), -1, np.int64)
        n = min(length, len(self.table))
        grown[:n] = self.table[:n]
        self.table = grown

    def _write(self, sel, leaves):
        rows = np.ascontiguousarray(leaves[0], self.space.dtype)
        size = rows[0].nbytes if len(rows) else 0
        n = self.next_blob
        while (self.cache_path / blob_name(n)).exists():  # left by a failed write: never reuse its name
            n += 1
        with open(self.cache_path / blob_name(n), "xb") as f:
            f.write(rows.tobytes())
        self.next_blob = n + 1
        self.table[sel.slots] = np.stack([np.full(len(rows), n), np.arange(len(rows)) * size,
                                          np.full(len(rows), size)], -1)

    def _read(self, sel):
        rows = self.table[sel.slots]
        out = np.zeros((len(rows), *self.space.shape), self.space.dtype)
        written = np.flatnonzero(rows[:, 0] >= 0)
        names = [blob_name(int(b)) for b in rows[written, 0]]
        starts, stops = rows[written, 1], rows[written, 1] + rows[written, 2]
        if self.payload is not None:
            blobs = self.payload.read_ranges(names, starts.tolist(), stops.tolist())
        else:
            blobs = []
            for name, a, b in zip(names, starts.tolist(), stops.tolist()):
                with open(self.cache_path / name, "rb") as f:
                    blobs.append(os.pread(f.fileno(), b - a, a))
        for i, data in zip(written, blobs):
            out[i] = np.frombuffer(bytes(data), self.space.dtype).reshape(self.space.shape)
        return [out]

    def flush(self):
        if self.read_only:
            return
        tmp = self.cache_path / (INDEX_FILE + ".tmp")
        tmp.write_bytes(self.table.astype("<i8").tobytes())
        os.replace(tmp, self.cache_path / INDEX_FILE)

    def refresh(self):
        if self.read_only:
            self.table = _read_index(self.cache_path)
