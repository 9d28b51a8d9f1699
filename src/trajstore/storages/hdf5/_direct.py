"""Rows of uncompressed ``data.h5`` datasets read straight from the file's bytes, without HDF5 per read.

HDF5 costs 20-80 us per call and ~20 us per chunk a selection touches: 256 random rows of a
(4,) float32 leaf over 1M rows (245 chunks) took 4.7-6.8 ms by any h5py read (index list, covering
slice, point selection, hyperslab union; h5py 3.16, HDF5 2.0, file in the page cache), where TorchRL's
memory-mapped storage takes well under 1 ms for a whole batch (benchmarks/rl_sampling.py). An
uncompressed chunk is a plain run of ``chunk_rows * row_bytes`` bytes at a fixed place in the file:
:class:`DirectRows` keeps each dataset's chunk addresses (asked of HDF5 once per chunk: ``chunk_iter``
at first use, then ``get_chunk_info_by_coord`` for a chunk not seen yet) and gathers the wanted rows
from a read-only memory map of the file in one NumPy call (30 us for those 256 rows).

Why the bytes in the file are the rows HDF5 would return:

- uncompressed chunks are read and written in place, with no chunk cache (``rdcc_nbytes=0``,
  :mod:`~trajstore.storages.hdf5._layout`): every write of the writer is in the file (the page cache)
  when it returns, and a chunk never moves once allocated (SWMR never reuses the space of an
  uncompressed chunk; only compressed files are compacted, and those are read through HDF5);
- a chunk HDF5 has not allocated reads as zeros (the fill value of every dataset trajstore makes);
  it is asked for again at the next read, since a writer may have allocated it meanwhile;
- shrinking a dataset (``_resize`` after a failed write) may free chunks past the new end: their
  addresses are forgotten (:meth:`DirectRows.forget_from`);
- a file replaced under a reader (crash recovery) or reopened (fork, a joined writer's close) gets
  a new :class:`DirectRows` (the storage makes one in ``_attach``).

Races with a writer are the replay buffer's to detect, as for any read (its view's staleness check).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import h5py
import numpy as np
from numpy.lib.stride_tricks import as_strided

from trajstore.errors import FormatError


class _Leaf:
    __slots__ = ("ds", "chunk_rows", "row_bytes", "dtype", "shape", "offsets")

    def __init__(self, ds: h5py.Dataset, row_bytes: int):
        self.ds, self.row_bytes = ds, row_bytes
        self.chunk_rows = int(ds.chunks[0])
        self.dtype, self.shape = ds.dtype, tuple(ds.shape[1:])
        self.offsets = np.full(0, -1, np.int64)  # file offset of each chunk, -1: not allocated (or not asked)


def direct_ok(ds: h5py.Dataset, compressed: object) -> bool:
    """Whether ``ds`` can be read by :class:`DirectRows`: uncompressed, unfiltered, numeric, chunked
    along rows only (every trailing axis whole in each chunk)."""
    # any filter (scaleoffset, nbit, a plugin) changes the bytes: h5py's compression/shuffle do not name them all
    return (not compressed and ds.chunks is not None and not ds.compression and not ds.shuffle
            and ds.id.get_create_plist().get_nfilters() == 0
            and ds.dtype.kind in "biuf" and tuple(ds.chunks[1:]) == tuple(max(d, 1) for d in ds.shape[1:])
            and all(d > 0 for d in ds.shape[1:]))


class DirectRows:
    """Direct reads of some datasets of the file at ``path`` (see the module docstring)."""

    def __init__(self, path: Path, datasets: dict[int, tuple[h5py.Dataset, int]]):
        self._path = path
        self._leaves = {i: _Leaf(ds, rb) for i, (ds, rb) in datasets.items()}
        self._map: np.ndarray | None = None
        self._fd: int | None = None  # the mapped file, kept open to check its size before each gather
        self._rows: dict[int, np.ndarray] = {}  # row views of the map, by row bytes
        self._scanned = False

    def handles(self, i: int) -> bool:
        return i in self._leaves

    def forget_from(self, length: int) -> None:
        """Forget the chunk addresses from the one holding row ``length`` on (the datasets shrank)."""
        for leaf in self._leaves.values():
            leaf.offsets[length // leaf.chunk_rows:] = -1

    def _scan(self) -> None:
        """Every allocated chunk's address, once: one pass of HDF5's chunk index per dataset."""
        self._scanned = True
        for leaf in self._leaves.values():
            found: list[tuple[int, int]] = []
            leaf.ds.id.chunk_iter(lambda info, out=found: out.append((info.chunk_offset[0], info.byte_offset)))
            n = -(-leaf.ds.shape[0] // leaf.chunk_rows)
            offsets = np.full(max(n, len(leaf.offsets)), -1, np.int64)
            for row, at in found:
                if row // leaf.chunk_rows < len(offsets):
                    offsets[row // leaf.chunk_rows] = at
            leaf.offsets = offsets

    def _chunk_offsets(self, leaf: _Leaf, chunks: np.ndarray) -> np.ndarray:
        """File offsets of ``chunks`` (int64, sorted), asking HDF5 for those not known yet."""
        need = int(chunks[-1]) + 1
        if need > len(leaf.offsets):
            leaf.offsets = np.concatenate([leaf.offsets, np.full(need - len(leaf.offsets), -1, np.int64)])
        offsets = leaf.offsets[chunks]
        missing = offsets < 0
        if missing.any():
            zeros = (0,) * len(leaf.shape)
            for c in np.unique(chunks[missing]).tolist():
                info = leaf.ds.id.get_chunk_info_by_coord((c * leaf.chunk_rows, *zeros))
                if info.byte_offset is not None:
                    leaf.offsets[c] = info.byte_offset
            offsets = leaf.offsets[chunks]
        return offsets

    def _file_map(self, end: int) -> np.ndarray:
        """A read-only map of the file covering byte ``end`` (mapped again when the file grew).

        Raises:
            FormatError: the file is now shorter than ``end`` or than the map (truncated under the reader:
                touching a mapped page past the end of the file would kill the process with SIGBUS).
        """
        if self._map is not None and len(self._map) >= end:
            # the mapped file itself (not the path: a replaced file gets a new DirectRows); ~1 us
            size = os.fstat(self._fd).st_size
            if size < len(self._map):
                raise FormatError(f"{self._path}: {size} bytes, shorter than the {len(self._map)} it held "
                                  "(truncated under the reader)")
            return self._map
        self._map, self._rows = None, {}
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self._path, os.O_RDONLY)
        size = os.fstat(self._fd).st_size
        if size < end:
            raise FormatError(f"{self._path}: {size} bytes, shorter than the chunk data at byte {end}")
        self._map = np.frombuffer(mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ), np.uint8)  # no np.memmap overhead
        return self._map

    def close(self) -> None:
        """Drop the map and its file descriptor (arrays already returned are copies)."""
        self._map, self._rows = None, {}
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def read_checked(self, i: int, slots: np.ndarray, name: str) -> np.ndarray:
        """:meth:`read`, any error of it (a short file, a bad chunk index) raised as a ``FormatError`` naming
        the file and dataset ``name`` (what ``damaged_file`` does, without a context manager per leaf)."""
        try:
            return self.read(i, slots)
        except Exception as exc:  # noqa: BLE001 - a damaged file may make any step fail
            raise FormatError(f"{self._path}: dataset {name!r}: damaged or unreadable "
                              f"({type(exc).__name__}: {exc})") from exc

    def read(self, i: int, slots: np.ndarray) -> np.ndarray:
        """Rows ``slots`` (sorted int64, in range) of dataset ``i``, shape ``(M, *shape)``, the dataset's dtype."""
        if not self._scanned:
            self._scan()
        leaf = self._leaves[i]
        m, rb, per = len(slots), leaf.row_bytes, leaf.chunk_rows
        if m == 0:
            return np.zeros((0, *leaf.shape), leaf.dtype)
        chunks = slots // per
        if int(chunks[-1]) < len(leaf.offsets):
            starts = leaf.offsets[chunks]
            if int(starts.min()) < 0:
                starts = self._chunk_offsets(leaf, chunks)
        else:
            starts = self._chunk_offsets(leaf, chunks)
        held = starts >= 0
        whole = bool(held.all())
        if not whole:  # rows of chunks HDF5 never allocated read as zeros, as through HDF5
            out = np.zeros((m, *leaf.shape), leaf.dtype)
            if not held.any():
                return out
            slots, chunks, starts = slots[held], chunks[held], starts[held]
        at = starts + (slots - chunks * per) * rb
        mapped = self._file_map(int(at.max()) + rb)  # chunks are not in row order in the file
        rows_view = self._rows.get(rb)
        if rows_view is None:  # row k of this view is the rb bytes at file offset k: one gather of whole rows
            rows_view = self._rows[rb] = as_strided(mapped, shape=(len(mapped) - rb + 1, rb), strides=(1, 1),
                                                    writeable=False)
        gathered = rows_view[at].view(leaf.dtype).reshape(len(at), *leaf.shape)  # a fresh array: no copy
        if whole:
            return gathered
        out[held] = gathered
        return out
