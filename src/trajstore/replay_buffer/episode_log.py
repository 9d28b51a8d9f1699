"""The episode log: a buffer folder's closed episodes, one appended record each, committed by
``trajstore.json`` (format version 3). File I/O only; the table itself is
:class:`~trajstore.replay_buffer.episodes.EpisodeTable`.

Why: format 2 kept the whole episode table in ``trajstore.json``, so every ``end_episode()``
rewrote every episode (25 ms and 574 KiB per call at 20,000 episodes). Now a commit appends the
new episodes' records and rewrites only the small metadata file, whose size does not grow with
the number of episodes.

On disk, ``episodes.<generation>.log`` (six digits) in the buffer folder, UTF-8 JSON lines: a
header line ``{"format": "trajstore.episode_log", "version": 1}``, then one line per closed
episode, oldest first::

    {"id": 7, "start": 35, "stop": 40, "final": 3, "interrupted": false, "data": {"task": "push"}}

(global step numbers ``[start, stop)``, the final observation number or -1, the JSON data of
``end_episode(**data)``). ``trajstore.json`` names the log and what of it is committed::

    "episodes": {"log": {"file": "episodes.000002.log", "bytes": 4711, "records": 57, "skip": 12},
                 "open_start": 300, "next_id": 57, "final_count": 40, "discards": 0}

``bytes`` is the committed length, ``records`` the episode lines within it, ``skip`` how many of
the first ones are no longer in the table (a ring dropped them); the table holds the last
``records - skip``.

Order of a commit: the storage is flushed, new records are written at ``bytes`` and fsynced (then
their index records), then ``trajstore.json`` is replaced atomically. A crash in between leaves bytes past ``bytes``:
readers never read past it, and the next writer truncates them when it opens the folder.

Compaction: a ring's dropped episodes stay in the log as dead records. When they outnumber the
live ones (and are at least :data:`MIN_DEAD`), the commit writes the live records to the next
generation's file instead (fsync the file and the folder), ``trajstore.json`` names it, and the
old file is removed after that: amortised O(1) per episode, never a rewrite on every commit. A
crash before the metadata names the new file leaves an unnamed file that the next writer removes;
a reader that finds the file its metadata names gone re-reads the metadata (the writer removes
a file only after committing metadata that no longer names it).

Reading a million episodes (the episode index, :mod:`~trajstore.replay_buffer.episode_index`): each
log has a binary twin ``episodes.<generation>.idx``, fixed-width int64 records ``(id, start, stop,
final, interrupted, byte offset, byte length of the line)``, appended and fsynced with the log lines
in the same commit and named with the log (``"index"`` in the entry above, committed by the same
``records``). Opening reads the committed records with one ``pread`` into arrays (the table) and checks
them against the log (the byte ranges tile the committed bytes; the first and last live lines agree;
the columns are a consistent table) and against the crc32 of the committed index bytes that the
entry commits beside the index (``"index_crc32"``: a flipped bit that keeps the table consistent is
found too; a reader's incremental read continues the crc over the new records), so a
1,000,000-episode folder opens ~25x faster than by parsing (1.3 s against 34 s read-only on a loaded
2-core machine, ``benchmarks/million_episodes.py``) with 64 bytes an episode in NumPy arrays
(72 MiB RSS against 689 MiB); episode data is parsed from the log when asked for, by offset
(:class:`~trajstore.replay_buffer.episode_store.DataStore`). A log without an index (written before
it) is parsed as before; a writer then writes its index and commits the metadata naming it. A
damaged index warns (:class:`~trajstore.replay_buffer.episode_index.EpisodeIndexWarning`): a reader
parses the log, a writer rebuilds the index. Compaction writes the next generation's index with its
log; the kept lines are copied as they are (no parse).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from trajstore.errors import FormatError
from trajstore.replay_buffer.episode_index import (EMPTY_CRC, EpisodeIndexWarning, IndexDamagedError, IndexFile,
                                                   check_crc, datasync, index_crc, index_name, line_ranges, write_all)
from trajstore.replay_buffer.episode_store import DataStore
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.log_format import (HEADER, MIN_DEAD, LogPosition, check_header, checked_index,
                                                checked_new, decode, encode, encode_lines, log_name, remove_unnamed)

__all__ = ["HEADER", "MIN_DEAD", "EpisodeLog", "LogPosition", "decode", "encode", "log_name", "remove_unnamed"]

def _with_ranges(rows: np.ndarray, data_lines: list[bytes], base: int) -> tuple[np.ndarray, bytes]:
    """Index records ``(7, E)`` of ``rows`` whose lines are ``data_lines`` written at byte ``base``, and the bytes."""
    payload = b"".join(data_lines)
    lengths = np.fromiter((len(line) for line in data_lines), np.int64, len(data_lines))
    offsets = base + np.cumsum(lengths) - lengths
    return np.concatenate([rows, offsets[None], lengths[None]]), payload


class EpisodeLog:
    """The open log (and index) of one buffer folder: a writer appends and compacts, a reader follows the
    commits.

    Attributes:
        position: what the last metadata read or written commits, or ``None`` for a writer's log not
            yet named by any metadata (a new folder, or one of an older format being migrated).
        store: the data store of the table read from the log (a writer's: the one it appends to).
    """

    def __init__(self, folder: Path, position: LogPosition | None, fd: int, *, read_only: bool,
                 last: np.ndarray | None, index: IndexFile | None, crc: int | None, store: DataStore):
        self.folder, self.position, self.read_only, self.store = folder, position, read_only, store
        self._fd, self._index = fd, index
        self._file = position.file if position is not None else log_name(0)
        self._last = last  # columns (7,) of the newest record in the file (committed part), None: none
        self._last_id = int(last[0]) if last is not None else -1
        self._crc = crc  # crc of the index's committed part, checked or written (None: not checked)
        self._index_damaged = False  # a reader found the index damaged: it parses the new lines
        self._pending: tuple[int, np.ndarray, str | None, DataStore] = (
            self._last_id, np.zeros((7, 0), np.int64), None, store)

    @property
    def index_name(self) -> str | None:
        """The index file this log keeps (``None``: a reader of a log without one)."""
        return None if self._index is None else self._index.path.name

    @classmethod
    def start(cls, folder: Path) -> "EpisodeLog":
        """A writer's new, empty log and index (generation 0) for a folder whose metadata names none yet;
        unnamed log and index files (left by a crash) are removed first."""
        remove_unnamed(folder, None)
        fd = os.open(folder / log_name(0), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, HEADER, 0)
            os.fsync(fd)
            index = IndexFile.create(folder, index_name(0), np.zeros((7, 0), np.int64))
        except BaseException:
            os.close(fd)
            raise
        store = DataStore()
        store.attach(folder / log_name(0), fd)
        return cls(folder, None, fd, read_only=False, last=None, index=index, crc=EMPTY_CRC, store=store)

    @classmethod
    def open(cls, folder: Path, position: LogPosition, *, read_only: bool, parse: bool = False
             ) -> tuple["EpisodeLog", np.ndarray]:
        """Open the log ``position`` names; returns it and its live records' columns ``(5, E)`` (the data
        located in :attr:`store`). With an index, nothing of the log but two lines is read; without one
        (or a damaged one: :class:`~trajstore.replay_buffer.episode_index.EpisodeIndexWarning`) the log
        is parsed, and a writer writes the index.

        A writer truncates uncommitted tails and removes unnamed log and index files. ``parse``: parse
        every line even with an index, and require the index to agree (a check, ``trajstore verify``).

        Raises:
            FileNotFoundError: the file is gone (a reader raced a compaction: read the metadata again).
            FormatError: a log shorter than committed, a bad header, a damaged record, a wrong count.
        """
        path = folder / position.file
        fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        index = None
        try:
            size = os.fstat(fd).st_size
            if size < position.bytes:
                raise FormatError(f"{path} holds {size} bytes but the metadata commits {position.bytes}")
            check_header(os.pread(fd, len(HEADER), 0), path)
            recs, crc = None, position.index_crc
            if position.index is not None and not parse:
                try:
                    index = IndexFile.open(folder, position.index, read_only=read_only)
                    recs, last = checked_index(fd, path, index, position)
                except IndexDamagedError as exc:
                    if index is not None:
                        index.close()
                        index = None
                    warnings.warn(EpisodeIndexWarning(f"{exc}; {'reading' if read_only else 'rebuilding'} the "
                                                      f"index from {path}"), stacklevel=4)
            if recs is None:
                raw = os.pread(fd, position.bytes - len(HEADER), len(HEADER))
                rows, _ = decode(raw, path)
                if rows.shape[1] != position.records:
                    raise FormatError(f"{path}: {rows.shape[1]} episode records where the metadata commits "
                                      f"{position.records}")
                recs = np.concatenate([rows, np.stack(line_ranges(raw, len(HEADER)))])
                last = recs[:, -1].copy() if recs.shape[1] else None
                if parse and position.index is not None and position.index_crc is not None:
                    with IndexFile.open(folder, position.index, read_only=True) as checked:
                        held, got = checked.read_crc(0, position.records, EMPTY_CRC)
                        if not np.array_equal(held, recs):
                            raise IndexDamagedError(f"{checked.path} does not match the lines of {path}")
                        check_crc(got, position.index_crc, checked.path, 0, position.records)
                crc = None  # the index (if any) was not read
                if not read_only:
                    index = IndexFile.create(folder, index_name(position.generation), recs)
                    crc = index_crc(recs)
                recs = recs[:, position.skip:]
            if not read_only:
                if size > position.bytes:  # a crash between the log append and the metadata commit
                    os.ftruncate(fd, position.bytes)
                    os.fsync(fd)
                assert index is not None
                index.truncate(position.records)
                remove_unnamed(folder, position.file)
        except BaseException:
            os.close(fd)
            if index is not None:
                index.close()
            raise
        store = DataStore()
        store.attach(path, fd)
        store.locate(recs[0], recs[5], recs[6])
        log = cls(folder, position, fd, read_only=read_only, last=last, index=index, crc=crc, store=store)
        return log, recs[:5]

    def read_new(self, position: LogPosition) -> np.ndarray | None:
        """A reader: the records committed since :attr:`position` as columns ``(7, E)`` (their lines'
        byte ranges in the last two), or ``None`` if ``position`` names another file (compacted: open it
        anew).

        Raises:
            FormatError: damaged records, or fewer bytes than committed.
        """
        old = self.position
        if (old is None or position.file != old.file or position.bytes < old.bytes
                or position.records < old.records):
            return None
        path = self.folder / position.file
        n = position.records - old.records
        if position.index is not None and position.index_crc is not None and not self._index_damaged:
            try:
                if self._index is None:  # a writer has built the index since
                    self._index = IndexFile.open(self.folder, position.index, read_only=True)
                if self._crc is None:  # the index was not read so far: check all of it once
                    recs = checked_new(self._index, LogPosition(old.file, len(HEADER), 0, 0), position, EMPTY_CRC,
                                       None)[:, old.records:]
                else:
                    recs = checked_new(self._index, old, position, self._crc, self._last)
                self._advance(position, recs, position.index_crc)
                return recs
            except IndexDamagedError as exc:
                self._index_damaged = True  # the log's new lines are parsed from now on (only those)
                warnings.warn(EpisodeIndexWarning(f"{exc}; reading the new records from {path}"), stacklevel=5)
        raw = os.pread(self._fd, position.bytes - old.bytes, old.bytes)
        if len(raw) != position.bytes - old.bytes:
            raise FormatError(f"{path} holds fewer bytes than the metadata commits ({position.bytes})")
        rows, _ = decode(raw, path)
        if rows.shape[1] != n:
            raise FormatError(f"{path}: {old.records + rows.shape[1]} episode records where the metadata commits "
                              f"{position.records}")
        recs = np.concatenate([rows, np.stack(line_ranges(raw, old.bytes))])
        self._advance(position, recs, None)
        return recs

    def _advance(self, position: LogPosition, recs: np.ndarray, crc: int | None) -> None:
        self.position, self._crc = position, crc
        if recs.shape[1]:
            self._last = recs[:, -1].copy()

    # -- writer ----------------------------------------------------------------------------
    def prepare(self, table: EpisodeTable, *, may_compact: bool) -> LogPosition:
        """Make the log and index hold ``table``'s closed episodes and make that durable; returns the
        position for the metadata to commit (then call :meth:`committed`). Appends the episodes closed
        since the last commit, or, if ``may_compact``, writes the kept ones to the next generation when
        dead records outnumber them. Nothing is committed until the metadata names the result.

        ``table`` is a suffix of the closed episodes: the log holds its newest ones or will after
        this call, so ``skip`` is the records before its first. Compact only for the writer's own
        table (``may_compact``), never for a ring's shrunk view
        (:func:`~trajstore.replay_buffer.commit.view_before_overwrite`): the next commit of the
        writer's table names episodes that the view dropped, which must still be in the log.

        Raises:
            OSError: the write failed (the committed part of the log is left as it was).
        """
        assert self._index is not None
        rows = table.closed_rows_after(self._last_id)
        committed = self.position or LogPosition(self._file, len(HEADER), 0, 0)
        records = committed.records + rows.shape[1]
        dead = records - len(table)
        last_id = max(self._last_id, int(rows[0, -1]) if rows.shape[1] else -1)
        if may_compact and dead > max(len(table), MIN_DEAD - 1):
            return self._compact(table, committed, last_id)
        end = committed.bytes
        recs, payload = _with_ranges(rows, encode_lines(rows, table.store.get_many(rows[0])), end)
        if rows.shape[1]:
            if os.fstat(self._fd).st_size != end:
                os.ftruncate(self._fd, end)  # bytes of a commit whose metadata write failed
            write_all(self._fd, payload, end)
            datasync(self._fd)
        assert self._crc is not None
        crc = self._index.append(committed.records, recs, self._crc)  # after the log: a record always has its line
        self._pending = (last_id, recs, None, table.store)
        return LogPosition(committed.file, end + len(payload), records, dead, self._index.path.name, crc)

    def _compact(self, table: EpisodeTable, committed: LogPosition, last_id: int) -> LogPosition:
        rows = table.closed_rows_after(-1)
        store = table.store
        lo, hi = store.located_span(int(rows[0, 0])) if rows.shape[1] else (0, 0)
        kept = store.read_span(lo, hi) if hi > lo else b""  # the kept lines already in the log, as they are
        located = kept.count(b"\n")
        new = rows[:, located:]
        lines = [kept] + encode_lines(new, store.get_many(new[0]))
        payload = HEADER + b"".join(lines)
        recs = np.concatenate([rows, np.stack(line_ranges(payload[len(HEADER):], len(HEADER)))])
        generation = committed.generation + 1
        name = log_name(generation)
        fd = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, payload, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        IndexFile.create(self.folder, index_name(generation), recs).close()  # fsyncs the folder too
        crc = index_crc(recs)
        self._pending = (last_id, recs, name, store)
        return LogPosition(name, len(payload), rows.shape[1], 0, index_name(generation), crc)

    def committed(self, position: LogPosition) -> None:
        """The metadata now names ``position`` (the result of the last :meth:`prepare`): switch to a
        compacted file and remove the old one; the data of the lines written is now read from the log."""
        last_id, recs, compacted, store = self._pending
        self.store = store  # the writer's table's (a snapshot of it forks the store when it diverges)
        if compacted is not None and position.file == compacted != self._file:
            old, old_index = self.folder / self._file, self._index
            fd = os.open(self.folder / position.file, os.O_RDWR)
            index = IndexFile.open(self.folder, index_name(position.generation), read_only=False)
            os.close(self._fd)
            self._fd, self._file, self._index = fd, position.file, index
            old.unlink(missing_ok=True)
            if old_index is not None:
                old_index.close()
                old_index.path.unlink(missing_ok=True)
            store.relocate(self.folder / position.file, fd, recs[0], recs[5], recs[6])
        else:
            if not store.attached:
                store.attach(self.folder / self._file, self._fd)
            store.locate(recs[0], recs[5], recs[6])
        self._pending = (last_id, np.zeros((7, 0), np.int64), None, store)
        self.position, self._last_id, self._crc = position, last_id, position.index_crc
        if recs.shape[1]:
            self._last = recs[:, -1].copy()

    def close(self, *, sources: bool = False) -> None:
        """Close the files; ``sources``: also the :attr:`store`'s descriptor (else it is closed when the
        tables that read through it are collected: a reader that moves to a compacted log, or that reads
        the table after closing the log, keeps reading their data)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._index is not None:
            self._index.close()
        if sources:
            self.store.close()
