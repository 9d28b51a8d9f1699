"""``reader.episodes``: the episodes of every shard as one lazy, read-only sequence. No I/O of its own.

Episode ``k`` of the sequence is the ``k``-th of the concatenation (shard 0's episodes first, each shard's
open one last among its own) with the global ``id == k``, ``start``/``stop`` in global step indices,
and its shard's flags and data (``episode_key`` among them, where the writer gave one). Data is read
from each shard's episode log when asked for, in batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Iterator

import numpy as np

from trajstore.replay_buffer.episode import Episode
from trajstore.shards.catalog import Catalog

#: Episodes made (and their data parsed) at a time while iterating.
BATCH = 4096


class ShardEpisodes(Sequence):
    """The episodes of one :class:`~trajstore.shards.catalog.Catalog`, oldest shard first (see the module
    docstring); ``len``, ``[k]``, slices, iteration, ``.ids``, ``.columns()``, ``==`` a list."""

    def __init__(self, cat: Catalog):
        self._cat = cat
        self._table = cat.view.episodes

    def __len__(self) -> int:
        return self._cat.count

    def __getitem__(self, k: Any) -> Any:
        n = len(self)
        if isinstance(k, slice):
            lo, hi, step = k.indices(n)
            if step != 1:
                return [self[i] for i in range(lo, hi, step)]
            return self._between(lo, max(lo, hi))
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
            raise TypeError(f"episode positions are integers or slices, got {type(k).__name__}")
        if not -n <= int(k) < n:
            raise IndexError(f"episode {int(k)} is out of range: the dataset holds {n} episodes")
        return self._between(int(k) % n, int(k) % n + 1)[0]

    def __iter__(self) -> Iterator[Episode]:
        for lo in range(0, len(self), BATCH):
            yield from self._between(lo, min(len(self), lo + BATCH))

    def _between(self, lo: int, hi: int) -> list[Episode]:
        """Episodes ``lo..hi-1``, each shard's data read in one batch."""
        cat, t = self._cat, self._table
        out: list[Episode] = []
        if lo >= hi:
            return out
        data = self._data(lo, hi)
        starts, stops, finals, interrupted = (a[lo:hi].tolist() for a in (t.starts, t.stops, t.finals, t.interrupted))
        for j, k in enumerate(range(lo, hi)):
            is_open = bool(cat.open[k])
            out.append(Episode(k, starts[j], stops[j], False, not is_open and not interrupted[j], bool(interrupted[j]),
                               finals[j] >= 0, data[j]))
        return out

    def _data(self, lo: int, hi: int) -> list[Any]:
        cat = self._cat
        out: list[Any] = [None] * (hi - lo)
        for s in np.unique(cat.shard_of[lo:hi]).tolist():
            part = cat.parts[s]
            first = int(cat.episodes[s])
            a, b = max(lo, first), min(hi, int(cat.episodes[s + 1]))
            closed = part.rows.shape[1]
            local = np.arange(a - first, b - first)
            local = local[local < closed]  # the open episode has no data yet
            if len(local):
                got = part.view.episodes.store.get_many(part.rows[0, local])
                for pos, d in zip(local.tolist(), got):
                    out[first + pos - lo] = d
        return out

    @property
    def ids(self) -> np.ndarray:
        """``Episode.id`` of each (``0 .. len - 1``), int64."""
        return np.arange(len(self), dtype=np.int64)

    def columns(self) -> dict[str, np.ndarray]:
        """Per episode, no data read: ``id``, ``steps`` (int64), ``done``, ``interrupted``, ``overwritten``
        (bool), each ``(len,)``."""
        t = self._table
        interrupted = t.interrupted != 0
        return {"id": self.ids, "steps": t.stops - t.starts, "done": ~interrupted & ~self._cat.open,
                "interrupted": interrupted, "overwritten": np.zeros(len(self), bool)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (list, tuple, ShardEpisodes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if len(self) <= 8:
            return repr(list(self))
        return f"[{', '.join(repr(e) for e in self[:3])}, ... {len(self) - 4} more ..., {self[-1]!r}]"
