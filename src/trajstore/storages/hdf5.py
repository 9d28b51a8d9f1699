"""``HDF5Storage``: a leaf, or a nested dict of leaves, as datasets of one HDF5 file.

``data.h5`` holds one chunked dataset per leaf, shape ``(len, *leaf.shape)``. A single-leaf
storage names it ``data``; a :class:`DictSpace` leaf ``("obs", "joint pos")`` becomes the
dataset ``obs/joint%20pos``: each key is encoded by :func:`safe_name`, so any key (``.``,
``..``, spaces, unicode) is a valid HDF5 name. :class:`TextSpace` leaves are fixed-width
UTF-8 (``4 * max_length`` bytes) and are read back as ``<U{max_length}`` arrays.

Crashes. Every file on disk is in the HDF5 1.10 format (``libver=("v110", "v110")``) and
always written in SWMR mode (single writer, multiple readers; ``"swmr": true`` in the config),
whatever ``multiprocessing`` says. SWMR orders HDF5's metadata writes so that the file is
consistent at every moment, and never reuses the space of a rewritten compressed chunk, so a
writer killed at any point (SIGKILL, OOM) leaves a file in which every row written before
its last :meth:`~HDF5Storage.flush` reads back. Measured by ``tests/storages/test_hdf5_crash.py``
and ``benchmarks/hdf5_crash_cost.py``; the older mode (HDF5's default, no SWMR) lost whole
files when its metadata cache evicted entries between flushes, and committed rows of
compressed leaves when HDF5 reused a rewritten chunk's space. What is left to recover:

- A killed writer leaves the superblock's "open for writing" flags set. Read-only opens use
  SWMR mode, which ignores them. A writable open (which :meth:`SpaceStorage.load_from` makes
  only while it holds the folder's writer lock, so the flagged writer is dead) clears them the
  way ``h5clear -s --increment=0`` does: the end-of-allocation mark moves to the end of the
  file, so new space never overlaps what the dead writer had allocated. Cost: one superblock
  write, plus keeping the dead writer's unflushed bytes as dead space. Where HDF5's C entry
  points cannot be reached from Python, the datasets are copied into a fresh file instead
  (stored chunks copied as they are; linear in the file size, once per crash).
- SWMR leaks the old copy of every compressed chunk it rewrites (appends to a partly filled
  chunk after a flush, ring overwrites). :meth:`~HDF5Storage.flush` compacts a compressed
  file that grew beyond twice its live chunks: copy, fsync, atomic rename. Readers see the
  new file after :meth:`~HDF5Storage.refresh`. Uncompressed chunks are rewritten in place.
- Files of the old format (``"swmr": false``) are converted once, on their first writable open.
- Process crashes only: on a power loss, writes after the last ``flush`` may reach the disk in
  any order. A SIGKILL in the middle of HDF5's write of one metadata block bigger than a
  memory page could still tear that block.

Readers open the file in SWMR mode and :meth:`~HDF5Storage.refresh` to see new flushes.
Damaged files: a SWMR reader retries a block whose checksum fails, with doubling sleeps that
never end by default; readers bound the retries, and every error of HDF5 on a damaged file
becomes a ``FormatError`` naming ``data.h5`` (:mod:`~trajstore.storages._hdf5_files`).
HDF5 older than 1.10 cannot read these files; nor can HDF5 without SWMR mode while a
writer has the file open (or died with it open).

Forks: an HDF5 handle must not be used across ``fork``. Right after a fork, the child points
every inherited descriptor of these files at ``/dev/null`` (``os.register_at_fork``), so
nothing the child's copy of HDF5 does (flush, close, exit) can reach the parent's file. On
first use the child closes the inherited handles (HDF5 would otherwise hand a new open the
same stale, parent-owned file state) and reopens the file read-only.
"""

from __future__ import annotations

import os
import uuid
import warnings
import weakref
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np

from trajstore._damage import damaged_file
from trajstore._fs import fsync_dir, write_json_atomic
from trajstore._lock import WriterLock
from trajstore.errors import FormatError, LockedError, UnsupportedSpaceError
from trajstore.spaces import BinarySpace, BoxSpace, Space, TextSpace, tree
from trajstore.storages import _hdf5_recovery as _recovery
from trajstore.storages._hdf5_files import damage_met_by_a_write, open_h5
from trajstore.storages._names import safe_name
from trajstore.storages._options import Option, one_of, optional, positive_int
from trajstore.storages._selection import Selection
from trajstore.storages.base import STORAGE_FILE, STORAGE_TYPES, SpaceStorage

