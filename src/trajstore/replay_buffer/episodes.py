"""The episode table: which global steps belong to which episode. Pure bookkeeping, no I/O.

Episodes are kept in *global* step numbers (see :mod:`trajstore.replay_buffer.ring`), so
a ring overwrite only has to drop the episodes that ended before the oldest held step;
an episode whose start was overwritten is kept, marked ``overwritten``.

Each closed episode also has its JSON data (``end_episode(**data)``), whether it was
interrupted (left open by a writer that stopped, closed when the folder was reopened for
writing), and the number of its final observation, if it has one: final observations are
numbered 0, 1, 2, ... in the order they were stored (see
:mod:`trajstore.replay_buffer.final_observations` for where number ``n`` lives).

The table holds int64 columns only; the data is in a :class:`~trajstore.replay_buffer.episode_store.DataStore`
(read from the episode log when asked for) and :meth:`EpisodeTable.episodes` is a lazy sequence.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from trajstore.replay_buffer.episode import Episode
from trajstore.replay_buffer.episode_checks import ROWS, check_columns, check_rows
from trajstore.replay_buffer.episode_list import EpisodeList
from trajstore.replay_buffer.episode_store import DataStore
from trajstore.replay_buffer.samplers import AnchorIndex, anchor_index

__all__ = ["Episode", "EpisodeTable", "check_rows"]  # check_rows: re-exported

if TYPE_CHECKING:
    from trajstore.replay_buffer.ring import RingState



class EpisodeTable:
    """Closed episodes as arrays ``ids``, ``starts``, ``stops`` (global steps) plus the open one.

    Appending an episode and dropping old ones are amortised O(1): the arrays grow by doubling
    and dropped episodes are a prefix that is skipped (and compacted when the arrays grow).

    Attributes:
        open_start: global step where the episode being recorded began, or ``None``.
        next_id: id of the next episode to be closed.
        final_count: final observations stored since the buffer was created (the next one's number).
        discards: episodes discarded since the buffer was created (readers compare it, see
            :mod:`trajstore.replay_buffer.view`).
    """

    def __init__(self) -> None:
        self._table = np.zeros((ROWS, 16), np.int64)
        self._store = DataStore()  # the data by episode id, shared with snapshots
        self._first = 0  # episodes before this column were dropped
        self._n = 0  # columns in use
        self.open_start: int | None = None
        self.next_id = 0
        self.final_count = 0
        self.discards = 0
        self._anchor_indexes: dict[tuple, AnchorIndex] = {}  # cleared when closed episodes change
        self._used = [0]  # columns in use in _table, shared with snapshots (see _make_room)

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

    def is_open(self, appended: int) -> bool:
        """An episode with at least one step is being recorded."""
        return self.open_start is not None and appended > self.open_start

    def end_episode(self, appended: int, *, data: dict[str, Any] | None = None, with_final: bool = False,
                    interrupted: bool = False) -> bool:
        """Close the open episode at step number ``appended``; False if there was none (or it was empty).

        ``data`` must already be checked JSON (:func:`~trajstore.replay_buffer.episode_data.episode_data`);
        ``with_final`` gives the episode final observation number :attr:`final_count`.
        """
        if not self.is_open(appended):
            self.open_start = None
            return False
        self._make_room(1)
        final = self.final_count if with_final else -1
        self._table[:, self._n] = (self.next_id, self.open_start, appended, final, int(interrupted))
        self._store.add(self.next_id, data)
        self._n += 1
        self._used[0] = self._n
        self._anchor_indexes.clear()
        self.next_id += 1
        self.final_count += int(with_final)
        self.open_start = None
        return True

    def forget_after(self, appended: int) -> None:
        """Steps from number ``appended`` on were never written (a failed write): the open
        episode loses them (closed episodes ended before any unwritten step)."""
        if self.open_start is not None and self.open_start >= appended:
            self.open_start = None

    def discard_open(self, appended: int) -> int:
        """Forget the open episode; returns how many steps it had (0 if none)."""
        n = appended - self.open_start if self.is_open(appended) else 0  # type: ignore[operator]
        self.open_start = None
        self.discards += int(n > 0)
        return n

    def drop_before(self, oldest: int) -> None:
        """Forget closed episodes whose every step is older than global step ``oldest``."""
        dropped = int(np.searchsorted(self.stops, oldest, side="right"))  # stops are increasing
        if dropped:
            self._first += dropped
            self._anchor_indexes.clear()

    @property
    def interrupted(self) -> np.ndarray:
        """Interrupted flags (0/1) of the closed episodes kept, int64 ``(E,)``."""
        return self._table[4, self._first:self._n]

    @property
    def finals(self) -> np.ndarray:
        """Final observation numbers of the closed episodes kept, int64 ``(E,)`` (-1: none)."""
        return self._table[3, self._first:self._n]

    def anchor_index(self, before: int, after: int, *, selected: np.ndarray | None = None,
                     keep_final_steps: bool = False) -> AnchorIndex:
        """The closed episodes' valid anchors for a margin (see :mod:`~trajstore.replay_buffer.samplers`),
        built in O(episodes) on first use and cached until an episode is closed or dropped.

        Args:
            selected: sorted unique episode ids (int64): only those closed episodes (unknown ids are ignored).
            keep_final_steps: an episode with a final observation keeps its last ``after`` anchors.
        """
        key = (before, after, keep_final_steps, None if selected is None else selected.tobytes())
        index = self._anchor_indexes.get(key)
        if index is None:
            if len(self._anchor_indexes) >= 8:  # a few margins are in use at a time
                self._anchor_indexes.clear()
            cols = slice(None) if selected is None else self.columns_of(selected)
            starts, stops = self.starts[cols], self.stops[cols]
            ends = np.where(self.finals[cols] >= 0, stops, stops - after) if keep_final_steps else None
            index = self._anchor_indexes[key] = anchor_index(starts, stops, before, after, ends)
        return index

    def columns_of(self, ids: np.ndarray) -> np.ndarray:
        """Positions in :attr:`ids` of the closed, kept episodes among ``ids`` (sorted int64), increasing."""
        pos = np.searchsorted(self.ids, ids)
        found = pos < len(self)
        found[found] = self.ids[pos[found]] == ids[found]
        return pos[found]

    def count(self, appended: int) -> int:
        """Episodes overlapping the held steps, the open one included."""
        return len(self) + int(self.is_open(appended))

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
            col = self._first + k
            i, s, e, final, interrupted = (int(v) for v in self._table[:, col])
            return Episode(i, max(s, oldest) - oldest, e - oldest, s < oldest, not interrupted, bool(interrupted),
                           final >= 0, self._store.get(i))
        s = int(self.open_start)  # type: ignore[arg-type]
        return Episode(self.next_id, max(s, oldest) - oldest, appended - oldest, s < oldest, False)

    def episodes(self, oldest: int, appended: int) -> EpisodeList:
        """Episodes overlapping the held steps, in logical coordinates, oldest first: a lazy sequence
        (O(1) to make; items made, and their data parsed, in batches as they are read)."""
        return EpisodeList(self, oldest, appended)

    def episodes_between(self, lo: int, hi: int, oldest: int, appended: int) -> list[Episode]:
        """Episodes ``lo..hi-1`` (positions ``0 <= lo <= hi <=`` :meth:`count`) of :meth:`episodes`, their
        data read in one batch."""
        n = len(self)
        closed = slice(self._first + min(lo, n), self._first + min(hi, n))
        cols = self._table[:, closed]
        data = self._store.get_many(cols[0])
        out = [Episode(i, max(s, oldest) - oldest, e - oldest, s < oldest, not x, bool(x), f >= 0, d)
               for (i, s, e, f, x), d in zip(cols.T.tolist(), data)]
        if hi > n and lo < hi:  # the open episode is position n: only when the range holds it
            out.append(self.episode_at(n, oldest, appended))
        return out

    def final_number(self, episode_id: int) -> int | None:
        """The final observation number of the closed, kept episode ``episode_id``, or ``None``."""
        col = self._first + int(np.searchsorted(self.ids, episode_id))  # ids are increasing
        if col >= self._n or self._table[0, col] != episode_id or self._table[3, col] < 0:
            return None
        return int(self._table[3, col])

    # -- snapshots and the episode log ------------------------------------------------------
    def snapshot(self) -> "EpisodeTable":
        """A copy in O(1) that later changes of either table do not reach.

        The copies share the column storage: a column below ``_n`` is never written again (closing
        an episode writes column ``_n``, dropping moves ``_first``, growing copies), and only one
        of them (the writer's live table, or a reader's newest) ever closes more episodes.
        """
        twin = copy.copy(self)
        twin._anchor_indexes = {}
        return twin

    @property
    def store(self) -> DataStore:
        """Where the closed episodes' data is (shared with the table's snapshots)."""
        return self._store

    def closed_rows_after(self, last_id: int) -> np.ndarray:
        """The kept closed episodes whose id is greater than ``last_id``: int64 columns ``(5, E)``
        (id, start, stop, final number or -1, interrupted 0/1)."""
        col = self._first + int(np.searchsorted(self.ids, last_id, side="right"))
        return self._table[:, col:self._n]

    def closed_after(self, last_id: int) -> tuple[np.ndarray, list[dict[str, Any] | None]]:
        """:meth:`closed_rows_after` and those episodes' data (``None``: no data)."""
        rows = self.closed_rows_after(last_id)
        return rows, self._store.get_many(rows[0])

    def with_appended(self, rows: np.ndarray, data: list[dict[str, Any] | None] | None = None) -> "EpisodeTable":
        """A :meth:`snapshot` with closed episodes appended after the newest one (a reader following
        the log), in O(new episodes); ``rows`` is int64 ``(5, E)`` as in :meth:`closed_after`; ``data``
        goes to the store's memory (``None``: the caller locates their lines in the log, :attr:`store`).

        Final numbers are checked against ``final_count`` by the :meth:`set_counters` that follows.

        Raises:
            ValueError: the new columns do not continue the table (ids, steps or final numbers go back).
        """
        twin = self.snapshot()
        n = rows.shape[1]
        if n == 0:
            return twin
        check_columns(rows, data, None, self._table[:, self._n - 1] if self._n else None)
        twin._make_room(n)
        twin._table[:, twin._n:twin._n + n] = rows
        for i, d in zip(rows[0].tolist() if data else (), data or ()):
            twin._store.add(i, d)
        twin._n += n
        twin._used[0] = twin._n
        return twin

    def _make_room(self, n: int) -> None:
        """Make columns ``[_n, _n + n)`` free to write: in place when this table is the one that used
        the shared storage last (amortised O(1), by doubling), else in a copy of the kept columns."""
        if self._n + n <= self._table.shape[1] and self._used[0] == self._n:
            return
        if self._used[0] != self._n:  # another table closed episodes after this one: their ids are taken there
            self._store = self._store.fork()
        kept = self._table[:, self._first:self._n]
        self._table = np.zeros((ROWS, max(16, 2 * (kept.shape[1] + n))), np.int64)
        self._table[:, :kept.shape[1]] = kept
        self._first, self._n = 0, kept.shape[1]
        self._used = [self._n]

    def keep_last(self, n: int) -> bool:
        """Keep the ``n`` newest closed episodes (a reader applying the log's ``skip``); False, with
        nothing changed, if fewer than ``n`` are still at hand (read the log again).

        A ring's shrunk view drops episodes that the next commit names again; their columns are
        still before ``_first`` unless the storage was copied since.
        """
        if n < 0 or n > self._n:
            return False
        if n != len(self):
            self._first = self._n - n
            self._anchor_indexes.clear()
        return True

    def counters_json(self) -> dict[str, Any]:
        """The table's counters (everything but the closed episodes), JSON."""
        return {"open_start": self.open_start, "next_id": self.next_id, "final_count": self.final_count,
                "discards": self.discards}

    def set_counters(self, data: dict[str, Any]) -> None:
        """Set the counters of :meth:`counters_json` (``next_id`` defaults to the number of episodes).

        Raises:
            ValueError: a counter is not an int (``open_start`` may be ``None``) or a kept episode's final
                number is not below ``final_count``.
        """
        open_start = data.get("open_start")
        values = [data.get("next_id", len(self)), data.get("final_count", 0), data.get("discards", 0)]
        if not all(type(v) is int and v >= 0 for v in values) or not (
                open_start is None or (type(open_start) is int and open_start >= 0)):
            raise ValueError(f"inconsistent episode table: bad counters {data!r:.200}")
        self.open_start = open_start
        self.next_id, self.final_count, self.discards = values
        if len(self) and int(self.finals.max()) >= self.final_count:
            raise ValueError("inconsistent episode table: a final observation number is not below final_count")

    @classmethod
    def from_columns(cls, rows: np.ndarray, data: list[dict[str, Any] | None] | None,
                     counters: dict[str, Any], store: DataStore | None = None) -> "EpisodeTable":
        """A table of closed episodes given as int64 columns ``(5, E)`` (see :meth:`closed_after`) with
        their data (``None``: in ``store``, which the table then uses), and the counters of
        :meth:`counters_json`.

        Raises:
            ValueError: inconsistent columns (order, lengths, final numbers, data that is not a dict).
        """
        table = cls()
        if rows.ndim != 2 or rows.shape[0] != ROWS:
            check_columns(rows, data, None, None)  # raises
        n = rows.shape[1]
        table._table = np.zeros((ROWS, 16), np.int64) if n < 16 else np.empty((ROWS, n), np.int64)
        table._table[:, :n] = rows  # one copy (``rows`` may be a strided view of an index read), then checked
        check_columns(table._table[:, :n], data, None, None)
        if store is not None:
            table._store = store
        for i, d in zip(rows[0].tolist() if data else (), data or ()):
            table._store.add(i, d)
        table._n = n
        table._used = [n]
        table.set_counters(counters)
        return table

    def to_json(self) -> dict[str, Any]:
        """The whole table as JSON, as format versions 1 and 2 keep it in ``trajstore.json``."""
        cols = slice(self._first, self._n)
        return {"ids": self.ids.tolist(), "starts": self.starts.tolist(), "stops": self.stops.tolist(),
                "final": self._table[3, cols].tolist(), "interrupted": self._table[4, cols].astype(bool).tolist(),
                "data": [d or {} for d in self._store.get_many(self.ids)], **self.counters_json()}

    def check_within(self, ring: "RingState") -> None:
        """Check the table against the ring state it was committed with (both from one metadata file).

        Raises:
            ValueError: an episode or the open one ends after the last step appended or starts before
                step 0, an id at or past ``next_id``, or a negative counter.
        """
        open_start = self.open_start
        if open_start is not None and not (isinstance(open_start, int) and 0 <= open_start <= ring.appended):
            raise ValueError(f"inconsistent episode table: open episode start {open_start!r} outside the "
                             f"{ring.appended} steps appended")
        if len(self) and (self.starts[0] < 0 or self.stops[-1] > ring.appended or self.ids[0] < 0
                          or self.ids[-1] >= self.next_id
                          or (open_start is not None and open_start < self.stops[-1])):
            raise ValueError(f"inconsistent episode table: episodes {self.ids[0]}..{self.ids[-1]} span steps "
                             f"{self.starts[0]}..{self.stops[-1]}, next id {self.next_id}, with "
                             f"{ring.appended} steps appended")
        if self.final_count < 0 or self.discards < 0:
            raise ValueError("inconsistent episode table: negative counters")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EpisodeTable":
        """The table of :meth:`to_json` (format 2); a format-1 table (no data, finals or interrupted flags)
        is accepted.

        Raises:
            ValueError: inconsistent arrays (lengths, order, final numbers, data that is not a dict).
        """
        rows = np.asarray([data["ids"], data["starts"], data["stops"]], np.int64).reshape(3, -1)
        n = rows.shape[1]
        final = np.asarray(data.get("final", [-1] * n), np.int64).reshape(-1)
        interrupted = np.asarray(data.get("interrupted", [False] * n), bool).reshape(-1)
        episode_data = data.get("data", [{}] * n)
        if len(final) != n or len(interrupted) != n or len(episode_data) != n:
            raise ValueError("inconsistent episode table: its lists differ in length")
        columns = np.concatenate([rows, final[None], interrupted[None].astype(np.int64)])
        counters = {k: data[k] for k in ("open_start", "next_id", "final_count", "discards") if k in data}
        return cls.from_columns(columns, list(episode_data), counters)
