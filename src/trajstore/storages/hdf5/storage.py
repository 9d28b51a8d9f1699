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
becomes a ``FormatError`` naming ``data.h5`` (:mod:`~trajstore.storages.hdf5._files`). A file that
is only open elsewhere in this process is not damaged: a reader joins an open writer, a writer
is refused with an ``AlreadyOpenError`` while readers here hold the file
(:mod:`~trajstore.storages.hdf5._handles`).
HDF5 older than 1.10 cannot read these files; nor can HDF5 without SWMR mode while a
writer has the file open (or died with it open).

Forks: an HDF5 handle must not be used across ``fork``. Right after a fork, the child points
every inherited descriptor of these files at ``/dev/null`` (:mod:`~trajstore.storages.hdf5._handles`).
On first use the child closes the inherited handles (HDF5 would otherwise hand a new open the
same stale, parent-owned file state) and reopens the file read-only.
"""


from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np

from trajstore._damage import damaged_file
from trajstore._fs import write_json_atomic
from trajstore._lock import WriterLock
from trajstore.errors import FormatError, LockedError, UnsupportedSpaceError
from trajstore.spaces import BinarySpace, BoxSpace, Space, TextSpace, tree
from trajstore.storages._options import Option, one_of, optional, positive_int
from trajstore.storages._selection import Selection
from trajstore.storages.base import STORAGE_FILE, STORAGE_TYPES, SpaceStorage
from trajstore.storages.hdf5 import _handles, _recovery, _rewrite, _rows
from trajstore.storages.hdf5._direct import DirectRows, direct_ok
from trajstore.storages.hdf5._memory import MemoryRows
from trajstore.storages.hdf5._new_file import create_file
from trajstore.storages.hdf5._files import damage_met_by_a_write, open_h5
from trajstore.storages.hdf5._layout import (COMPRESSIONS, DATA_FILE, LOCKING, PLAIN_LIBVER, SWMR_LIBVER, TEMP_FILE,
                                             cache_bytes, check_chunk_rows, chunk_rows, dataset_name, row_bytes)


@STORAGE_TYPES.register("hdf5")
class HDF5Storage(SpaceStorage):
    """Slots of a :class:`BoxSpace`, :class:`BinarySpace` or :class:`TextSpace` leaf, or of a
    (nested) :class:`DictSpace` of them, in ``<cache_path>/data.h5``.

    Options (``create(..., **options)``, kept in ``storage.json``):
        compression: ``None`` (default), ``"gzip"`` or ``"lzf"``; compressed leaves also get the
            byte-shuffle filter.
        chunk_rows: rows per chunk for every leaf; default: about 64 KiB per chunk, at least one row.

    ``cache_path=None`` keeps the file in memory. A file on disk is always written in SWMR mode
    (module docstring), whatever ``multiprocessing`` says: readers in any process see what the
    writer has :meth:`flush`-ed after :meth:`refresh`, and a writer killed at any moment loses
    at most what it wrote after its last flush. In one process, readers may open while a writer
    is open (they share its view of the file); a writer cannot open while readers are.

    Raises:
        UnsupportedSpaceError: a leaf of another space type, or a dict without leaves.
        ValueError, TypeError: a bad or unknown option.
        AlreadyOpenError: (``load_from(..., read_only=False)``) this process has the file open for reading.
    """

    options = (
        Option("compression", None, one_of(*COMPRESSIONS), "None, 'gzip' or 'lzf'"),
        Option("chunk_rows", None, optional(positive_int), "rows per chunk (default: about 64 KiB)"),
    )

    def __init__(self, space: Space, *, config: dict[str, Any], **kwargs: Any):
        super().__init__(space, **kwargs)
        self._config = config
        self._leaves = tree.leaves(space)
        self._names = [dataset_name(keys) for keys, _ in self._leaves]
        self._row_bytes = [row_bytes(s) for _, s in self._leaves]
        self._file: h5py.File | None = None
        self._datasets: list[h5py.Dataset] = []  # empty while no file is attached (a reader reattaches on use)
        self._fd: int | None = None  # the HDF5 file descriptor (files on disk only, while attached)
        self._file_pid = os.getpid()  # the process that opened the attached file
        self._opened_swmr_read = False  # the attached file was opened in SWMR-read mode
        self._held: int | None = None  # a reader's registration in trajstore._held_files
        self._io = threading.RLock()  # a reader's file is never swapped in the middle of one of its reads
        self._length = 0
        self._compact_check_at = 0  # file size at which the next flush checks for leaked chunks
        # Numeric leaves: NumPy arrays in memory (_memory), read from the file bytes on disk if uncompressed (_direct).
        self._memory: MemoryRows | None = None
        self._direct: DirectRows | None = None

    @classmethod
    def _check_config(cls, space: Space, config: dict[str, Any]) -> dict[str, Any]:
        check_chunk_rows(space, config["chunk_rows"])
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
            storage._memory = MemoryRows({i: (tuple(leaf.shape), np.dtype(leaf.dtype))
                                          for i, (_, leaf) in enumerate(storage._leaves)
                                          if not isinstance(leaf, TextSpace)}, capacity or 0)
        f = create_file(path, storage._leaves, storage._names, storage._chunk_rows(), capacity,
                        config["compression"], storage._cache_bytes())
        try:
            storage._attach(f, swmr_read=False)
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
                _rewrite.convert_old_format(path, storage._names)
                storage._config["swmr"] = True
                write_json_atomic(path / STORAGE_FILE, storage.descriptor())
        storage._open_file()
        return storage

    def get_config(self) -> dict[str, Any]:
        return dict(self._config)

    def _chunk_rows(self) -> list[int]:
        return chunk_rows(self._config["chunk_rows"], self._row_bytes, self.capacity)

    def _cache_bytes(self) -> int:
        return cache_bytes(self._config["compression"], self._chunk_rows(), self._row_bytes)

    def _open_file(self) -> None:
        swmr = self._config["swmr"]
        path = self.cache_path / DATA_FILE  # type: ignore[operator]
        if not path.exists():
            raise FormatError(f"{path} is missing: the storage's data file")
        if swmr and not self.read_only and _recovery.status_flags(path):
            if not self.holds_writer_lock:  # only then is the flagged writer known to be dead
                raise LockedError(f"{path} is marked as open by a writer (a live one, or one that crashed); reopen "
                                  "it with SpaceStorage.load_from(..., read_only=False), which takes the folder's "
                                  "writer lock first, or read it with read_only=True")
            _rewrite.recover_crashed_writer(self.cache_path, self._names)  # type: ignore[arg-type]
        # A SWMR-format file may have a live or crashed SWMR writer: only SWMR readers may open it then.
        swmr_read = self.read_only and (swmr or self.multiprocessing)
        if self.read_only:
            swmr_read = _handles.joined_swmr_read(path, swmr_read)
        # HDF5's errors on a damaged file, and why a SWMR reader needs a bound on retries: _files.
        # Its refusal because this process has the file open otherwise is no damage: _handles.
        with damaged_file(path), _handles.already_open_error(path, read_only=self.read_only):
            f = open_h5(path, read_only=self.read_only, swmr_read=swmr_read,
                        libver=SWMR_LIBVER if swmr else PLAIN_LIBVER, locking=LOCKING, rdcc_nbytes=self._cache_bytes(),
                        swmr_write=swmr and not self.read_only)
            try:
                self._attach(f, swmr_read=swmr_read)
            except BaseException:
                self._drop_file() if self._file is f else f.close()
                raise

    def _attach(self, f: h5py.File, *, swmr_read: bool) -> None:
        missing = [n for n in self._names if n not in f]
        if missing:
            raise FormatError(f"{self.cache_path}: {DATA_FILE} has no dataset {missing[0]!r}")
        self._file, self._datasets = f, [f[n] for n in self._names]
        self._file_pid = os.getpid()
        self._opened_swmr_read = swmr_read
        self._compact_check_at = 0  # the first flush measures the file
        if self.cache_path is not None:
            self._fd = f.id.get_vfd_handle()
            direct = {i: (ds, self._row_bytes[i]) for i, ds in enumerate(self._datasets)
                      if not isinstance(self._leaves[i][1], TextSpace) and direct_ok(ds, self._config["compression"])}
            self._direct = DirectRows(self.cache_path / DATA_FILE, direct) if direct else None
            _handles.LIVE.add(self)
            if self.read_only:
                self._held = _handles.hold_for_reading(self, self.cache_path / DATA_FILE, self._fd)
        if swmr_read:  # a second open in this process joins HDF5's state of the first: sizes as of its last refresh
            for ds in self._datasets:
                ds.refresh()
        self._update_length()

    # -- compaction ----------------------------------------------------------------------------
    def _maybe_compact(self) -> None:
        """After a flush of a compressed file: copy it if SWMR's leaked chunk copies take over half of it."""
        assert self._fd is not None and self._file is not None and self.cache_path is not None
        size = os.fstat(self._fd).st_size
        if size < self._compact_check_at:
            return
        compact, live = _rewrite.needs_compaction(size, self._datasets)
        if compact:
            try:
                _rewrite.replace_file(self.cache_path, self._file, self._names)
            except OSError as exc:  # e.g. a full disk: the flush itself succeeded, so only warn
                warnings.warn(f"{self.cache_path}: could not compact {DATA_FILE} ({exc}); it keeps "
                              f"{size - live} bytes of rewritten chunks", RuntimeWarning, stacklevel=3)
            else:
                self._drop_file()
                self._open_file()
                size = os.fstat(self._fd).st_size  # type: ignore[arg-type]
        self._compact_check_at = _rewrite.next_compaction_check(size, live)

    def _update_length(self) -> None:
        # After a crash between two leaves' resizes the shorter leaf decides.
        self._length = self.capacity if self.capacity is not None else min(ds.shape[0] for ds in self._datasets)

    # -- slots -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._length

    def _read(self, sel: Selection) -> list[np.ndarray]:
        return self._read_some(sel, range(len(self._names)))

    def _read_some(self, sel: Selection, which: Sequence[int]) -> list[np.ndarray]:
        out = []
        with self._io:
            if not self._datasets:  # detached when the writer it had joined closed (_handles)
                self._open_file()
            memory, direct = self._memory, self._direct
            for i in which:  # one dataset per leaf: the others are not touched
                leaf = self._leaves[i][1]
                if memory is not None and memory.handles(i):
                    out.append(memory.read(i, sel))
                    continue
                if direct is not None and direct.handles(i):  # damage: a FormatError naming the dataset
                    out.append(direct.read_checked(i, sel.slots, self._names[i]).astype(leaf.dtype, copy=False))
                    continue
                # A damaged chunk or chunk index (OSError, RuntimeError...) or text that is not UTF-8.
                where = self.cache_path / DATA_FILE if self.cache_path else "memory"  # type: ignore[operator]
                with damaged_file(where, f"dataset {self._names[i]!r}"):
                    raw = _rows.read_rows(self._datasets[i], sel, self._row_bytes[i])
                    if isinstance(leaf, TextSpace):
                        raw = np.strings.decode(raw, "utf-8")
                out.append(raw.astype(leaf.dtype, copy=False))
        return out

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        where = self.cache_path / DATA_FILE if self.cache_path else None
        for i, ((_, leaf), name, ds, arr) in enumerate(zip(self._leaves, self._names, self._datasets, leaves)):
            if self._memory is not None and self._memory.handles(i):
                self._memory.write(i, sel, arr)
                continue
            if isinstance(leaf, TextSpace):
                arr = np.strings.encode(arr, "utf-8").astype(ds.dtype)  # the dtype carries the UTF-8 tag
            with damage_met_by_a_write(where, f"dataset {name!r}"):
                _rows.write_runs(ds, sel, arr)

    def _resize(self, length: int) -> None:
        for ds in self._datasets:
            ds.id.set_extent((length, *ds.shape[1:]))  # what ds.resize does, without its checks
        if self._memory is not None:
            self._memory.resize(length, self._length)
        if self._direct is not None and length < self._length:
            self._direct.forget_from(length)  # HDF5 may free the chunks past the new end
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
        with self._io:
            if self._fd is None:  # detached (_handles): the next open sees everything
                self._open_file()
                return
            replaced = not os.path.samestat(os.fstat(self._fd), os.stat(self.cache_path / DATA_FILE))
            if self._opened_swmr_read and not replaced:
                for ds in self._datasets:
                    ds.refresh()
                self._update_length()
            else:
                self._drop_file()
                self._open_file()

    def _drop_file(self) -> None:
        """Close the attached file. A writer first detaches the readers of this process that joined
        its file (they reopen it on their next use): :mod:`~trajstore.storages.hdf5._handles`."""
        joined = [] if self.read_only else _handles.joined_readers(self)
        for reader in joined:
            with reader._io:
                reader._drop_file()
        f, self._file, self._datasets, self._fd, self._direct = self._file, None, [], None, None
        _handles.LIVE.discard(self)
        _handles.release(self._held)
        self._held = None
        if f is not None:
            try:
                f.close()
            except Exception:
                if self._file_pid == os.getpid():
                    raise
                _handles.INHERITED.append(f)  # a parent's handle HDF5 could not close: never collect it

    def _close(self) -> None:
        if self._file is not None and self._file_pid != os.getpid():
            self._detach_inherited()
        else:
            self._drop_file()

    def _after_fork(self) -> None:
        """In a forked child: let go of the parent's HDF5 handle and reopen the file read-only."""
        self._io = threading.RLock()  # another thread of the parent may have held it at the fork
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
        # (_handles.redirect_inherited_files), so closing them cannot touch the parent's file. All of
        # them must close: HDF5 shares one file state per process, and a new open would join it.
        pid, fd = os.getpid(), self._fd
        for storage in [s for s in list(_handles.LIVE) if s._fd == fd and s._file_pid != pid] + [self]:
            storage._drop_file()
