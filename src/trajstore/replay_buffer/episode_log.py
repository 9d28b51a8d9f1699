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

Order of a commit: the storage is flushed, new records are written at ``bytes`` and fsynced,
then ``trajstore.json`` is replaced atomically. A crash in between leaves bytes past ``bytes``:
readers never read past it, and the next writer truncates them when it opens the folder.

Compaction: a ring's dropped episodes stay in the log as dead records. When they outnumber the
live ones (and are at least :data:`MIN_DEAD`), the commit writes the live records to the next
generation's file instead (fsync the file and the folder), ``trajstore.json`` names it, and the
old file is removed after that: amortised O(1) per episode, never a rewrite on every commit. A
crash before the metadata names the new file leaves an unnamed file that the next writer removes;
a reader that finds the file its metadata names gone re-reads the metadata (the writer removes
a file only after committing metadata that no longer names it).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._fs import fsync_dir
from trajstore._json import MAX_STORED_DEPTH, loads_bounded
from trajstore.errors import FormatError
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.metadata import META_FILE, read_meta

LOG_FORMAT = "trajstore.episode_log"
LOG_VERSION = 1
HEADER = json.dumps({"format": LOG_FORMAT, "version": LOG_VERSION}, separators=(",", ":")).encode() + b"\n"
#: Dead records (dropped by a ring) below this never trigger a compaction.
MIN_DEAD = 64
_NAME = re.compile(r"episodes\.(\d{6})\.log")
_FIELDS = ("id", "start", "stop", "final", "interrupted")
#: Deepest nesting read in the log: the list of records, a record, its data, and a stored value
#: (:data:`~trajstore._json.MAX_STORED_DEPTH` levels and one more for its innermost value), with room.
MAX_LOG_DEPTH = MAX_STORED_DEPTH + 8


def log_name(generation: int) -> str:
    return f"episodes.{generation:06d}.log"


@dataclass(frozen=True)
class LogPosition:
    """What ``trajstore.json`` commits of the log (see the module docstring)."""

    file: str
    bytes: int
    records: int
    skip: int

    @property
    def generation(self) -> int:
        match = _NAME.fullmatch(self.file)
        assert match is not None
        return int(match.group(1))

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "bytes": self.bytes, "records": self.records, "skip": self.skip}

    @classmethod
    def from_json(cls, data: Any, folder: Path) -> "LogPosition":
        """Raises FormatError: not a log entry, a file name that is not ``episodes.NNNNNN.log``, bad counts."""
        try:
            pos = cls(data["file"], data["bytes"], data["records"], data["skip"])
        except (KeyError, TypeError):
            raise FormatError(f"{folder / META_FILE}: bad episode log entry {data!r:.200}") from None
        counts = (pos.bytes, pos.records, pos.skip)
        if (not isinstance(pos.file, str) or not _NAME.fullmatch(pos.file) or not all(type(v) is int for v in counts)
                or pos.bytes < len(HEADER) or not 0 <= pos.skip <= pos.records):
            raise FormatError(f"{folder / META_FILE}: bad episode log entry {data!r:.200}")
        return pos


def encode(rows: np.ndarray, data: list[dict[str, Any] | None]) -> bytes:
    """Log lines of closed episodes given as int64 columns ``(5, E)`` and their data."""
    lines = [json.dumps({"id": i, "start": s, "stop": e, "final": f, "interrupted": bool(x), "data": d or {}},
                        separators=(",", ":"), allow_nan=False)
             for (i, s, e, f, x), d in zip(rows.T.tolist(), data)]
    return "".join(line + "\n" for line in lines).encode()


def decode(raw: bytes, path: Path) -> tuple[np.ndarray, list[dict[str, Any] | None]]:
    """Columns ``(5, E)`` and data of the log lines in ``raw`` (whole lines only).

    Raises:
        FormatError: a line that is not a record, nested too deep, a number too long (names the file).
    """
    if not raw:
        return np.zeros((5, 0), np.int64), []
    if not raw.endswith(b"\n"):
        raise FormatError(f"{path}: damaged episode log (the committed part does not end with a whole line)")
    records = loads_bounded(b"[" + raw[:-1].replace(b"\n", b",") + b"]", source=str(path), max_depth=MAX_LOG_DEPTH)
    try:
        rows = np.array([[r[k] for k in _FIELDS] for r in records], np.int64).reshape(-1, 5).T
        data = [r["data"] or None for r in records]
        if any(type(r[k]) is not int for r in records for k in _FIELDS[:4]):
            raise ValueError("ids, steps and final numbers must be integers")
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise FormatError(f"{path}: damaged episode log ({type(exc).__name__}: {exc})") from None
    return np.ascontiguousarray(rows), data


#: fdatasync where the OS has it (the log's length changes with each append, so it is synced too).
_datasync = getattr(os, "fdatasync", os.fsync)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


