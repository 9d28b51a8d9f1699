"""Where the JSON data of a table's closed episodes is (``end_episode(**data)``): in the episode log,
by byte range, or in memory until a commit puts it there. Parsed only when asked for.

An :class:`~trajstore.replay_buffer.episodes.EpisodeTable` and its snapshots share one
:class:`DataStore`, looked up by episode id (ids are never reused). Records the log holds are kept
as three int64 arrays (ids, byte offsets, lengths: 24 bytes an episode, no Python object per
episode); the data of episodes closed since the last commit is a dict by id, moved out when the
commit that writes their lines is named by the metadata (:meth:`DataStore.locate`).

Reads: :meth:`DataStore.get` parses one line (one ``pread``); :meth:`DataStore.get_many` reads the
byte span of a batch with one ``pread`` and parses it as one JSON array. The store reads through
its own duplicate of the log's descriptor (closed when the store is collected, or by
:meth:`DataStore.close`), so a snapshot still reads after its log was compacted away.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._json import MAX_STORED_DEPTH, loads_bounded
from trajstore.errors import FormatError
from trajstore.replay_buffer.data_columns import MISSING, top_level_values

#: Deepest nesting read in the log (as :data:`~trajstore.replay_buffer.episode_log.MAX_LOG_DEPTH`).
MAX_LOG_DEPTH = MAX_STORED_DEPTH + 8
#: A batch whose byte span is more than this many times its lines' bytes is read line by line.
_SPARSE = 4
#: Lines scanned at a time by :meth:`DataStore.values` (bounds the bytes held at once).
_VALUES_BATCH = 1 << 16

__all__ = ["DataStore"]


class _Lines:
    """A log file read by byte range through a descriptor of its own."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self.fd = os.dup(fd)
        self._closer = weakref.finalize(self, os.close, self.fd)

    def read(self, offset: int, length: int) -> bytes:
        if not self._closer.alive:
            raise ValueError(f"{self.path}: the episode log was closed (the buffer is closed)")
        raw = os.pread(self.fd, length, offset)
        if len(raw) != length:
            raise FormatError(f"{self.path} holds fewer bytes than its episode index names ({offset + length})")
        return raw

    def close(self) -> None:
        self._closer()


