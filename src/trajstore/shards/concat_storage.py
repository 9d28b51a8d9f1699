"""``ConcatStorage``: a read-only storage whose slots are the steps of every shard, concatenated.

Global slot ``i`` is slot ``i - steps[s]`` of shard ``s`` (the :class:`~trajstore.shards.catalog.Catalog`
the reader holds now). A read splits its sorted slots by shard and reads each shard's storage once, for
the leaves asked only (``SpaceStorage.read_leaves``): one read per shard per leaf group, the rows put
back together in slot order (the replay buffer's reads then put them in request order).

A read that touched a shard's open episode is checked against that shard's newest committed view by the
buffer's one staleness rule (:func:`~trajstore.replay_buffer.view.is_stale`): a writer that discarded the
episode and reused its slots meanwhile makes the read raise :class:`~trajstore.errors.StaleReadError`,
after the reader refreshed (the samplers then draw again; an index read is to be done again).
:class:`ConcatFinals` reads the shards' final observations the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from trajstore.errors import ReadOnlyError, StaleReadError
from trajstore.replay_buffer.view import Touched, is_stale
from trajstore.shards.catalog import Catalog
from trajstore.spaces import Space, tree
from trajstore.storages._selection import Selection, from_slots
from trajstore.storages.base import SpaceStorage


def _split(values: np.ndarray, offsets: np.ndarray) -> list[tuple[int, int, int]]:
    """``(shard, first row, stop row)`` of each shard holding some of the sorted ``values``."""
    cuts = np.searchsorted(values, offsets).tolist()
    return [(s, a, b) for s, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])) if b > a]


def _joined(pieces: list[list[np.ndarray]], n: int) -> list[np.ndarray]:
    if len(pieces) == 1:
        return pieces[0]
    return [np.concatenate([p[k] for p in pieces]) for k in range(n)]


class ConcatStorage(SpaceStorage):
    """The shards' steps as one read-only storage (``len`` = steps of every shard shown).

    Args:
        space: the dataset's space (every shard's).
        current: returns the reader's current :class:`Catalog`.
        on_stale: called (to refresh the reader) before a read that raced a writer raises ``StaleReadError``.
        where: the dataset folder (for messages).
    """

    type_name = "sharded-dataset"  # never registered: made by a ShardedBuffer, never written to a folder

    def __init__(self, space: Space, current: Callable[[], Catalog], on_stale: Callable[[], None], where: Path):
        super().__init__(space, capacity=None, cache_path=None, read_only=True)
        self._current, self._on_stale, self.where = current, on_stale, where
        self._n_leaves = len(tree.leaves(space))

    @classmethod
    def _create(cls, space: Space, **kwargs: Any) -> Any:
        raise TypeError("a ConcatStorage is made by ShardedBuffer.load_from, never created")

    @classmethod
    def _open(cls, path: Path, space: Space, **kwargs: Any) -> Any:
        raise TypeError("a ConcatStorage is made by ShardedBuffer.load_from, never opened")

    def __len__(self) -> int:
        return int(self._current().steps[-1])

    def get_config(self) -> dict[str, Any]:
        return {}

    def _read(self, sel: Selection) -> list[np.ndarray]:
        return self._read_some(sel, range(self._n_leaves))

    def _read_some(self, sel: Selection, which: Sequence[int]) -> list[np.ndarray]:
        which = list(which)
        cat = self._current()
        slots = sel.slots
        if not len(slots):
            leaves = tree.leaves(self.space)
            return [np.zeros((0, *leaves[i][1].shape), leaves[i][1].dtype) for i in which]
        pieces = []
        for s, a, b in _split(slots, cat.steps):
            part = cat.parts[s]
            local = slots[a:b] - cat.steps[s]
            pieces.append(part.buffer.storage.read_leaves(Selection(local), which))
            self._check(cat, s, int(local[0]), int(local[-1]))
        return _joined(pieces, len(which))

    def _check(self, cat: Catalog, s: int, first: int, last: int) -> None:
        """Raise StaleReadError (after refreshing the reader) if shard ``s``'s writer may have reused local
        slots ``first..last`` since the catalog's view of it: only reads of its open episode can race."""
        part = cat.parts[s]
        open_start = part.view.episodes.open_start
        if open_start is None or last < open_start:
            return
        touched = Touched(first, last)
        newest = part.buffer.committed_view(newest=True)
        if newest is not part.view and is_stale(part.view, newest, touched):
            self._on_stale()
            raise StaleReadError(f"the writer of shard {part.name!r} ({part.buffer.cache_path}) discarded steps while "
                                 f"they were read; the dataset's view is refreshed: index again")

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        raise ReadOnlyError(f"a sharded dataset ({self.where}) is read-only: write to a shard with its writer")

    def _resize(self, length: int) -> None:
        raise ReadOnlyError(f"a sharded dataset ({self.where}) is read-only: write to a shard with its writer")

    def __repr__(self) -> str:
        return f"ConcatStorage({self.where}, steps={len(self)}, shards={len(self._current().parts)})"


class ConcatFinals:
    """The shards' final observations under the global numbering (what the buffer's reads call ``finals``)."""

    def __init__(self, current: Callable[[], Catalog], obs_space: Space | None):
        self._current, self.obs_space = current, obs_space

    def read_leaves(self, numbers: np.ndarray) -> list[np.ndarray]:
        """Final observations ``numbers`` (int64 ``(N,)``, distinct; global) as leaf arrays ``(N, ...)`` of the
        observation space, one read per shard."""
        cat = self._current()
        sel = from_slots(np.asarray(numbers, np.int64))
        pieces = []
        for s, a, b in _split(sel.slots, cat.finals):
            storage = cat.parts[s].buffer.final_observation_storage
            pieces.append(storage.read_leaves(Selection(sel.slots[a:b] - cat.finals[s])))
        assert self.obs_space is not None and pieces
        values = _joined(pieces, len(tree.leaves(self.obs_space)))
        return values if sel.order is None else [v[sel.order] for v in values]

    def read(self, n: int) -> Any:
        """Final observation ``n`` (global number), nested like ``rb[i]["observation"]``."""
        assert self.obs_space is not None
        return tree.unflatten(self.obs_space, [v[0] for v in self.read_leaves(np.array([n], np.int64))])
