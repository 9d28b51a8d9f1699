"""The episode table: which global steps belong to which episode. Pure bookkeeping, no I/O.

Episodes are kept in *global* step numbers (see :mod:`trajstore.replay_buffer.ring`), so
a ring overwrite only has to drop the episodes that ended before the oldest held step;
an episode whose start was overwritten is kept, marked ``overwritten``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Episode:
    """One episode as seen in the buffer now.

    Attributes:
        id: episode number, counting from 0 since the buffer was created (stable across overwrites).
        start, stop: logical step range ``[start, stop)`` in the buffer.
        overwritten: its first steps have been overwritten by the ring (not gymnasium's
            ``truncated`` flag: that one is a leaf of the step, if you record it).
        done: ``end_episode`` was called for it (False for the episode being recorded).
    """

    id: int
    start: int
    stop: int
    overwritten: bool
    done: bool

    def __len__(self) -> int:
        return self.stop - self.start


class EpisodeTable:
    """Closed episodes as arrays ``ids``, ``starts``, ``stops`` (global steps) plus the open one.

    Appending an episode and dropping old ones are amortised O(1): the arrays grow by doubling
    and dropped episodes are a prefix that is skipped (and compacted when the arrays grow).
    """

    def __init__(self) -> None:
        self._table = np.zeros((3, 16), np.int64)  # rows: ids, starts, stops
        self._first = 0  # episodes before this column were dropped
        self._n = 0  # columns in use
        self.open_start: int | None = None  # global step where the episode being recorded began
        self.next_id = 0

    @property
    def ids(self) -> np.ndarray:
        return self._table[0, self._first:self._n]

    @property
    def starts(self) -> np.ndarray:
        return self._table[1, self._first:self._n]

    @property
    def stops(self) -> np.ndarray:
        return self._table[2, self._first:self._n]

    def __len__(self) -> int:
        """Closed episodes kept (some may have lost their first steps to the ring)."""
        return self._n - self._first

    def on_extend(self, total_before: int) -> None:
        """New steps were appended after global step ``total_before``."""
        if self.open_start is None:
            self.open_start = total_before

    def end_episode(self, appended: int) -> bool:
        """Close the open episode at step number ``appended``; False if there was none (or it was empty)."""
        if self.open_start is None or self.open_start >= appended:
            self.open_start = None
            return False
        if self._n == self._table.shape[1]:
            kept = self._table[:, self._first:self._n]
            self._table = np.zeros((3, max(16, 2 * kept.shape[1])), np.int64)
            self._table[:, :kept.shape[1]] = kept
            self._first, self._n = 0, kept.shape[1]
        self._table[:, self._n] = (self.next_id, self.open_start, appended)
        self._n += 1
        self.next_id += 1
        self.open_start = None
        return True

    def drop_before(self, oldest: int) -> None:
        """Forget closed episodes whose every step is older than global step ``oldest``."""
        self._first += int(np.searchsorted(self.stops, oldest, side="right"))  # stops are increasing

    def count(self, appended: int) -> int:
        """Episodes overlapping the held steps, the open one included."""
        return len(self) + int(self.open_start is not None and appended > self.open_start)

    def episode_at(self, k: int, oldest: int, appended: int) -> Episode:
        """The ``k``-th episode (negative counts from the newest) of :meth:`episodes`, in O(1).

        Raises:
            IndexError: naming ``k`` and how many episodes there are.
        """
        n = self.count(appended)
        if not -n <= k < n:
            raise IndexError(f"episode {k} is out of range: the buffer holds {n} episodes")
        k %= n
        if k < len(self):
            i, s, e = (int(v) for v in self._table[:, self._first + k])
            return Episode(i, max(s, oldest) - oldest, e - oldest, s < oldest, True)
        s = int(self.open_start)  # type: ignore[arg-type]
        return Episode(self.next_id, max(s, oldest) - oldest, appended - oldest, s < oldest, False)

    def episodes(self, oldest: int, appended: int) -> list[Episode]:
        """Episodes overlapping the held steps, in logical coordinates, oldest first."""
        return [self.episode_at(k, oldest, appended) for k in range(self.count(appended))]

    def to_json(self) -> dict[str, Any]:
        return {"ids": self.ids.tolist(), "starts": self.starts.tolist(), "stops": self.stops.tolist(),
                "open_start": self.open_start, "next_id": self.next_id}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EpisodeTable":
        table = cls()
        rows = np.asarray([data["ids"], data["starts"], data["stops"]], np.int64).reshape(3, -1)
        if np.any(rows[2] <= rows[1]) or np.any(np.diff(rows[2]) <= 0):
            raise ValueError("inconsistent episode table")
        table._table = np.zeros((3, max(16, rows.shape[1])), np.int64)
        table._table[:, :rows.shape[1]] = rows
        table._n = rows.shape[1]
        table.open_start = data.get("open_start")
        table.next_id = int(data.get("next_id", rows.shape[1]))
        return table