DATA_FILE = "data.h5"
#: A copy of ``data.h5`` being written (compaction, conversion, recovery); renamed over it when complete.
TEMP_FILE = "data.h5.tmp"
#: Dataset name of a storage whose space is a single leaf.
ROOT_DATASET = "data"
#: ``libver`` bounds of the SWMR format (every file on disk) and of the old format (read, converted on write).
SWMR_LIBVER = ("v110", "v110")
PLAIN_LIBVER = ("earliest", "v110")
#: A compressed file is compacted at a flush when it exceeds twice its live chunk bytes plus this.
COMPACT_SLACK = 4 << 20
COMPRESSIONS = (None, "gzip", "lzf")
#: Target chunk size along axis 0 (a chunk is at least one row). HDF5 allocates a chunk whole on
#: its first write, so every leaf carries up to one chunk of unused rows: at 256 KiB that was
#: 0.67 MB of a 2048-step buffer's 0.86 MB data.h5 (four joint/action/reward leaves); at 64 KiB
#: it is a quarter of that. Sparse reads of compressed leaves also decompress less.
CHUNK_BYTES = 64 << 10
#: Cap on rows per chunk, for narrow leaves (a bool flag: 1 B/row).
CHUNK_MAX_ROWS = 8192
#: HDF5 refuses chunks of 4 GiB or more in the file format these files use (v110).
MAX_CHUNK_BYTES = 4 << 30

# Read strategy, measured by benchmarks/hdf5_read_strategy.py (h5py 3.16, HDF5 2.0; batches of 256
# sorted positions; chunked, uncompressed, in the page cache; ranges over 3 runs). "Nx" = index-list
# time / strategy time.
# - One covering slice read + a NumPy gather moves 4-9 GB/s, while the other strategies pay
#   2-5 us per row (index list, narrow rows) or 10-40 us per run. Cover when it reads at most
#   COVER_WASTE_PER_ROW unwanted bytes per wanted row: (16,) float32 within 8x the batch: cover
#   17-30x, runs 0.27-0.30x, row by row 0.36-0.53x; (2,) float32 anywhere in 100k rows: cover
#   5.8-8x, runs 0.17-0.22x, row by row 0.26-0.31x.
COVER_WASTE_PER_ROW = 16 << 10
COVER_MAX_BYTES = 64 << 20  # never allocate more than this for one covering read
# - Beyond that, h5py's index-list read beats one slice read per run for narrow rows and loses
#   more the wider the row (runs time / index-list time: 2.3-4.0 at 8 B, 1.5-2.3 at 256 B,
#   0.7-0.8 at 1 KiB, 0.08-0.10 at 16 KiB); for a (96, 96, 3) uint8 image it is 130-160x
#   slower than runs (650-880 ms per batch). Runs use ds[a:b]: read_direct costs 5-10x more.
INDEX_LIST_MAX_ROW_BYTES = 256
# - Uncompressed chunks are read and written in place without a chunk cache: sparse reads by
#   runs are 1.1-2x faster (index-list reads: within 20%). Compressed chunks need a cache of
#   several chunks, or every small append recompresses its chunk (1-row gzip appends: 11x slower).
COMPRESSED_CACHE_BYTES = 4 << 20

# HDF5 file locks are off for every open: readers must open a file that a writer in another
# process holds, and HDF5 refuses two handles on one file in one process unless their lock
# flags match. One writer at a time is the replay buffer's job (its lock file).
LOCKING = False

#: Storages with a file on disk open in this process (see _redirect_inherited_files).
_LIVE: "weakref.WeakSet[HDF5Storage]" = weakref.WeakSet()
#: Inherited h5py files that HDF5 failed to close in a child: kept so they are never collected.
_INHERITED: list[Any] = []


def _write_rows(ds: h5py.Dataset, first: int, rows: np.ndarray) -> None:
    """``ds[first:first + len(rows)] = rows`` through h5py's low-level calls: a quarter of the time of the
    slice assignment for the small blocks of write-behind (its selection parsing dominates there).
    ``rows`` must be C-contiguous, non-empty, and of the dataset's dtype."""
    space = ds.id.get_space()
    space.select_hyperslab((first, *(0,) * (rows.ndim - 1)), rows.shape)
    ds.id.write(h5py.h5s.create_simple(rows.shape), space, rows)


def _dataset_name(keys: tuple[str, ...]) -> str:
    return "/".join(safe_name(k) for k in keys) if keys else ROOT_DATASET


