"""The episode log's format: file names, the committed position ``trajstore.json`` names, and the
JSON lines of the records (see :mod:`~trajstore.replay_buffer.episode_log`), and the checks of a log's
header and of its index against it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._json import MAX_STORED_DEPTH, loads_bounded
from trajstore.errors import FormatError
from trajstore.replay_buffer.episode_index import (EMPTY_CRC, IndexDamagedError, IndexFile, check_crc,
                                                   check_index_rows, check_records, index_name, is_index_name)
from trajstore.replay_buffer.metadata import META_FILE

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
    """What ``trajstore.json`` commits of the log (see the module docstring of
    :mod:`~trajstore.replay_buffer.episode_log`); ``index`` names the episode index of the same
    generation, ``None`` for a log written before the index (or since by a writer that lacks it);
    ``index_crc`` is the crc32 of its committed bytes (``"index_crc32"``; see
    :mod:`~trajstore.replay_buffer.episode_index`): an entry naming an index without it is read as one
    without an index."""

    file: str
    bytes: int
    records: int
    skip: int
    index: str | None = None
    index_crc: int | None = None

    @property
    def generation(self) -> int:
        match = _NAME.fullmatch(self.file)
        assert match is not None
        return int(match.group(1))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "bytes": self.bytes, "records": self.records, "skip": self.skip}
        if self.index is not None and self.index_crc is not None:
            out["index"], out["index_crc32"] = self.index, self.index_crc
        return out

    @classmethod
    def from_json(cls, data: Any, folder: Path) -> "LogPosition":
        """Raises FormatError: not a log entry, a file name that is not ``episodes.NNNNNN.log``, bad counts,
        an index that is not ``episodes.NNNNNN.idx`` of the same generation, a crc that is not a 32-bit
        unsigned int."""
        try:
            crc = data.get("index_crc32")
            pos = cls(data["file"], data["bytes"], data["records"], data["skip"],
                      data.get("index") if crc is not None else None, crc if data.get("index") is not None else None)
        except (KeyError, TypeError, AttributeError):
            raise FormatError(f"{folder / META_FILE}: bad episode log entry {data!r:.200}") from None
        counts = (pos.bytes, pos.records, pos.skip)
        if (not isinstance(pos.file, str) or not _NAME.fullmatch(pos.file) or not all(type(v) is int for v in counts)
                or pos.bytes < len(HEADER) or not 0 <= pos.skip <= pos.records
                or (pos.index is not None and pos.index != index_name(pos.generation))
                or (crc is not None and not (type(crc) is int and 0 <= crc < 1 << 32))):
            raise FormatError(f"{folder / META_FILE}: bad episode log entry {data!r:.200}")
        return pos


def encode_lines(rows: np.ndarray, data: list[dict[str, Any] | None]) -> list[bytes]:
    """Log lines (newline included) of closed episodes given as int64 columns ``(5, E)`` and their data."""
    return [(json.dumps({"id": i, "start": s, "stop": e, "final": f, "interrupted": bool(x), "data": d or {}},
                        separators=(",", ":"), allow_nan=False) + "\n").encode()
            for (i, s, e, f, x), d in zip(rows.T.tolist(), data)]


def encode(rows: np.ndarray, data: list[dict[str, Any] | None]) -> bytes:
    """:func:`encode_lines` joined."""
    return b"".join(encode_lines(rows, data))


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


def remove_unnamed(folder: Path, named: str | None) -> None:
    """Remove the log and index files of ``folder`` other than log ``named`` and its index (left by a crash
    before a commit named them, or an index an older writer left unnamed)."""
    keep = {named, index_name(int(_NAME.fullmatch(named).group(1)))} if named else set()  # type: ignore[union-attr]
    for entry in os.scandir(folder):
        name = entry.name
        if ((_NAME.fullmatch(name) or is_index_name(name) or is_index_name(name.removesuffix(".tmp")))
                and name not in keep):
            os.unlink(entry.path)


def check_header(head: bytes, path: Path) -> None:
    """Raise FormatError unless ``head`` is the header line of an episode log this trajstore reads."""
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


def checked_index(fd: int, path: Path, index: IndexFile, position: LogPosition
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    """The live records ``(7, E)`` of ``index`` (the committed one of ``position``), checked against
    the log and the committed crc (see :mod:`~trajstore.replay_buffer.episode_index`), and the columns
    ``(7,)`` of the log's newest record (``None``: none). Reads every committed record (the dead ones
    too: the crc covers them).

    Raises:
        IndexDamagedError: see :func:`~trajstore.replay_buffer.episode_index.check_records`; a first or last
            live record that differs from its log line; inconsistent columns; another crc.
    """
    assert position.index_crc is not None
    recs, crc = index.read_crc(0, position.records, EMPTY_CRC)
    check_records(recs, len(HEADER), position.bytes, index.path)
    live = recs[:, position.skip:]
    for k in {0, live.shape[1] - 1} if live.shape[1] else ():
        line = os.pread(fd, int(live[6, k]), int(live[5, k]))
        try:
            record = loads_bounded(line, source=str(path), max_depth=MAX_LOG_DEPTH)
            same = [record[f] for f in ("id", "start", "stop", "final", "interrupted")] == live[:5, k].tolist()
        except (FormatError, KeyError, TypeError):
            same = False
        if not same:
            raise IndexDamagedError(f"{index.path}: record {position.skip + k} does not match line "
                                    f"{position.skip + k + 1} of {path.name}")
    check_index_rows(recs, None, index.path, 0)
    check_crc(crc, position.index_crc, index.path, 0, position.records)
    return live, recs[:, -1].copy() if recs.shape[1] else None


def checked_new(index: IndexFile, old: LogPosition, position: LogPosition, crc: int, last: np.ndarray | None
                ) -> np.ndarray:
    """A reader's records committed since ``old`` (``(7, E)``), checked as at open: their byte ranges tile
    the new log bytes, their columns follow ``last`` (the columns of record ``old.records - 1``), and
    the crc continued from ``crc`` (that of ``old``'s committed records, checked) is ``position``'s.

    Raises:
        IndexDamagedError: see :func:`checked_index`.
    """
    assert position.index_crc is not None
    n = position.records - old.records
    recs, got = index.read_crc(old.records, n, crc)
    check_records(recs, old.bytes, position.bytes, index.path)
    if n:
        check_index_rows(recs, last, index.path, old.records)
    check_crc(got, position.index_crc, index.path, old.records, position.records)
    return recs
