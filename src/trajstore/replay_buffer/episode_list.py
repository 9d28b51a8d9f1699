"""``rb.episodes``: the held episodes as a lazy, read-only sequence of
:class:`~trajstore.replay_buffer.episode.Episode`. No I/O of its own.

A buffer of a million episodes answers ``len(rb.episodes)`` and ``rb.episodes[-1]`` in O(1) (one log
line parsed for the data); iterating makes the episodes in batches of :data:`BATCH` (one read and one
JSON parse of their log lines each), so memory stays bounded. It compares equal to a list of the same
episodes, slices to a list, and does not change when the buffer does (it holds a snapshot of the table).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Iterator, overload

import numpy as np

from trajstore.replay_buffer.data_columns import MISSING
from trajstore.replay_buffer.episode import Episode

if TYPE_CHECKING:
    from trajstore.replay_buffer.episodes import EpisodeTable

#: Episodes made (and their data parsed) at a time while iterating.
BATCH = 4096

__all__ = ["BATCH", "EpisodeList"]


class EpisodeList(Sequence):
    """The episodes of one table snapshot overlapping the held steps, oldest first (the open one last)."""

    def __init__(self, table: "EpisodeTable", oldest: int, appended: int):
        self._table = table.snapshot()
        self._oldest, self._appended = oldest, appended
        self._n = table.count(appended)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, k: int) -> Episode: ...

    @overload
    def __getitem__(self, k: slice) -> list[Episode]: ...

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            lo, hi, step = k.indices(self._n)
            if step != 1:
                return [self[i] for i in range(lo, hi, step)]
            return self._table.episodes_between(lo, max(lo, hi), self._oldest, self._appended)
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            raise TypeError(f"episode positions are integers or slices, got {type(k).__name__}")
        return self._table.episode_at(int(k), self._oldest, self._appended)

    def __iter__(self) -> Iterator[Episode]:
        for lo in range(0, self._n, BATCH):
            yield from self._table.episodes_between(lo, min(self._n, lo + BATCH), self._oldest, self._appended)

    def __reversed__(self) -> Iterator[Episode]:
        for hi in range(self._n, 0, -BATCH):
            yield from reversed(self._table.episodes_between(max(0, hi - BATCH), hi, self._oldest, self._appended))

    @property
    def ids(self) -> np.ndarray:
        """``Episode.id`` of each, int64 ``(len,)``, increasing (no data read)."""
        ids = self._table.ids
        return np.append(ids, self._table.next_id) if self._n > len(ids) else ids.copy()

    def columns(self) -> dict[str, np.ndarray]:
        """Per episode, no data read: ``id``, ``steps`` (int64), ``done``, ``interrupted``, ``overwritten``
        (bool), each ``(len,)``, as the :class:`~trajstore.replay_buffer.episode.Episode` attributes."""
        t = self._table
        starts, stops, interrupted = t.starts, t.stops, t.interrupted != 0
        done = ~interrupted
        if self._n > len(t):  # the open episode
            starts, stops = np.append(starts, t.open_start), np.append(stops, self._appended)
            interrupted, done = np.append(interrupted, False), np.append(done, False)
        return {"id": self.ids, "steps": stops - np.maximum(starts, self._oldest), "done": done,
                "interrupted": interrupted, "overwritten": starts < self._oldest}

    def data_values(self, key: str, start: int = 0) -> list[Any]:
        """The value of data key ``key`` of each episode from position ``start`` on (the open one has no
        data), :data:`~trajstore.replay_buffer.data_columns.MISSING` where it lacks it: the log's lines are
        scanned, not parsed one by one (:meth:`~trajstore.replay_buffer.episode_store.DataStore.values`)."""
        if type(start) is not int or start < 0:
            raise ValueError(f"start must be an int >= 0, got {start!r}")
        out = self._table.store.values(self._table.ids[start:], key)
        return out + [MISSING] if self._n > max(len(self._table), start) else out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (list, tuple, EpisodeList)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._n <= 8:
            return repr(list(self))
        head = ", ".join(repr(e) for e in self[:3])
        return f"[{head}, ... {self._n - 4} more ..., {self[-1]!r}]"