def _file_dtype(space: Space) -> np.dtype:
    if isinstance(space, TextSpace):  # UTF-8 takes at most 4 bytes per code point
        return h5py.string_dtype("utf-8", 4 * space.max_length)
    return np.dtype(space.dtype)


def read_rows(ds: h5py.Dataset, sel: Selection, row_bytes: int) -> np.ndarray:
    """Rows ``sel.slots`` of ``ds``: shape ``(M, *ds.shape[1:])``.

    One slice read when the rows are contiguous or close together (then a NumPy gather),
    h5py's index-list read for narrow rows, else one slice read per contiguous run.
    """
    slots = sel.slots
    m = len(slots)
    if m == 0:
        return np.empty((0, *ds.shape[1:]), ds.dtype)
    first, stop = int(slots[0]), int(slots[-1]) + 1
    if stop - first == m:
        return ds[first:stop]
    if ((stop - first - m) * row_bytes <= m * COVER_WASTE_PER_ROW
            and (stop - first) * row_bytes <= COVER_MAX_BYTES):
        return ds[first:stop][slots - first]
    if row_bytes <= INDEX_LIST_MAX_ROW_BYTES:
        return ds[slots]
    out = np.empty((m, *ds.shape[1:]), ds.dtype)
    for row, first, n in sel.runs:
        out[row:row + n] = ds[first:first + n]  # faster than read_direct (see the benchmark)
    return out


