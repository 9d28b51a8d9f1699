"""The episode index: a binary twin of the episode log, so that a folder of a million episodes opens
without parsing the log. File I/O and checks only; the log itself is
:mod:`~trajstore.replay_buffer.episode_log`.

Why: the log is JSON lines (one per closed episode); opening a folder parsed all of it and made a
Python dict of every episode's data (11-12 s and ~1 GiB for 1,000,000 episodes, an 80 MiB log).
The index holds what the episode table needs as fixed-width integers, read with one ``pread`` into
a NumPy array; the data stays in the log and is parsed when asked for, by byte offset
(:mod:`~trajstore.replay_buffer.episode_store`).

On disk, ``episodes.<generation>.idx`` next to ``episodes.<generation>.log`` (the same generation):
a 32-byte header (``b"TSEPIDX\\0"``, then little-endian int64 version 1, fields per record 7, and 0),
then one record per log record, in log order: little-endian int64 ``(id, start, stop, final,
interrupted, offset, length)`` (56 bytes), ``offset``/``length`` the byte range of the record's line
in the log, its newline included. Record ``k`` of the index describes line ``k`` of the log.

``trajstore.json`` names it beside the log (``"episodes": {"log": {..., "index":
"episodes.000002.idx"}}``) and commits it by the log's ``records``: readers read the first
``records`` records (only those from ``skip`` on: the dead ones are never read) and trust nothing past
them. A commit appends the new records after the log's new lines, both fsynced before the metadata
is replaced; a crash in between leaves bytes past the committed count, which readers ignore and the
next writer truncates. A compaction writes the next generation's log and index together.

Old folders: a log that the metadata names without an index (written by trajstore before the index,
or by such a writer since) is read as before (parsed); a writer then builds its index at open
(written to a temporary file, fsynced, renamed) and commits the metadata naming it. An older
trajstore ignores the ``"index"`` key (the log is unchanged) and, writing, commits metadata without
it: the index left behind is then not named, so no reader trusts it, and the next writer rebuilds
it. That is why adding the index changes neither the log's version nor ``trajstore.json``'s.

The committed index is verifiable: ``"index_crc32"`` beside ``"index"`` in the log entry is the
CRC-32 (:func:`zlib.crc32`) of the index file's committed bytes (the header and the first ``records``
records), continued over each commit's appended records (``crc = zlib.crc32(new_records, crc)``) and
computed anew when an index is written whole (a compaction, a rebuild). A log entry naming an index
without a crc (written by this format before the crc) is read as one without an index: parsed, and a
writer rebuilds the index and commits its crc. An older trajstore ignores the key.

Checks at open (:func:`check_records` and :func:`check_index_rows`, O(records) in NumPy, and the crc
over all committed records, dead ones too; for 1,000,000 records on a loaded 2-core machine the crc
takes ~10 ms, the table checks ~20 ms): the header (exactly :data:`HEADER`); the records' byte
ranges tile the committed log exactly (each starts where the previous one ends, the first where the
log header ends, the last ends at the committed ``bytes``); the first and last live records agree with their log
lines; the columns are a consistent episode table
(:func:`~trajstore.replay_buffer.episodes.check_rows`); and the crc of the committed bytes is the one
committed. A reader's incremental read (of the records committed since) checks the new records the
same way, continuing the crc from the one it checked before. A failed check raises
:class:`IndexDamagedError` (naming the ``.idx`` file): a reader then parses the log (and warns), a
writer rebuilds the index. Any damage of one burst of up to 32 bits in the committed bytes (a bit
flip anywhere, a wrong byte) is caught by the crc even where the table stays consistent.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

import numpy as np

from trajstore._fs import fsync_dir
from trajstore.errors import FormatError
from trajstore.replay_buffer.episodes import check_rows

MAGIC = b"TSEPIDX\x00"
INDEX_VERSION = 1
FIELDS = ("id", "start", "stop", "final", "interrupted", "offset", "length")
WIDTH = len(FIELDS)
HEADER = MAGIC + np.array([INDEX_VERSION, WIDTH, 0], "<i8").tobytes()
RECORD_BYTES = 8 * WIDTH
#: The crc of an index without records (its header): where a new index's crc starts.
EMPTY_CRC = zlib.crc32(HEADER)
_NAME = re.compile(r"episodes\.(\d{6})\.idx")

__all__ = ["EMPTY_CRC", "HEADER", "INDEX_VERSION", "EpisodeIndexWarning", "IndexDamagedError", "IndexFile", "check_crc",
           "check_index_rows", "datasync", "index_crc", "index_name", "line_ranges", "write_all"]


class IndexDamagedError(FormatError):
    """An episode index that does not match its log (short, a bad header, ranges that do not tile it)."""


class EpisodeIndexWarning(UserWarning):
    """A damaged episode index was set aside: the log was parsed instead (a reader) or the index rebuilt
    from it (a writer). The message names the file and what was wrong."""


def index_name(generation: int) -> str:
    return f"episodes.{generation:06d}.idx"


def is_index_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def encode_records(rows: np.ndarray) -> bytes:
    """On-disk records of int64 columns ``(7, E)`` (:data:`FIELDS` order)."""
    return np.ascontiguousarray(rows.T, dtype="<i8").tobytes()


def index_crc(rows: np.ndarray, crc: int = EMPTY_CRC) -> int:
    """The crc (unsigned 32-bit int) of an index whose committed bytes are those of crc ``crc``
    (default: the header alone) followed by the records of ``rows`` (int64 ``(7, E)``)."""
    return zlib.crc32(encode_records(rows), crc)


def line_ranges(raw: bytes, base: int) -> tuple[np.ndarray, np.ndarray]:
    """Byte offsets (from ``base``) and lengths, int64 ``(E,)``, of the whole lines in ``raw``."""
    ends = np.flatnonzero(np.frombuffer(raw, np.uint8) == 10).astype(np.int64) + 1
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)[:len(ends)]  # no lines: no starts either
    return starts + base, ends - starts


def check_records(rows: np.ndarray, start: int, stop: int, path: Path) -> None:
    """Raise :class:`IndexDamagedError` unless the byte ranges of ``rows`` (int64 ``(7, E)``) tile
    ``[start, stop)`` of the log, in order."""
    off, length = rows[5], rows[6]
    if rows.shape[1] == 0:
        if start != stop:
            raise IndexDamagedError(f"{path}: no records for log bytes {start}..{stop}")
        return
    bad = np.flatnonzero(off[1:] != off[:-1] + length[:-1])
    if off[0] != start or off[-1] + length[-1] != stop or bad.size or np.any(length <= 1):
        at = f"record {int(bad[0]) + 1} " if bad.size else ""
        raise IndexDamagedError(f"{path}: {at}byte ranges do not tile the committed log bytes {start}..{stop}")


def check_index_rows(rows: np.ndarray, last: np.ndarray | None, path: Path, first: int) -> None:
    """Raise :class:`IndexDamagedError` (naming ``path``) unless the episode columns of ``rows`` (int64
    ``(7, E)``, records ``first, ...``) are a consistent episode table after record ``last`` (its
    columns, int64 ``(>= 5,)``, or ``None``): see :func:`~trajstore.replay_buffer.episodes.check_rows`."""
    try:
        check_rows(rows[:5], None if last is None else last[:5])
    except ValueError as exc:
        raise IndexDamagedError(f"{path}: records {first}..{first + rows.shape[1] - 1}: {exc}") from None


def check_crc(got: int, want: int, path: Path, first: int, stop: int) -> None:
    """Raise :class:`IndexDamagedError` unless the crc ``got`` of records ``[first, stop)`` (and all before)
    of the index at ``path`` is ``want``, the one ``trajstore.json`` commits."""
    if got != want:
        raise IndexDamagedError(f"{path}: records {first}..{stop - 1} do not have the crc trajstore.json "
                                f"commits (crc32 {got:#010x}, committed {want:#010x})")


class IndexFile:
    """One open index file: a writer appends and truncates, a reader reads committed records."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd

    @classmethod
    def create(cls, folder: Path, name: str, rows: np.ndarray) -> "IndexFile":
        """Write a whole index (header and ``rows``, int64 ``(7, E)``) atomically: a temporary file,
        fsynced, renamed over ``name``, the folder fsynced. Returns it open for writing."""
        path, tmp = folder / name, folder / (name + ".tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, HEADER + encode_records(rows), 0)
            os.fsync(fd)
            os.replace(tmp, path)
            fsync_dir(folder)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        return cls(path, fd)

    @classmethod
    def open(cls, folder: Path, name: str, *, read_only: bool) -> "IndexFile":
        """Open ``name`` and check its header.

        Raises:
            IndexDamagedError: missing, not an episode index, or of another version (a newer trajstore's
                index, or a damaged header: the log is read instead either way).
        """
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
        except FileNotFoundError:
            raise IndexDamagedError(f"{path} (the episode index trajstore.json names) does not exist") from None
        head = os.pread(fd, len(HEADER), 0)
        version = int(np.frombuffer(head[8:16], "<i8")[0]) if len(head) == len(HEADER) else -1
        if head[:8] != MAGIC or version < 1 or int(np.frombuffer(head[16:24], "<i8")[0]) != WIDTH:
            os.close(fd)
            raise IndexDamagedError(f"{path} is not a trajstore episode index (bad header)")
        if head != HEADER:
            os.close(fd)
            raise IndexDamagedError(f"{path}: episode index version {version} (reserved field "
                                    f"{int(np.frombuffer(head[24:32], '<i8')[0])}) where this trajstore reads "
                                    f"{INDEX_VERSION} (0)")
        return cls(path, fd)

    def read_crc(self, first: int, count: int, crc: int) -> tuple[np.ndarray, int]:
        """Records ``[first, first + count)`` as :meth:`read` gives them, and the crc of the bytes up to
        their end given ``crc``, that of the bytes before record ``first`` (:data:`EMPTY_CRC` for
        ``first == 0``): compare it with the committed one (:func:`check_crc`).

        Raises:
            IndexDamagedError: the file holds fewer records.
        """
        raw = self._read_raw(first, count)
        return np.frombuffer(raw, "<i8").reshape(count, WIDTH).T, zlib.crc32(raw, crc)

    def read(self, first: int, count: int) -> np.ndarray:
        """Records ``[first, first + count)`` as int64 columns ``(7, count)`` (a read-only view of the bytes
        read: column ``k`` is record ``k``; copy what is kept).

        Raises:
            IndexDamagedError: the file holds fewer records.
        """
        return np.frombuffer(self._read_raw(first, count), "<i8").reshape(count, WIDTH).T

    def _read_raw(self, first: int, count: int) -> bytes:
        want = count * RECORD_BYTES
        # the file's size first: a hostile record count in trajstore.json must not become a huge allocation
        fits = len(HEADER) + (first + count) * RECORD_BYTES <= os.fstat(self.fd).st_size
        raw = os.pread(self.fd, want, len(HEADER) + first * RECORD_BYTES) if count and fits else b""
        if len(raw) != want:
            held = max(0, (os.fstat(self.fd).st_size - len(HEADER)) // RECORD_BYTES)
            raise IndexDamagedError(f"{self.path} holds {held} records where the metadata commits "
                                    f"{first + count}")
        return raw

    def append(self, records: int, rows: np.ndarray, crc: int) -> int:
        """Write ``rows`` (int64 ``(7, E)``) as records ``records, ...``, dropping any past them first
        (a commit whose metadata write failed), and make them durable. ``crc``: that of the first
        ``records`` records (see the module docstring); returns the crc with ``rows``."""
        end = len(HEADER) + records * RECORD_BYTES
        size = os.fstat(self.fd).st_size
        if size == end and not rows.shape[1]:
            return crc
        if size != end:
            os.ftruncate(self.fd, end)
        data = encode_records(rows)
        if rows.shape[1]:
            write_all(self.fd, data, end)
        datasync(self.fd)
        return zlib.crc32(data, crc)

    def truncate(self, records: int) -> None:
        """Drop the bytes past record ``records`` (a crash between the index append and the commit)."""
        end = len(HEADER) + records * RECORD_BYTES
        if os.fstat(self.fd).st_size > end:
            os.ftruncate(self.fd, end)
            os.fsync(self.fd)

    def __enter__(self) -> "IndexFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


#: fdatasync where the OS has it (a file's length changes with each append, so it is synced too).
datasync = getattr(os, "fdatasync", os.fsync)


def write_all(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at byte ``offset`` of ``fd``."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n