class EpisodeLog:
    """The open log of one buffer folder: a writer appends and compacts, a reader follows the commits.

    Attributes:
        position: what the last metadata read or written commits, or ``None`` for a writer's log not
            yet named by any metadata (a new folder, or one of an older format being migrated).
    """

    def __init__(self, folder: Path, position: LogPosition | None, fd: int, *, read_only: bool, last_id: int):
        self.folder, self.position, self.read_only = folder, position, read_only
        self._fd = fd
        self._file = position.file if position is not None else log_name(0)
        self._last_id = last_id  # id of the newest record in the file (committed part), -1: none
        self._pending_last_id = last_id  # the same after the last prepare()

    @classmethod
    def start(cls, folder: Path) -> "EpisodeLog":
        """A writer's new, empty log (generation 0) for a folder whose metadata names none yet;
        unnamed log files (left by a crash) are removed first."""
        remove_unnamed(folder, None)
        fd = os.open(folder / log_name(0), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, HEADER, 0)
            os.fsync(fd)
            fsync_dir(folder)
        except BaseException:
            os.close(fd)
            raise
        return cls(folder, None, fd, read_only=False, last_id=-1)

    @classmethod
    def open(cls, folder: Path, position: LogPosition, *, read_only: bool,
             ) -> tuple["EpisodeLog", np.ndarray, list[dict[str, Any] | None]]:
        """Open the log ``position`` names and read its committed records (columns ``(5, E)`` and data).

        A writer truncates an uncommitted tail and removes unnamed log files.

        Raises:
            FileNotFoundError: the file is gone (a reader raced a compaction: read the metadata again).
            FormatError: a log shorter than committed, a bad header, a damaged record, a wrong count.
        """
        path = folder / position.file
        fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size < position.bytes:
                raise FormatError(f"{path} holds {size} bytes but the metadata commits {position.bytes}")
            raw = os.pread(fd, position.bytes, 0)
            head = raw[:len(HEADER)]
            try:
                header = loads_bounded(head, source=str(path))
                ok = header.get("format") == LOG_FORMAT and isinstance(header.get("version"), int)
            except (FormatError, AttributeError):
                ok = False
            if not ok:
                raise FormatError(f"{path} is not a trajstore episode log")
            if header["version"] > LOG_VERSION:
                raise FormatError(f"{path}: episode log version {header['version']} is newer than this trajstore "
                                  f"reads ({LOG_VERSION}); upgrade trajstore")
            rows, data = decode(raw[len(HEADER):], path)
            if rows.shape[1] != position.records:
                raise FormatError(f"{path}: {rows.shape[1]} episode records where the metadata commits "
                                  f"{position.records}")
            if not read_only:
                if size > position.bytes:  # a crash between the log append and the metadata commit
                    os.ftruncate(fd, position.bytes)
                    os.fsync(fd)
                remove_unnamed(folder, position.file)
        except BaseException:
            os.close(fd)
            raise
        last_id = int(rows[0, -1]) if rows.shape[1] else -1
        return cls(folder, position, fd, read_only=read_only, last_id=last_id), rows, data

    def read_new(self, position: LogPosition) -> tuple[np.ndarray, list[dict[str, Any] | None]] | None:
        """A reader: the records committed since :attr:`position`, or ``None`` if ``position`` names
        another file (compacted: open it anew).

        Raises:
            FormatError: damaged records, or fewer bytes than committed.
        """
        old = self.position
        if old is None or position.file != old.file or position.bytes < old.bytes:
            return None
        path = self.folder / position.file
        raw = os.pread(self._fd, position.bytes - old.bytes, old.bytes)
        if len(raw) != position.bytes - old.bytes:
            raise FormatError(f"{path} holds fewer bytes than the metadata commits ({position.bytes})")
        rows, data = decode(raw, path)
        if rows.shape[1] != position.records - old.records:
            raise FormatError(f"{path}: {old.records + rows.shape[1]} episode records where the metadata commits "
                              f"{position.records}")
        self.position = position
        return rows, data

    # -- writer ----------------------------------------------------------------------------
    def prepare(self, table: EpisodeTable, *, may_compact: bool) -> LogPosition:
        """Make the log hold ``table``'s closed episodes and make that durable; returns the position
        for the metadata to commit (then call :meth:`committed`). Appends the episodes closed since
        the last commit, or, if ``may_compact``, writes the kept ones to the next generation when dead
        records outnumber them. Nothing is committed until the metadata names the result.

        ``table`` is a suffix of the closed episodes: the log holds its newest ones or will after
        this call, so ``skip`` is the records before its first. Compact only for the writer's own
        table (``may_compact``), never for a ring's shrunk view
        (:func:`~trajstore.replay_buffer.metadata.view_before_overwrite`): the next commit of the
        writer's table names episodes that the view dropped, which must still be in the log.

        Raises:
            OSError: the write failed (the committed part of the log is left as it was).
        """
        rows, data = table.closed_after(self._last_id)
        committed = self.position or LogPosition(self._file, len(HEADER), 0, 0)
        records = committed.records + rows.shape[1]
        dead = records - len(table)
        self._pending_last_id = max(self._last_id, int(rows[0, -1]) if rows.shape[1] else -1)
        if may_compact and dead > max(len(table), MIN_DEAD - 1):
            return self._compact(table, committed)
        end = committed.bytes
        if rows.shape[1]:
            payload = encode(rows, data)
            if os.fstat(self._fd).st_size != end:
                os.ftruncate(self._fd, end)  # bytes of a commit whose metadata write failed
            _write_all(self._fd, payload, end)
            _datasync(self._fd)
            end += len(payload)
        return LogPosition(committed.file, end, records, dead)

    def _compact(self, table: EpisodeTable, committed: LogPosition) -> LogPosition:
        rows, data = table.closed_after(-1)
        generation = committed.generation + 1
        name = log_name(generation)
        payload = HEADER + encode(rows, data)
        fd = os.open(self.folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, payload, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.folder)
        return LogPosition(name, len(payload), rows.shape[1], 0)

    def committed(self, position: LogPosition) -> None:
        """The metadata now names ``position`` (the result of the last :meth:`prepare`): switch to a
        compacted file and remove the old one."""
        if position.file != self._file:
            old = self.folder / self._file
            fd = os.open(self.folder / position.file, os.O_RDWR)
            os.close(self._fd)
            self._fd, self._file = fd, position.file
            old.unlink(missing_ok=True)
        self.position, self._last_id = position, self._pending_last_id

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def remove_unnamed(folder: Path, named: str | None) -> None:
    """Remove the log files of ``folder`` other than ``named`` (left by a crash before a commit named them)."""
    for entry in os.scandir(folder):
        if _NAME.fullmatch(entry.name) and entry.name != named:
            os.unlink(entry.path)


