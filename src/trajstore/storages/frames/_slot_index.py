"""``SlotIndex``: a persistent, crash-tolerant map slot -> (file_id, offset, length).

For storages whose payloads (encoded frames, video segments) live in append-only files:
the payload of slot ``s`` is ``length`` bytes at byte ``offset`` of file ``file_id``.

On disk (``index.log``), all little-endian:

* a 32-byte header: magic ``b"TSSLOTIX"``, int64 format version (1), int64 record size
  (32), int64 reserved (0);
* then fixed-size 32-byte records ``(slot, file_id, offset, length)``, each an int64.
  ``file_id == -1`` marks a slot as unwritten again. A record with ``slot == -1`` is a
  *file-id reservation* (see :meth:`SlotIndex.new_file_id`), so file ids are never reused,
  even across a reopen after every file was deleted; its ``offset`` field may declare a slot
  count (0 otherwise; readers before it ignore it). Loading refuses records no writer logs
  (a damaged log) with a ``FormatError`` naming the log and the record, before any table is
  sized from them (:meth:`SlotIndex._check_records`).

Every change appends records (one ``os.write`` per batch). Loading replays the log; the
last record of a slot wins. A crash can leave a torn partial record at the end: readers
ignore it, and a writer truncates it away on open before appending.

When the log holds many more records than slots (``> 4 * n_slots + 1024``), the writer
*compacts* it: a snapshot (one record per written slot, one for the last slot, and one
reservation) goes to a temp file, is fsynced and ``os.replace``-d over ``index.log``, then
the folder is fsynced. A snapshot is durable at once, so compaction first calls the owner's
``before_compact`` hook, which must make the payload bytes durable (data first, then index).
Readers in other processes call :meth:`SlotIndex.refresh`, which reads only the
new tail of the log, or reloads fully when the file was replaced (its inode changed).

The index also keeps a live count per file id (how many slots point into it), so the
owner can delete a file once its count drops to 0. The index does no payload I/O.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np

from trajstore._fs import fsync_dir
from trajstore.storages.frames._slot_records import (HEADER, HEADER_BYTES, LOG_FILE, RECORD, RECORD_BYTES,
                                                     check_header, check_records, tally, write_all)

__all__ = ["HEADER_BYTES", "LOG_FILE", "RECORD", "RECORD_BYTES", "SlotIndex"]


class SlotIndex:
    """The slot -> ``(file_id, offset, length)`` table of one storage folder.

    Open it with :meth:`create` (a new, empty log) or :meth:`open` (an existing one).
    Exactly one process writes (``read_only=False``); any number of processes read.

    Attributes:
        path: the ``index.log`` file.
        read_only: :meth:`update` and :meth:`new_file_id` raise ``PermissionError``.
    """

    def __init__(self, path: Path, *, n_slots: int, read_only: bool,
                 before_compact: Callable[[], None] | None = None):
        self.path = Path(path)
        self.read_only = read_only
        self.before_compact = before_compact
        self._buf = np.full((max(n_slots, 0), 3), -1, dtype=np.int64)  # rows past _n are spare
        self._n = max(n_slots, 0)
        self._n_given = self._n  # slots the owner declared (its capacity)
        self._declared = 0  # slots declared by reservation records of the log (see _check_records)
        # Live slots per file id, only ids with some: sparse, since a ring that has run for long
        # counts only its newest files, and a damaged reservation may name any id.
        self._counts: dict[int, int] = {}
        self._max_file_id = -1  # highest file id ever reserved or referenced
        self._records = 0  # records in the current log file (for the compaction rule)
        self._fd = -1
        self._ino = -1
        self._pos = HEADER_BYTES  # byte offset up to which the log has been applied

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def create(cls, folder: str | os.PathLike, n_slots: int = 0, *,
               before_compact: Callable[[], None] | None = None) -> "SlotIndex":
        """A new writable index with ``n_slots`` unwritten slots, as ``folder/index.log``.

        ``before_compact()`` is called before each compaction: fsync the payload files there.

        Raises:
            FileExistsError: the log already exists.
        """
        path = Path(folder) / LOG_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, HEADER)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(path.parent)
        return cls.open(folder, n_slots=n_slots, read_only=False, before_compact=before_compact)

    @classmethod
    def open(cls, folder: str | os.PathLike, *, n_slots: int = 0, read_only: bool = True,
             before_compact: Callable[[], None] | None = None) -> "SlotIndex":
        """Load ``folder/index.log``; the table has ``max(n_slots, highest slot + 1)`` rows.

        A writer truncates a torn trailing record so its appends stay aligned.

        Raises:
            FileNotFoundError: no log; FormatError: not a slot index, or a newer version.
        """
        index = cls(Path(folder) / LOG_FILE, n_slots=n_slots, read_only=read_only, before_compact=before_compact)
        index._reload()
        if not read_only:
            size = os.fstat(index._fd).st_size
            if size != index._pos:  # a torn record from a crash: drop it before appending
                os.ftruncate(index._fd, index._pos)
        return index

    def close(self) -> None:
        """Close the log file descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def reopen_read_only(self) -> None:
        """In a forked child: drop the inherited descriptor and read from a fresh one.

        Closing the child's copy of a plain fd leaves the parent's open.
        """
        self.close()
        self.read_only = True
        self._reload()

    # -- reading -----------------------------------------------------------------------------
    @property
    def n_slots(self) -> int:
        """Number of slots (rows of the table)."""
        return self._n

    @property
    def _table(self) -> np.ndarray:
        return self._buf[: self._n]

    @property
    def table(self) -> np.ndarray:
        """Read-only view, int64 ``(n_slots, 3)``: ``file_id, offset, length`` (bytes); -1 = unwritten."""
        view = self._table.view()
        view.flags.writeable = False
        return view

    def unwritten(self, slots: np.ndarray) -> int:
        """How many of ``slots`` (int64 ``(N,)``) are past the index or have no record (they read as zeros)."""
        if not len(slots):
            return 0
        known = slots < self.n_slots
        return int(np.count_nonzero(~known)) + int(np.count_nonzero(self.lookup(slots[known])[:, 0] < 0))

    def lookup(self, slots: np.ndarray) -> np.ndarray:
        """Rows for ``slots`` (int array ``(M,)``): int64 ``(M, 3)`` ``file_id, offset, length``."""
        return self._table[np.asarray(slots, dtype=np.int64)]

    def live_count(self, file_id: int) -> int:
        """How many slots point into ``file_id`` now."""
        return self._counts.get(int(file_id), 0)

    def live_files(self) -> np.ndarray:
        """Sorted file ids referenced by at least one slot (int64 ``(F,)``)."""
        return np.array(sorted(self._counts), dtype=np.int64)

    @property
    def max_file_id(self) -> int:
        """The highest file id ever reserved or referenced (-1 if none)."""
        return self._max_file_id

    def refresh(self) -> bool:
        """Apply what another process appended since the last load; True if anything changed.

        Reads only the new tail of the log; reloads fully if the log was replaced by a compaction.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:  # between a writer's unlink and rename cannot happen (os.replace)
            return False
        if st.st_ino != self._ino:
            self._reload()
            return True
        size = os.fstat(self._fd).st_size
        whole = (size - self._pos) // RECORD_BYTES * RECORD_BYTES
        if whole <= 0:
            return False
        raw = os.pread(self._fd, whole, self._pos)
        whole = len(raw) // RECORD_BYTES * RECORD_BYTES
        rec = np.frombuffer(raw[:whole], dtype=RECORD).reshape(-1, 4)
        self._check_records(rec, self._records)
        self._apply(rec)
        self._pos += whole
        self._records += whole // RECORD_BYTES
        return whole > 0

    # -- writing -----------------------------------------------------------------------------
    def grow(self, n_slots: int) -> None:
        """Make at least ``n_slots`` slots exist (new ones unwritten); in memory only.

        Slots past the highest written one are not persisted: after a reopen the table has
        ``max(n_slots given to open, highest written slot + 1)`` rows.
        """
        if n_slots > len(self._buf):  # amortised: many small extends stay linear
            grown = np.full((max(n_slots, 2 * len(self._buf)), 3), -1, dtype=np.int64)
            grown[: self._n] = self._table
            self._buf = grown
        self._n = max(self._n, n_slots)

    def update(self, slots: np.ndarray, file_ids: np.ndarray | int, offsets: np.ndarray,
               lengths: np.ndarray) -> np.ndarray:
        """Point ``slots`` at new payloads and log it with one ``os.write``.

        Args:
            slots: int ``(M,)``; repeated slots are allowed (the last wins). Slots past the
                end grow the table.
            file_ids: int ``(M,)`` or one int; -1 marks a slot unwritten.
            offsets, lengths: int ``(M,)``, bytes.

        Returns:
            int64 ``(K,)``: file ids whose live count dropped to 0 with this update (the owner
            may delete those files once the log is flushed).

        Raises:
            PermissionError: the index is read-only. OSError: the log write failed (the log
            and the table are left as they were).
        """
        if self.read_only:
            raise PermissionError(f"{self.path} is open read-only")
        slots = np.asarray(slots, dtype=np.int64).reshape(-1)
        rec = np.empty((len(slots), 4), dtype=RECORD)
        rec[:, 0] = slots
        rec[:, 1] = file_ids
        rec[:, 2] = offsets
        rec[:, 3] = lengths
        if len(rec) == 0:
            return np.zeros(0, dtype=np.int64)
        if rec[:, 0].min() < 0:
            raise ValueError(f"slots must be >= 0, got {int(rec[:, 0].min())}")
        # A file id not reserved yet, or a slot past every bound a reader checks (_check_records): log a
        # reservation record first, which declares both.
        top, high = int(rec[:, 1].max()), int(rec[:, 0].max()) + 1
        if top > self._max_file_id or high > max(self._n_given, self._declared, self._records + len(rec)):
            reserve = np.array([[-1, max(top, self._max_file_id), high, 0]], dtype=RECORD)
            rec = np.concatenate([reserve, rec])
        self._append(rec)
        emptied = self._apply(rec)
        if self._records > 4 * len(self._table) + 1024:
            self.compact()
        return emptied

    def new_file_id(self) -> int:
        """Reserve and return a file id never handed out before in this folder (logged)."""
        fid = self._max_file_id + 1
        if self.read_only:
            raise PermissionError(f"{self.path} is open read-only")
        rec = np.array([[-1, fid, 0, 0]], dtype=RECORD)
        self._append(rec)
        self._apply(rec)
        return fid

    def flush(self) -> None:
        """fsync the log (call after the payload files are fsynced: data first, then index)."""
        if not self.read_only and self._fd >= 0:
            os.fsync(self._fd)

    def compact(self) -> None:
        """Replace the log by a snapshot of the table (temp file, fsync, rename, fsync folder).

        Calls ``before_compact()`` first: the snapshot is durable, so the payloads it points to must be.
        """
        if self.before_compact is not None:
            self.before_compact()
        keep = self._table[:, 0] >= 0
        if self._n:
            keep[-1] = True  # the last slot keeps the slot count even when it is unwritten
        written = np.flatnonzero(keep)
        rec = np.empty((len(written) + 1, 4), dtype=RECORD)
        rec[0] = (-1, self._max_file_id, self._n, 0)  # keeps file ids from being reused; declares the slots
        rec[1:, 0] = written
        rec[1:, 1:] = self._table[written]
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, HEADER + rec.tobytes())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self.close()
        self._open_fd()
        self._pos = HEADER_BYTES + len(rec) * RECORD_BYTES
        self._records = len(rec)

    # -- internals ---------------------------------------------------------------------------
    def _open_fd(self) -> None:
        flags = os.O_RDONLY if self.read_only else os.O_RDWR | os.O_APPEND
        self._fd = os.open(self.path, flags)
        self._ino = os.fstat(self._fd).st_ino

    def _reload(self) -> None:
        """Read the whole log from a fresh descriptor and rebuild the table and counts."""
        self.close()
        self._open_fd()
        size = os.fstat(self._fd).st_size
        raw = os.pread(self._fd, size, 0)
        check_header(raw[:HEADER_BYTES], self.path)
        whole = (len(raw) - HEADER_BYTES) // RECORD_BYTES * RECORD_BYTES
        rec = np.frombuffer(raw, dtype=RECORD, count=whole // 8, offset=HEADER_BYTES).reshape(-1, 4)
        self._buf[:] = -1
        self._counts = {}
        self._max_file_id = -1
        self._declared = 0
        self._check_records(rec, 0)
        self._apply(rec)
        self._pos = HEADER_BYTES + whole
        self._records = len(rec)

    def _check_records(self, rec: np.ndarray, before: int) -> None:
        """Refuse records no writer writes (:func:`~trajstore.storages.frames._slot_records.check_records`)."""
        check_records(rec, before, self.path, self._max_file_id, self._declared, self._n_given)

    def _append(self, rec: np.ndarray) -> None:
        data = np.ascontiguousarray(rec, dtype=RECORD).tobytes()
        try:
            write_all(self._fd, data)
        except BaseException:
            os.ftruncate(self._fd, self._pos)  # no torn record may stay in front of later appends
            raise
        self._pos += len(data)
        self._records += len(rec)

    def _apply(self, rec: np.ndarray) -> np.ndarray:
        """Replay records into the table and the counts; returns file ids whose count fell to 0."""
        if len(rec) == 0:
            return np.zeros(0, dtype=np.int64)
        self._max_file_id = max(self._max_file_id, int(rec[:, 1].max()))
        self._declared = max(self._declared, int(rec[rec[:, 0] < 0, 2].max(initial=0)))
        rec = rec[rec[:, 0] >= 0]  # reservations carry no slot
        if len(rec) == 0:
            return np.zeros(0, dtype=np.int64)
        # Last record per slot wins: a stable sort by slot keeps records of one slot in log
        # order, so the last of each group is the newest. (Not np.unique: its first call
        # imports numpy.ma, several ms of every fresh reader's open.)
        if len(rec) < 2 or bool(np.all(rec[1:, 0] > rec[:-1, 0])):  # the usual batch: one record per slot
            slots, new = rec[:, 0], rec[:, 1:].copy()
        else:
            by_slot = np.argsort(rec[:, 0], kind="stable")
            ordered = rec[by_slot, 0]
            last = by_slot[np.r_[ordered[1:] != ordered[:-1], True]]
            slots, new = rec[last, 0], rec[last, 1:]
        new[new[:, 0] < 0] = -1  # an unwritten slot has no offset or length
        self.grow(int(slots[-1]) + 1)
        old_ids = self._table[slots, 0]
        new_ids = new[:, 0]
        emptied = []
        for fid, n in zip(*tally(new_ids)):
            self._counts[fid] = self._counts.get(fid, 0) + n
        for fid, n in zip(*tally(old_ids)):
            left = self._counts.get(fid, 0) - n
            if left > 0:
                self._counts[fid] = left
            else:
                self._counts.pop(fid, None)
                emptied.append(fid)
        self._table[slots] = new
        return np.array(emptied, dtype=np.int64)