@STORAGE_TYPES.register("hdf5")
class HDF5Storage(SpaceStorage):
    """Slots of a :class:`BoxSpace`, :class:`BinarySpace` or :class:`TextSpace` leaf, or of a
    (nested) :class:`DictSpace` of them, in ``<cache_path>/data.h5``.

    Options (``create(..., **options)``, kept in ``storage.json``):
        compression: ``None`` (default), ``"gzip"`` or ``"lzf"``; compressed leaves also get the
            byte-shuffle filter.
        chunk_rows: rows per chunk for every leaf; default: about 256 KiB per chunk, at least one row.

    ``cache_path=None`` keeps the file in memory. A file on disk is always written in SWMR mode
    (module docstring), whatever ``multiprocessing`` says: readers in any process see what the
    writer has :meth:`flush`-ed after :meth:`refresh`, and a writer killed at any moment loses
    at most what it wrote after its last flush.

    Raises:
        UnsupportedSpaceError: a leaf of another space type, or a dict without leaves.
        ValueError, TypeError: a bad or unknown option.
    """

    options = (
        Option("compression", None, one_of(*COMPRESSIONS), "None, 'gzip' or 'lzf'"),
        Option("chunk_rows", None, optional(positive_int), "rows per chunk (default: about 256 KiB)"),
    )

    def __init__(self, space: Space, *, config: dict[str, Any], **kwargs: Any):
        super().__init__(space, **kwargs)
        self._config = config
        self._leaves = tree.leaves(space)
        self._row_bytes = [int(np.prod(s.shape, dtype=np.int64)) * _file_dtype(s).itemsize
                           for _, s in self._leaves]
        self._file: h5py.File | None = None
        self._datasets: list[h5py.Dataset] = []
        self._fd: int | None = None  # the HDF5 file descriptor (files on disk only)
        self._file_pid = os.getpid()
        self._length = 0
        self._compact_check_at = 0  # file size at which the next flush checks for leaked chunks

    @classmethod
    def _check_config(cls, space: Space, config: dict[str, Any]) -> dict[str, Any]:
        rows = config["chunk_rows"]
        if rows is not None:
            widest = max(int(np.prod(leaf.shape, dtype=np.int64)) * _file_dtype(leaf).itemsize
                         for _, leaf in tree.leaves(space))
            if rows * max(widest, 1) >= MAX_CHUNK_BYTES:
                raise ValueError(f"HDF5Storage option chunk_rows: {rows} rows of {widest} bytes make chunks of "
                                 f"{rows * widest} bytes; HDF5 chunks must stay under {MAX_CHUNK_BYTES} bytes")
        return config

    @classmethod
    def check_space(cls, space: Space) -> None:
        leaves = tree.leaves(space)
        if not leaves:
            raise UnsupportedSpaceError(f"HDF5Storage needs at least one leaf, got {space!r}")
        for keys, leaf in leaves:
            if not isinstance(leaf, (BoxSpace, BinarySpace, TextSpace)):
                raise UnsupportedSpaceError(f"HDF5Storage cannot store leaf {'/'.join(keys) or '<root>'!r}: {leaf!r} "
                                            "(it takes BoxSpace, BinarySpace and TextSpace leaves)")

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, config: dict[str, Any],
                multiprocessing: bool, lock: WriterLock | None) -> "HDF5Storage":
        config = {**config, "swmr": path is not None}  # every file on disk: module docstring
        storage = cls(space, config=config, capacity=capacity, cache_path=path, multiprocessing=multiprocessing,
                      lock=lock)
        if path is None:
            f = h5py.File(f"trajstore-{uuid.uuid4().hex}.h5", "w", driver="core", backing_store=False,
                          libver=PLAIN_LIBVER, locking=LOCKING, rdcc_nbytes=storage._cache_bytes())
        else:
            f = h5py.File(path / DATA_FILE, "x", libver=SWMR_LIBVER, locking=LOCKING,
                          rdcc_nbytes=storage._cache_bytes())
        try:
            for (keys, leaf), rows in zip(storage._leaves, storage._chunk_rows()):
                # A zero-length axis gets chunk size 1, which HDF5 allows only if that axis may grow.
                f.create_dataset(_dataset_name(keys), shape=(capacity or 0, *leaf.shape), dtype=_file_dtype(leaf),
                                 maxshape=(capacity, *(d or None for d in leaf.shape)),
                                 chunks=(rows, *(max(d, 1) for d in leaf.shape)),
                                 compression=config["compression"], shuffle=config["compression"] is not None)
            if config["swmr"]:
                f.swmr_mode = True  # after every dataset exists: SWMR cannot add objects
            storage._attach(f)
        except BaseException:
            f.close()
            raise
        storage.flush()  # a writer killed right after create leaves a file that opens
        return storage

    @classmethod
    def _config_for_open(cls, path: Path, space: Space, stored: Any) -> Any:
        # "swmr" records the file format (not an option): files written before SWMR-always lack it.
        stored = dict(stored) if isinstance(stored, dict) else stored
        swmr = stored.pop("swmr", False) if isinstance(stored, dict) else False
        return {**super()._config_for_open(path, space, stored), "swmr": bool(swmr)}

    @classmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: dict[str, Any], read_only: bool,
              multiprocessing: bool, lock: WriterLock | None = None) -> "HDF5Storage":
        storage = cls(space, config=config, capacity=capacity, cache_path=path, read_only=read_only,
                      multiprocessing=multiprocessing, lock=lock)
        if not read_only:
            (path / TEMP_FILE).unlink(missing_ok=True)  # left by a copy that a crash interrupted
            if not config["swmr"]:
                storage._convert_old_format()
        storage._open_file()
        return storage

    def get_config(self) -> dict[str, Any]:
        return dict(self._config)

    def _chunk_rows(self) -> list[int]:
        rows = [self._config["chunk_rows"] or min(CHUNK_MAX_ROWS, max(1, CHUNK_BYTES // max(b, 1)))
                for b in self._row_bytes]
        return [min(r, self.capacity) if self.capacity is not None else r for r in rows]

    def _cache_bytes(self) -> int:
        if self._config["compression"] is None:
            return 0
        biggest = max(r * b for r, b in zip(self._chunk_rows(), self._row_bytes))
        return max(COMPRESSED_CACHE_BYTES, 2 * biggest)

    def _swmr_read(self) -> bool:
        # A SWMR-format file may have a live or crashed SWMR writer: only SWMR readers may open it then.
        return self.read_only and (self._config["swmr"] or self.multiprocessing)

    def _open_file(self) -> None:
        swmr = self._config["swmr"]
        path = self.cache_path / DATA_FILE  # type: ignore[operator]
        if not path.exists():
            raise FormatError(f"{path} is missing: the storage's data file")
        if swmr and not self.read_only and _recovery.status_flags(path):
            self._recover_crashed_writer()
        # HDF5's errors on a damaged file, and why a SWMR reader needs a bound on retries: _hdf5_files.
        with damaged_file(path):
            f = open_h5(path, read_only=self.read_only, swmr_read=self._swmr_read(),
                        libver=SWMR_LIBVER if swmr else PLAIN_LIBVER, locking=LOCKING, rdcc_nbytes=self._cache_bytes(),
                        swmr_write=swmr and not self.read_only)
            try:
                self._attach(f)
            except BaseException:
                f.close()
                raise

    def _attach(self, f: h5py.File) -> None:
        names = [_dataset_name(keys) for keys, _ in self._leaves]
        missing = [n for n in names if n not in f]
        if missing:
            raise FormatError(f"{self.cache_path}: {DATA_FILE} has no dataset {missing[0]!r}")
        self._file, self._datasets = f, [f[n] for n in names]
        self._file_pid = os.getpid()
        self._compact_check_at = 0  # the first flush measures the file
        if self.cache_path is not None:
            self._fd = f.id.get_vfd_handle()
            _LIVE.add(self)
        self._update_length()

    # -- crash recovery, compaction, conversion ------------------------------------------------
    def _recover_crashed_writer(self) -> None:
        """``data.h5`` is flagged as open by a writer, and this storage is about to write it."""
        assert self.cache_path is not None
        if not self.holds_writer_lock:  # only then is the flagged writer known to be dead
            raise LockedError(f"{self.cache_path / DATA_FILE} is marked as open by a writer (a live one, or one that "
                              "crashed); reopen it with SpaceStorage.load_from(..., read_only=False), which takes "
                              "the folder's writer lock first, or read it with read_only=True")
        try:
            _recovery.clear_status_flags(self.cache_path / DATA_FILE)
        except _recovery.NoH5Clear:
            # The same result through public h5py only: copy the datasets into a new file.
            with h5py.File(self.cache_path / DATA_FILE, "r", swmr=True, libver=SWMR_LIBVER, locking=LOCKING) as src:
                self._replace_file(src)

    def _maybe_compact(self) -> None:
        """After a flush of a compressed file: copy it if SWMR's leaked chunk copies take over half of it."""
        assert self._fd is not None and self._file is not None
        size = os.fstat(self._fd).st_size
        if size < self._compact_check_at:
            return
        live = sum(ds.id.get_storage_size() for ds in self._datasets)
        if size > 2 * live + COMPACT_SLACK:
            try:
                self._replace_file(self._file)
            except OSError as exc:  # e.g. a full disk: the flush itself succeeded, so only warn
                warnings.warn(f"{self.cache_path}: could not compact {DATA_FILE} ({exc}); it keeps "
                              f"{size - live} bytes of rewritten chunks", RuntimeWarning, stacklevel=3)
            else:
                self._drop_file()
                self._open_file()
                size = os.fstat(self._fd).st_size  # type: ignore[arg-type]
        # Checks stay rare: once the file has doubled while it only grows, sooner while it leaks.
        self._compact_check_at = max(2 * live + COMPACT_SLACK, size + size // 4)

    def _convert_old_format(self) -> None:
        """Rewrite a file of the old (non-SWMR) format in the SWMR format, once, before writing it."""
        assert self.cache_path is not None
        with h5py.File(self.cache_path / DATA_FILE, "r", libver=PLAIN_LIBVER, locking=LOCKING) as src:
            self._replace_file(src)
        self._config["swmr"] = True
        write_json_atomic(self.cache_path / STORAGE_FILE, self.descriptor())

    def _replace_file(self, src: h5py.File) -> None:
        """Copy every leaf dataset of ``src`` into a new SWMR-format file, then rename it over ``data.h5``.

        Each dataset is made like its source (shape, chunks, filters) and gets its stored chunks as
        they are (``H5Dread_chunk``/``H5Dwrite_chunk``: nothing is decompressed, unwritten chunks
        stay unallocated). The new file has fresh chunk indexes of the SWMR format.
        """
        assert self.cache_path is not None
        tmp = self.cache_path / TEMP_FILE
        try:
            with h5py.File(tmp, "w", libver=SWMR_LIBVER, locking=LOCKING) as dst:
                for keys, _ in self._leaves:
                    name = _dataset_name(keys)
                    _recovery.copy_chunks(src[name], dst.create_dataset_like(name, src[name]))
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.cache_path / DATA_FILE)
            fsync_dir(self.cache_path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def _update_length(self) -> None:
        # After a crash between two leaves' resizes the shorter leaf decides.
        self._length = self.capacity if self.capacity is not None else min(ds.shape[0] for ds in self._datasets)

    # -- slots -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._length

    def _read(self, sel: Selection) -> list[np.ndarray]:
        return self._read_some(sel, range(len(self._datasets)))

    def _read_some(self, sel: Selection, which: Sequence[int]) -> list[np.ndarray]:
        out = []
        for i in which:  # one dataset per leaf: the others are not touched
            keys, leaf = self._leaves[i]
            # A damaged chunk or chunk index (OSError, RuntimeError...) or text that is not UTF-8.
            with damaged_file(self.cache_path / DATA_FILE if self.cache_path else "memory",  # type: ignore[operator]
                              f"dataset {_dataset_name(keys)!r}"):
                raw = read_rows(self._datasets[i], sel, self._row_bytes[i])
                if isinstance(leaf, TextSpace):
                    raw = np.strings.decode(raw, "utf-8")
            out.append(raw.astype(leaf.dtype, copy=False))
        return out

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        for (keys, leaf), ds, arr in zip(self._leaves, self._datasets, leaves):
            if isinstance(leaf, TextSpace):
                arr = np.strings.encode(arr, "utf-8").astype(ds.dtype)  # the dtype carries the UTF-8 tag
            with damage_met_by_a_write(self.cache_path / DATA_FILE if self.cache_path else None,  # type: ignore
                                       f"dataset {_dataset_name(keys)!r}"):
                for row, first, n in sel.runs:  # one slice write per run, never an index list
                    part = arr[row:row + n]
                    if part.dtype == ds.dtype and part.flags.c_contiguous and part.size:
                        _write_rows(ds, first, part)
                    else:
                        ds[first:first + n] = part

    def _resize(self, length: int) -> None:
        for ds in self._datasets:
            ds.id.set_extent((length, *ds.shape[1:]))  # what ds.resize does, without its checks
        self._length = length

    # -- state -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Write HDF5's buffers to the file, then fsync it (one ``fsync`` per call on disk).

        A compressed file that grew beyond twice its live chunks is compacted first (module docstring).
        """
        if self.closed:
            return
        self._check_open()
        if self.read_only or self._file is None:
            return
        self._file.flush()
        if self._fd is not None:
            os.fsync(self._fd)
            if self._config["compression"] is not None and self._config["swmr"]:
                self._maybe_compact()

    def refresh(self) -> None:
        """Reader: see rows the writer flushed since. SWMR readers refresh each dataset (or reopen the
        file if a compaction replaced it); other read-only storages reopen the file, which is only
        safe while no writer is between two flushes."""
        self._check_open()
        if not self.read_only or self.cache_path is None:
            return
        assert self._fd is not None
        replaced = not os.path.samestat(os.fstat(self._fd), os.stat(self.cache_path / DATA_FILE))
        if self._swmr_read() and not replaced:
            for ds in self._datasets:
                ds.refresh()
            self._update_length()
        else:
            self._drop_file()
            self._open_file()

    def _drop_file(self) -> None:
        f, self._file, self._datasets = self._file, None, []
        _LIVE.discard(self)
        if f is not None:
            try:
                f.close()
            except Exception:
                if self._file_pid == os.getpid():
                    raise
                _INHERITED.append(f)  # a parent's handle HDF5 could not close: never collect it

    def _close(self) -> None:
        if self._file is not None and self._file_pid != os.getpid():
            self._detach_inherited()
        else:
            self._drop_file()

    def _after_fork(self) -> None:
        """In a forked child: let go of the parent's HDF5 handle and reopen the file read-only."""
        if self.cache_path is None:
            return  # the child's copy of an in-memory file is private to it
        if self._file is not None and self._file_pid != os.getpid():
            self._detach_inherited()
        self._open_file()
        if not os.path.samestat(os.fstat(self._fd), os.stat(self.cache_path / DATA_FILE)):  # type: ignore[arg-type]
            raise RuntimeError(f"{self.cache_path}: the reopened HDF5 file still uses a handle inherited from the "
                               "parent process; open the storage in the child (pickle it) instead of forking")

    def _detach_inherited(self) -> None:
        # Every handle on this file inherited from the parent already writes to /dev/null
        # (_redirect_inherited_files), so closing them cannot touch the parent's file. All of
        # them must close: HDF5 shares one file state per process, and a new open would join it.
        pid = os.getpid()
        for storage in [s for s in list(_LIVE) if s._fd == self._fd and s._file_pid != pid] + [self]:
            storage._drop_file()


def _redirect_inherited_files() -> None:
    """In a forked child, point every inherited HDF5 descriptor at /dev/null.

    Whatever HDF5 later does with the parent's handles in this process (a close, a flush at
    exit, garbage collection) then cannot write into the parent's file. Only ``os`` calls:
    no h5py lock is taken while another thread of the parent may have held it at the fork.
    """
    fds = {s._fd for s in list(_LIVE) if s._fd is not None}
    if not fds:
        return
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in fds:
            os.dup2(null, fd)
    finally:
        os.close(null)


os.register_at_fork(after_in_child=_redirect_inherited_files)