def load_table(folder: Path, entry: Any, *, read_only: bool, log: EpisodeLog | None = None,
               previous: EpisodeTable | None = None) -> tuple[EpisodeTable, EpisodeLog | None]:
    """The committed episode table that ``entry`` (the ``"episodes"`` of ``trajstore.json``) describes,
    and the open log. A reader passes its ``log`` and ``previous`` table to read only the records
    committed since (``previous`` is left unchanged); format 1 and 2 entries hold the whole table.

    Raises:
        FileNotFoundError: the log is gone (a reader raced a compaction: read the metadata again).
        FormatError: a bad entry, a damaged or short log.
    """
    if not isinstance(entry, dict):
        raise FormatError(f"{folder / META_FILE}: bad episode table {entry!r:.200}")
    try:
        if "log" not in entry:  # format 1 or 2
            return EpisodeTable.from_json(entry), log
        position = LogPosition.from_json(entry["log"], folder)
        counters = {k: v for k, v in entry.items() if k != "log"}
        new = log.read_new(position) if log is not None and log.read_only and previous is not None else None
        if new is not None:
            table = previous.with_appended(*new)  # type: ignore[union-attr]
            table.set_counters(counters)
        else:
            fresh, rows, data = EpisodeLog.open(folder, position, read_only=read_only)
            if log is not None:
                log.close()
            log = fresh
            table = EpisodeTable.from_columns(rows, data, counters)
        if not table.keep_last(position.records - position.skip):  # more than a reader's table has kept
            return load_table(folder, entry, read_only=read_only, log=log)
    except (ValueError, TypeError, KeyError) as exc:
        if isinstance(exc, FormatError):
            raise
        # The counters in trajstore.json and the log's records disagree, or one of them is malformed.
        raise FormatError(f"{folder / META_FILE}: bad episode table (with its episode log): {exc}") from None
    return table, log


#: Times a reader reads the metadata again when the log it names was removed meanwhile (a compaction).
READ_ATTEMPTS = 4


def read_committed(folder: Path, *, read_only: bool, log: EpisodeLog | None = None,
                   previous: EpisodeTable | None = None) -> tuple[dict[str, Any], EpisodeTable, EpisodeLog | None]:
    """``trajstore.json`` with the episode table and log it commits (see :func:`load_table`), read
    again when a compaction removed the log between the two reads.

    Raises:
        FormatError: see :func:`~trajstore.replay_buffer.metadata.read_meta` and :func:`load_table`; also
            a log file that stays missing.
    """
    for _ in range(READ_ATTEMPTS):
        meta = read_meta(folder)
        try:
            table, log = load_table(folder, meta.get("episodes"), read_only=read_only, log=log, previous=previous)
            return meta, table, log
        except FileNotFoundError:
            continue
    raise FormatError(f"{folder}: the episode log named by trajstore.json ({meta['episodes']['log']['file']}) "
                      "does not exist")
