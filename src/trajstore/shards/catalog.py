"""The global numbering of a sharded dataset read as one buffer: pure bookkeeping, no data I/O.

A :class:`Catalog` is one consistent snapshot of every shard a :class:`~trajstore.shards.ShardedBuffer`
reads: per shard (:class:`ShardPart`) its committed view, the steps and episodes it shows, and the
offsets that concatenate them in :func:`~trajstore.shards.layout.shard_names` order. Global step ``i``
is step ``i - steps[s]`` of shard ``s`` (``steps[s] <= i < steps[s + 1]``); global episode ``k`` is
episode (position) ``k - episodes[s]`` of shard ``s``; final observation ``n`` is shard ``s``'s number
``n - finals[s]``.

The global :class:`~trajstore.replay_buffer.view.View` is what the replay buffer's samplers read: an
unbounded ring of all the steps and an episode table in which every shard's episodes are closed columns
(a shard's open episode too, without a final observation, which the samplers treat exactly as an open
episode: windows and transitions stay inside it, its last ``n_step`` steps are never transition anchors).
:attr:`Catalog.open` says which columns are open in their shard. Episodes never straddle shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.view import View


@dataclass(frozen=True)
class ShardPart:
    """What one shard shows in a catalog.

    Attributes:
        name: the shard's name.
        buffer: the shard, a read-only ``ReplayBuffer`` (its own view is :attr:`view`).
        view: the shard's committed view when the catalog was made.
        appended: steps shown (``view.ring.appended``, or fewer for a catalog pinned to older counts).
        rows: int64 ``(5, E)`` the closed episodes shown, as the shard's episode table has them (local id,
            start, stop, final observation number or -1, interrupted 0/1).
        open_start: local start of the shard's open episode (its steps ``[open_start, appended)``), or ``None``.
    """

    name: str
    buffer: Any
    view: View
    appended: int
    rows: np.ndarray
    open_start: int | None

    @property
    def count(self) -> int:
        """Episodes shown, the open one included."""
        return self.rows.shape[1] + int(self.open_start is not None)

    @property
    def final_span(self) -> int:
        """Final observation numbers this shard takes in the global numbering (its largest shown + 1)."""
        numbered = self.rows[3][self.rows[3] >= 0]
        return int(numbered.max()) + 1 if len(numbered) else 0

    @property
    def local_ids(self) -> np.ndarray:
        """int64 ``(count,)`` the shard's own ``Episode.id`` of each episode shown."""
        table = self.view.episodes
        ids = self.rows[0]
        return np.append(ids, table.next_id if len(ids) == len(table) else table.ids[len(ids)]) \
            if self.open_start is not None else ids.copy()


def shard_part(name: str, buffer: Any, pin: int | None = None) -> ShardPart:
    """The :class:`ShardPart` of ``buffer``'s committed view (unbounded), limited to its first ``pin``
    steps when given (the episode holding step ``pin - 1`` then shows as open, with the steps up to it)."""
    view = buffer.committed_view()
    table = view.episodes
    appended = view.ring.appended if pin is None else max(0, min(int(pin), view.ring.appended))
    rows = table.closed_rows_after(-1)
    kept = int(np.searchsorted(rows[2], appended, side="right"))  # closed episodes ending by `appended`
    open_start = None
    if kept < rows.shape[1]:
        if rows[1, kept] < appended:  # a closed episode cut by the pin: open, as it was then
            open_start = int(rows[1, kept])
    elif table.open_start is not None and table.open_start < appended:
        open_start = int(table.open_start)
    return ShardPart(name, buffer, view, appended, rows[:, :kept].copy(), open_start)


@dataclass(frozen=True)
class Catalog:
    """Every shard shown, their offsets and the global view (see the module docstring).

    Attributes:
        parts: the shards, in :func:`~trajstore.shards.layout.shard_names` order.
        steps, episodes, finals: int64 ``(S + 1,)`` offsets of each shard's steps, episodes and final
            observation numbers (``steps[-1]``: the number of steps).
        view: the global view the samplers and reads use.
        open: bool ``(E,)``: global episode ``k`` is open in its shard.
        shard_of: int64 ``(E,)`` the shard (position in :attr:`parts`) of each global episode.
    """

    parts: tuple[ShardPart, ...]
    steps: np.ndarray
    episodes: np.ndarray
    finals: np.ndarray
    view: View
    open: np.ndarray
    shard_of: np.ndarray

    @property
    def count(self) -> int:
        """Global episodes (every shard's, open ones included)."""
        return int(self.episodes[-1])

    def part_at_step(self, i: int) -> int:
        """The shard position holding global step ``i`` (in range)."""
        return int(np.searchsorted(self.steps, i, side="right")) - 1

    def part_of_episode(self, k: int) -> int:
        """The shard position holding global episode ``k`` (in range)."""
        return int(self.shard_of[k])


def catalog(parts: list[ShardPart]) -> Catalog:
    """The :class:`Catalog` of ``parts`` (in order)."""
    n = len(parts)
    steps, episodes, finals = (np.zeros(n + 1, np.int64) for _ in range(3))
    for s, p in enumerate(parts):
        steps[s + 1] = steps[s] + p.appended
        episodes[s + 1] = episodes[s] + p.count
        finals[s + 1] = finals[s] + p.final_span
    columns, open_flags = [], []
    for s, p in enumerate(parts):
        rows = p.rows.copy()
        rows[1:3] += steps[s]
        rows[3] = np.where(rows[3] >= 0, rows[3] + finals[s], -1)
        if p.open_start is not None:
            rows = np.concatenate([rows, np.array([[0], [p.open_start + steps[s]], [p.appended + steps[s]], [-1], [0]],
                                                  np.int64)], axis=1)
        rows[0] = episodes[s] + np.arange(rows.shape[1], dtype=np.int64)  # global ids: positions
        columns.append(rows)
        open_flags.append(np.arange(rows.shape[1]) == p.rows.shape[1])
    table_rows = np.concatenate(columns, axis=1) if columns else np.zeros((5, 0), np.int64)
    total = int(steps[-1])
    table = EpisodeTable.from_columns(table_rows, None, {"open_start": None, "next_id": int(episodes[-1]),
                                                         "final_count": int(finals[-1]), "discards": 0})
    view = View(RingState(None, total, 0, total), table)
    is_open = np.concatenate(open_flags) if open_flags else np.zeros(0, bool)
    shard_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(episodes))
    return Catalog(tuple(parts), steps, episodes, finals, view, is_open, shard_of)
