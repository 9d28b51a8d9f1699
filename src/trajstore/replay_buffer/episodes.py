"""The episode table: which global steps belong to which episode. Pure bookkeeping, no I/O.

Episodes are kept in *global* step numbers (see :mod:`trajstore.replay_buffer.ring`), so
a ring overwrite only has to drop the episodes that ended before the oldest held step;
an episode whose start was overwritten is kept, marked truncated.
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
        truncated: its first steps have been overwritten by the ring.
        done: ``end_episode`` was called for it (False for the episode being recorded).
    """

    id: int
    start: int
    stop: int
    truncated: bool
    done: bool

    def __len__(self) -> int:
        return self.stop - self.start


class EpisodeTable:
    """Closed episodes as arrays ``ids``, ``starts``, ``stops`` (global steps) plus the open one."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, np.int64)
        self.starts = np.zeros(0, np.int64)
        self.stops = np.zeros(0, np.int64)
        self.open_start: int | None = None  # global step where the episode being recorded began
        self.next_id = 0

    def on_extend(self, total_before: int) -> None:
        """New steps were appended after global step ``total_before``."""
        if self.open_start is None:
            self.open_start = total_before

    def end_episode(self, total: int) -> bool:
        """Close the open episode at global step ``total``; False if there was none (or it was empty)."""
        if self.open_start is None or self.open_start >= total:
            self.open_start = None
            return False
        self.ids = np.append(self.ids, self.next_id)
        self.starts = np.append(self.starts, self.open_start)
        self.stops = np.append(self.stops, total)
        self.next_id += 1
        self.open_start = None
        return True

    def drop_before(self, oldest: int) -> None:
        """Forget closed episodes whose every step is older than global step ``oldest``."""
        keep = self.stops > oldest
        if not keep.all():
            self.ids, self.starts, self.stops = self.ids[keep], self.starts[keep], self.stops[keep]

    def episodes(self, oldest: int, total: int) -> list[Episode]:
        """Episodes overlapping the held steps, in logical coordinates, oldest first."""
        out = [Episode(int(i), int(max(s, oldest) - oldest), int(e - oldest), bool(s < oldest), True)
               for i, s, e in zip(self.ids, self.starts, self.stops) if e > oldest]
        if self.open_start is not None and total > self.open_start:
            s = self.open_start
            out.append(Episode(self.next_id, max(s, oldest) - oldest, total - oldest, s < oldest, False))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"ids": self.ids.tolist(), "starts": self.starts.tolist(), "stops": self.stops.tolist(),
                "open_start": self.open_start, "next_id": self.next_id}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EpisodeTable":
        table = cls()
        table.ids = np.asarray(data["ids"], np.int64)
        table.starts = np.asarray(data["starts"], np.int64)
        table.stops = np.asarray(data["stops"], np.int64)
        table.open_start = data.get("open_start")
        table.next_id = int(data.get("next_id", len(table.ids)))
        if not (len(table.ids) == len(table.starts) == len(table.stops)) or np.any(table.stops <= table.starts):
            raise ValueError("inconsistent episode table")
        return table