class DataStore:
    """The data of closed episodes by id (see the module docstring).

    Attributes:
        mem: data of episodes whose log line is not committed yet, by id (no entry: no data).
    """

    def __init__(self) -> None:
        self.mem: dict[int, dict[str, Any]] = {}
        self._lines: _Lines | None = None
        self._loc = np.zeros((3, 0), np.int64)  # ids, offsets, lengths of the log's lines, by increasing id
        self._n = 0

    # -- where the data is ------------------------------------------------------------------
    def add(self, episode_id: int, data: dict[str, Any] | None) -> None:
        """Keep ``data`` of a newly closed episode in memory (``None``/``{}``: nothing to keep)."""
        if data:
            self.mem[episode_id] = data
        else:
            self.mem.pop(episode_id, None)

    def attach(self, path: Path, fd: int) -> None:
        """Read located lines from the log at ``path`` (open as ``fd``; the store duplicates it)."""
        old, self._lines = self._lines, _Lines(path, fd)
        del old  # a snapshot sharing this store reads the new file: the ids it holds were rewritten there

    @property
    def attached(self) -> bool:
        """Located lines can be read (:meth:`attach` was called)."""
        return self._lines is not None

    def locate(self, ids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> None:
        """The log now holds the lines of episodes ``ids`` (increasing, after every id located so far)
        at these byte ranges (int64 ``(E,)`` each); their in-memory data is dropped."""
        n = len(ids)
        if n == 0:
            return
        if self._n + n > self._loc.shape[1]:
            grown = np.zeros((3, max(1024, (2 if self._n else 1) * (self._n + n))), np.int64)  # exact at open
            grown[:, :self._n] = self._loc[:, :self._n]
            self._loc = grown
        for row, values in enumerate((ids, offsets, lengths)):  # one copy each (they may be strided views)
            self._loc[row, self._n:self._n + n] = values
        self._n += n
        if self.mem:
            for i in ids.tolist():
                self.mem.pop(i, None)

    def relocate(self, path: Path, fd: int, ids: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> None:
        """A compaction rewrote the log: only ``ids`` are located now, in the file at ``path``."""
        self.attach(path, fd)
        self._loc, self._n = np.zeros((3, 0), np.int64), 0
        self.locate(ids, offsets, lengths)

    def ranges(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, found)`` of ``ids`` (int64) among the located ones."""
        located = self._loc[0, :self._n]
        pos = np.searchsorted(located, ids)
        found = pos < self._n
        found[found] = located[pos[found]] == ids[found]
        return pos, found

    def located_span(self, first_id: int) -> tuple[int, int]:
        """``(offset, stop)``: the log bytes of the located lines from id ``first_id`` on (``(0, 0)``: none)."""
        k = int(np.searchsorted(self._loc[0, :self._n], first_id))
        if k >= self._n:
            return 0, 0
        return int(self._loc[1, k]), int(self._loc[1, self._n - 1] + self._loc[2, self._n - 1])

    def located_from(self, first_id: int) -> np.ndarray:
        """Ids located from ``first_id`` on, int64 (increasing)."""
        k = int(np.searchsorted(self._loc[0, :self._n], first_id))
        return self._loc[0, k:self._n].copy()

    def read_span(self, offset: int, stop: int) -> bytes:
        assert self._lines is not None
        return self._lines.read(offset, stop - offset)

    # -- reading ----------------------------------------------------------------------------
    def get(self, episode_id: int) -> dict[str, Any] | None:
        """The data of episode ``episode_id`` (``None``: none); the caller must not change it."""
        if episode_id in self.mem:
            return self.mem[episode_id]
        return self.get_many(np.array([episode_id], np.int64))[0]

    def get_many(self, ids: np.ndarray) -> list[dict[str, Any] | None]:
        """The data of episodes ``ids`` (int64 ``(E,)``), in order; ``None`` for no data.

        Raises:
            FormatError: a damaged log line (names the file).
        """
        out: list[dict[str, Any] | None] = [None] * len(ids)
        if len(ids) == 0:
            return out
        pos, found = self.ranges(ids)
        last = int(self._loc[0, self._n - 1]) if self._n else -1
        for k in np.flatnonzero(~found).tolist():
            i = int(ids[k])
            if i in self.mem:
                out[k] = self.mem[i]
            elif i < last:  # older than the log's newest line yet not in it: a compaction dropped it
                raise LookupError(f"the data of episode {i} is no longer in the episode log (a ring dropped the "
                                  "episode and the log was compacted): read the buffer's episodes again")
        where = np.flatnonzero(found)
        if where.size == 0:
            return out
        assert self._lines is not None
        off, length = self._loc[1, pos[where]], self._loc[2, pos[where]]
        lo, hi = int(off.min()), int((off + length).max())
        if hi - lo <= _SPARSE * int(length.sum()):
            span = self._lines.read(lo, hi - lo)
            lines = [span[a:a + n] for a, n in zip((off - lo).tolist(), length.tolist())]
        else:
            lines = [self._lines.read(a, n) for a, n in zip(off.tolist(), length.tolist())]
        if any(not line.endswith(b"\n") for line in lines):
            raise FormatError(f"{self._lines.path}: damaged episode log (a record's byte range is not a whole line)")
        records = loads_bounded(b"[" + b",".join(line[:-1] for line in lines) + b"]", source=str(self._lines.path),
                                max_depth=MAX_LOG_DEPTH)
        try:
            for k, r in zip(where.tolist(), records):
                if r["id"] != ids[k]:
                    raise ValueError(f"the line at byte {int(self._loc[1, pos[k]])} is episode {r['id']}, "
                                     f"not {int(ids[k])}")
                out[k] = r["data"] or None
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{self._lines.path}: damaged episode log ({exc})") from None
        return out

    def values(self, ids: np.ndarray, key: str) -> list[Any]:
        """Data key ``key`` of episodes ``ids`` (int64, increasing), in order;
        :data:`~trajstore.replay_buffer.data_columns.MISSING` where the data lacks it. One read of the
        lines' span, scanned without parsing each line (:mod:`~trajstore.replay_buffer.data_columns`).
        """
        out: list[Any] = [MISSING] * len(ids)
        pos, found = self.ranges(ids)
        for k in np.flatnonzero(~found).tolist():
            out[k] = (self.mem.get(int(ids[k])) or {}).get(key, MISSING)
        where = np.flatnonzero(found)
        for lo in range(0, where.size, _VALUES_BATCH):
            part = where[lo:lo + _VALUES_BATCH]
            off, length = self._loc[1, pos[part]], self._loc[2, pos[part]]
            first, stop = int(off[0]), int(off[-1] + length[-1])
            assert self._lines is not None
            if stop - first > _SPARSE * int(length.sum()):
                span = b"".join(self._lines.read(a, n) for a, n in zip(off.tolist(), length.tolist()))
                starts = np.cumsum(length) - length
            else:
                span, starts = self._lines.read(first, stop - first), off - first
            got = top_level_values(span, starts, length, key, str(self._lines.path), MAX_LOG_DEPTH)
            for k, v in zip(part.tolist(), got):
                out[k] = v
        return out

    def fork(self) -> "DataStore":
        """A copy that later changes of either do not reach (reading the same log), in O(located)."""
        twin = DataStore()
        twin.mem, twin._lines = dict(self.mem), self._lines
        twin._loc, twin._n = self._loc[:, :self._n].copy(), self._n
        return twin

    def close(self) -> None:
        """Stop reading the log (the buffer is closed); later reads raise ``ValueError``."""
        if self._lines is not None:
            self._lines.close()
