"""A stream buffer folder on disk: ``streams.json``, the episode log, stream names. File I/O only.

Layout::

    buf/
      streams.json     {"commit": 7, "format": "trajstore-streams", "version": 1,
                        "streams": {"wrist": {"path": "streams/wrist"}, ...},
                        "log": {"file": "episodes.log", "bytes": 4711, "records": 12}, "next_id": 12,
                        "lengths": {"wrist": 900, ...}, "discards": {"wrist": 0, ...}, "check_bounds": true}
      episodes.log     a header line, then one JSON line per closed episode, oldest first:
                       {"id": 3, "interrupted": false, "data": {"task": "push"}, "counts": {"wrist": 90, ...}}
      writer.lock
      streams/<name>/  one ReplayBuffer folder per stream

``streams.json`` is replaced atomically (temp file, fsync, rename) after the stream data and the log
records it names are durable; ``log.bytes`` is the committed length of the log, and bytes past it
(a commit cut short by a crash) are never read and are cut off by the next writer. A commit costs
O(streams), not O(episodes): the log is appended to. ``lengths`` is the number of samples of each
stream committed (readers show no more than that); ``discards`` counts ``discard_episode`` calls that
dropped samples of a stream (readers re-read the open episode's timestamps when it changes).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from trajstore._fs import fsync_dir, read_json, write_json_atomic
from trajstore._json import MAX_STORED_DEPTH, loads_bounded
from trajstore.errors import FormatError, InvalidValueError

META_FILE = "streams.json"
LOG_FILE = "episodes.log"
STREAMS_DIR = "streams"
FORMAT = "trajstore-streams"
VERSION = 1
LOG_HEADER = json.dumps({"format": "trajstore-streams.episode_log", "version": 1},
                        separators=(",", ":")).encode() + b"\n"
#: Names taken by aligned views (``view[i]["timestamp"]``, ``view[i]["is_pad"]``).
RESERVED = ("timestamp", "is_pad")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
#: Longest stream name (a folder name: file systems allow 255 bytes; ``streams/<name>/...`` paths stay short).
MAX_NAME = 100


def check_name(name: Any) -> str:
    """A stream name: non-empty, at most :data:`MAX_NAME` characters, letters, digits, ``_``, ``-``, ``.``
    (one safe path part), not reserved.

    Raises:
        InvalidValueError: anything else, naming the name and the rule.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidValueError(f"stream name {name!r} is not allowed: use a non-empty str of letters, digits, "
                                "'_', '-' and '.' (one path part, no '/')")
    if len(name) > MAX_NAME:
        raise InvalidValueError(f"stream name {name[:20]!r}... is {len(name)} characters long; stream names have "
                                f"at most {MAX_NAME} (each is a folder name)")
    if name in RESERVED:
        raise InvalidValueError(f"stream name {name!r} is reserved (aligned views use {', '.join(RESERVED)})")
    return name


def is_stream_folder(folder: Path) -> bool:
    return (Path(folder) / META_FILE).is_file()


def read_meta(folder: Path) -> dict[str, Any]:
    """The parsed ``streams.json`` of ``folder``.

    Raises:
        FormatError: not a stream buffer folder (it names what is there instead), a corrupt file, a
            newer version.
    """
    folder = Path(folder)
    if not (folder / META_FILE).is_file():
        hint = (" (it is a ReplayBuffer folder: open it with ReplayBuffer.load_from)"
                if (folder / "trajstore.json").is_file() else "")
        raise FormatError(f"{folder} is not a trajstore stream buffer folder: {folder / META_FILE} does not "
                          f"exist{hint}")
    meta = read_json(folder / META_FILE, "stream buffer metadata")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise FormatError(f"{folder / META_FILE} is not a trajstore stream buffer file")
    if not isinstance(meta.get("version"), int) or meta["version"] > VERSION:
        raise FormatError(f"{folder}: stream buffer version {meta.get('version')!r} is newer than this "
                          f"trajstore reads ({VERSION}); upgrade trajstore")
    try:
        if not isinstance(meta["streams"], dict) or not meta["streams"]:
            raise FormatError(f"{folder / META_FILE}: 'streams' must name at least one stream, got "
                              f"{meta['streams']!r:.80}")
        names = list(meta["streams"])
        for name in names:
            check_name(name)
            if meta["streams"][name].get("path") != f"{STREAMS_DIR}/{name}":
                raise FormatError(f"{folder / META_FILE}: stream {name!r} has path "
                                  f"{meta['streams'][name].get('path')!r}, expected {STREAMS_DIR}/{name}")
        for key in ("lengths", "discards"):
            if set(meta[key]) != set(names) or any(type(v) is not int or v < 0 for v in meta[key].values()):
                raise FormatError(f"{folder / META_FILE}: {key!r} must give a whole number for every stream")
        log = meta["log"]
        if (log.get("file") != LOG_FILE or not _count(log.get("bytes")) or log["bytes"] < len(LOG_HEADER)
                or not _count(log.get("records"))):
            raise FormatError(f"{folder / META_FILE}: bad log entry {log!r:.80}")
        if not _count(meta.get("next_id")) or not _count(meta.get("commit")):
            raise FormatError(f"{folder / META_FILE}: next_id and commit must be whole numbers")
    except (KeyError, TypeError, AttributeError, InvalidValueError) as exc:
        raise FormatError(f"{folder / META_FILE} is damaged or incomplete ({type(exc).__name__}: {exc})") from None
    return meta


def _count(v: Any) -> bool:
    """A plain non-negative int (not a bool, a float or a str)."""
    return type(v) is int and v >= 0


def check_record(path: Path, rec: Any, number: int, names: list[str]) -> dict[str, Any]:
    """One episode record of the log as a writer writes it: ``{"id", "interrupted", "data", "counts"}``
    with counts plain non-negative ints of known streams.

    Raises:
        FormatError: names the log file, the record (its position and id) and the stream.
    """
    where = f"{path}: episode record {number}"
    if (not isinstance(rec, dict) or not _count(rec.get("id")) or not isinstance(rec.get("counts"), dict)
            or not isinstance(rec.get("data"), dict) or not isinstance(rec.get("interrupted"), bool)):
        raise FormatError(f"{where} is not an episode record: {json.dumps(rec, default=str)[:80]}")
    where += f" (id {rec['id']})"
    for name, count in rec["counts"].items():
        if name not in names:
            raise FormatError(f"{where} counts samples of stream {name!r}, which the buffer does not have "
                              f"(its streams: {names})")
        if not _count(count):
            raise FormatError(f"{where}: stream {name!r} has count {count!r}; counts are whole numbers >= 0")
    return rec


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    """Replace ``streams.json`` atomically; ``commit`` goes first."""
    ordered = {"commit": meta["commit"], **{k: v for k, v in meta.items() if k != "commit"}}
    write_json_atomic(Path(folder) / META_FILE, ordered)


def new_meta(names: list[str], check_bounds: bool) -> dict[str, Any]:
    return {"commit": 0, "format": FORMAT, "version": VERSION,
            "streams": {n: {"path": f"{STREAMS_DIR}/{n}"} for n in names}, "check_bounds": check_bounds,
            "log": {"file": LOG_FILE, "bytes": len(LOG_HEADER), "records": 0}, "next_id": 0,
            "lengths": {n: 0 for n in names}, "discards": {n: 0 for n in names}}


class EpisodeLogFile:
    """The append-only episode log of a stream buffer folder (see the module docstring)."""

    def __init__(self, folder: Path, *, read_only: bool, create: bool = False, names: list[str] | None = None):
        self.path = Path(folder) / LOG_FILE
        self.names = list(names or [])  # the streams records may count
        if create:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, LOG_HEADER)
            os.fsync(fd)
            fsync_dir(folder)
        else:
            try:
                fd = os.open(self.path, os.O_RDONLY if read_only else os.O_RDWR)
            except FileNotFoundError:
                raise FormatError(f"{self.path} does not exist (the episode log of a stream buffer)") from None
        self._fd = fd

    def read(self, start: int, stop: int, records: int, first: int = 0) -> list[dict[str, Any]]:
        """The ``records`` episode records in bytes ``[start, stop)`` (``start`` 0 skips the header);
        ``first``: the position of the first of them in the log (for messages).

        Raises:
            FormatError: the file is shorter than committed, or a record is not what a writer writes
                (names the file, the record and the stream).
        """
        start = max(start, len(LOG_HEADER))
        size = os.fstat(self._fd).st_size
        if stop > size:  # checked before reading: never allocate from a length in a file
            raise FormatError(f"{self.path} is shorter ({size} bytes) than committed ({stop})")
        raw = os.pread(self._fd, stop - start, start) if stop > start else b""
        if len(raw) != max(stop - start, 0):
            raise FormatError(f"{self.path} is shorter ({start + len(raw)} bytes) than committed ({stop})")
        lines = raw.split(b"\n")[:-1] if raw else []
        if len(lines) != records:
            raise FormatError(f"{self.path}: {len(lines)} records in bytes {start}..{stop}, committed {records}")
        out = []
        for i, line in enumerate(lines):
            rec = loads_bounded(line, source=str(self.path), max_depth=MAX_STORED_DEPTH + 8)
            out.append(check_record(self.path, rec, first + i, self.names))
        return out

    def append(self, offset: int, records: list[dict[str, Any]]) -> int:
        """Write ``records`` at ``offset`` (the committed length: a torn tail is overwritten), cut the file
        there, fsync; returns the new length (what ``streams.json`` then commits)."""
        payload = b"".join(json.dumps(r, separators=(",", ":"), allow_nan=False).encode() + b"\n" for r in records)
        view, at = memoryview(payload), offset
        while view:
            n = os.pwrite(self._fd, view, at)
            view, at = view[n:], at + n
        os.ftruncate(self._fd, at)
        os.fsync(self._fd)
        return at

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
