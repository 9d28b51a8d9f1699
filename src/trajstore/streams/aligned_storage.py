"""``AlignedStorage``: a read-only storage whose slots are an aligned view's anchor steps.

Slot ``i`` holds, for each included stream, its value at anchor time ``i`` by the stream's method
(see :mod:`trajstore.streams.align`), the anchor time (``"timestamp"``, int64 ns) and the flags
(``"is_pad/<stream>"``, bool). A read computes the values of the slots asked only, from the stream
samples they need, each read once per call through ``StreamBuffer.read_samples`` (a camera decodes
those frames only); a stream whose leaves are not asked is not read at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from trajstore.errors import ReadOnlyError, StaleReadError, TrajstoreError
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space, tree
from trajstore.storages._selection import Selection
from trajstore.storages.base import SpaceStorage
from trajstore.streams.align import Alignment, interpolate
from trajstore.streams.aligned_steps import StreamPlan

#: The keys an aligned view adds to its streams.
TIMESTAMP, IS_PAD = "timestamp", "is_pad"
#: A low-dim stream (no leaf with ``kind`` metadata) whose samples take at most this many bytes is read
#: whole on a view's first read of it and kept: a batch is then a NumPy gather, not an HDF5 read whose
#: cost grows with the stream's length (random anchors touch most of a 500 Hz stream's chunks).
HELD_BYTES = 64 << 20


def view_space(plans: Sequence[StreamPlan]) -> DictSpace:
    """``DictSpace({stream: its space, ..., "timestamp": int64 (), "is_pad": {stream: bool ()}})``."""
    int64 = np.iinfo(np.int64)
    return DictSpace({**{p.name: p.space for p in plans},
                      TIMESTAMP: BoxSpace(int64.min, int64.max, (), np.int64),
                      IS_PAD: DictSpace({p.name: BinarySpace(()) for p in plans})})


class AlignedStorage(SpaceStorage):
    """The anchor steps of an aligned view as slots (read-only; ``len`` = number of anchor steps).

    Args:
        buffer: the stream buffer (its ``read_samples`` is the only read made).
        plans: the included streams, in the view's order.
        times: int64 ``(S,)`` anchor times (ns).
        episode: int64 ``(S,)`` the view episode of each anchor step.
    """

    type_name = "aligned-view"  # never registered: a view's storage is not written to a folder

    def __init__(self, buffer: Any, plans: Sequence[StreamPlan], times: np.ndarray, episode: np.ndarray,
                 cache_path: Path | None = None, open_id: int | None = None, discards: int = 0):
        super().__init__(view_space(plans), capacity=None, cache_path=None, read_only=True)
        # The writer's open episode, if the view holds it: a discard frees its positions for new samples.
        self.open_id, self.discards = open_id, discards
        self.committed = buffer.committed_discards() if open_id is not None else {}
        self._stale: str | None = None  # once the held episode was discarded, every read raises
        self.buffer, self.plans, self.times, self.episode = buffer, tuple(plans), times, episode
        self.where = cache_path
        self._by_name = {p.name: p for p in self.plans}
        # Leaf positions (tree.leaves order): each stream's leaves, then timestamp, then is_pad/<stream>.
        self._leaf_ranges: list[tuple[StreamPlan, int, int]] = []
        first = 0
        for p in self.plans:
            n = len(tree.leaves(p.space))
            self._leaf_ranges.append((p, first, first + n))
            first += n
        self._timestamp = first
        self._flags = {first + 1 + k: p for k, p in enumerate(self.plans)}

    # -- the contract (read-only; never made or opened from a folder) -----------------------
    @classmethod
    def _create(cls, space: Space, **kwargs: Any) -> Any:
        raise TypeError("an AlignedStorage is made by an aligned view (StreamBuffer.aligned), never created")

    @classmethod
    def _open(cls, path: Path, space: Space, **kwargs: Any) -> Any:
        raise TypeError("an AlignedStorage is made by an aligned view (StreamBuffer.aligned), never opened")

    def __len__(self) -> int:
        return len(self.times)

    def get_config(self) -> dict[str, Any]:
        return {}

    def _read(self, sel: Selection) -> list[np.ndarray]:
        return self._read_some(sel, range(len(tree.leaves(self.space))))

    def _read_some(self, sel: Selection, which: Sequence[int]) -> list[np.ndarray]:
        slots = sel.slots
        wanted = set(which)
        out: dict[int, np.ndarray] = {}
        for plan, first, stop in self._leaf_ranges:
            if wanted.isdisjoint(range(first, stop)):
                continue  # no leaf of this stream asked: not read
            a = plan.at_steps
            for k, value in enumerate(self.values(plan, a.lo[slots], a.hi[slots], a.weight[slots])):
                out[first + k] = value
        out[self._timestamp] = self.times[slots]
        for position, plan in self._flags.items():
            out[position] = plan.at_steps.flagged[slots]
        return [out[i] for i in which]

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        raise ReadOnlyError("an aligned view is read-only: write to the stream buffer")

    def _resize(self, length: int) -> None:
        raise ReadOnlyError("an aligned view is read-only: write to the stream buffer")

    # -- what the view's reads use ---------------------------------------------------------
    def plan(self, name: str) -> StreamPlan:
        return self._by_name[name]

    def flagged(self, name: str, slots: np.ndarray) -> np.ndarray:
        """``is_pad/<name>`` at ``slots`` (int64, any shape), bool of the same shape; no sample read."""
        return self._by_name[name].at_steps.flagged[slots]

    def values(self, plan: StreamPlan, lo: np.ndarray, hi: np.ndarray, weight: np.ndarray) -> list[np.ndarray]:
        """The stream's leaf arrays ``(Q, ...)`` for rows ``(1 - w) v[lo] + w v[hi]`` (``lo``, ``hi``: int64
        sample positions ``(Q,)``; ``weight``: float64 ``(Q,)``, all 0 but for ``linear``), reading each
        needed sample once (only ``lo`` where the weight is 0)."""
        blend = weight > 0
        needed = np.concatenate((lo, hi[blend]))
        if not len(needed):
            return [np.zeros((0, *leaf.shape), leaf.dtype) for _, leaf in tree.leaves(plan.space)]
        self.check_current(plan.name)
        held = self._held_values(plan)
        if held is not None:
            check_holds(self.where, plan.name, len(held[0]), int(needed.max()) + 1)
            leaves, inverse = [v[needed] for v in held], np.arange(len(needed))
        else:
            positions, inverse = _unique(needed)
            # A forked process (DataLoader workers) holds only what the writer had flushed.
            check_holds(self.where, plan.name, self.buffer.stream_length(plan.name), int(positions[-1]) + 1,
                        writer=self.buffer.discards != self.discards)
            try:
                leaves = tree.flatten(plan.space, self.buffer.read_samples(plan.name, positions))
            except StaleReadError as e:  # sub-buffers are unbounded: only a discard reuses positions
                self._stale = f"episode id {self.open_id}" if self.open_id is not None else "an open episode"
                self.check_current(plan.name, e)
        return self._blend(leaves, inverse, len(lo), blend, weight)

    def check_current(self, name: str, cause: BaseException | None = None) -> None:
        """Raise :class:`ViewDiscardedError` (naming stream ``name``) once the writer has discarded the
        open episode this view holds (its positions may hold new samples): for good, not retried."""
        if self._stale is None and self.open_id is not None and (
                self.buffer.discards != self.discards
                or self.buffer.committed_discards().get(name) != self.committed.get(name)):
            self._stale = f"episode id {self.open_id}"
        if self._stale is not None:
            raise ViewDiscardedError(f"stream {name!r} of the aligned view of {self.where or 'memory'}: the writer "
                                     f"discarded an episode this view holds ({self._stale}); its samples may "
                                     f"have been replaced: make a new view") from cause

    @staticmethod
    def _blend(leaves: Any, inverse: np.ndarray, n_lo: int, blend: np.ndarray, weight: np.ndarray
               ) -> list[np.ndarray]:
        at_lo, at_hi = inverse[:n_lo], inverse[n_lo:]
        out = []
        for leaf in leaves:
            leaf = np.asarray(leaf)
            value = leaf[at_lo]
            if len(at_hi):
                value[blend] = interpolate(value[blend], leaf[at_hi], weight[blend], value.dtype)
            out.append(value)
        return out

    def _held_values(self, plan: StreamPlan) -> list[np.ndarray] | None:
        """Every held sample of ``plan``'s stream as leaf arrays, read on first use and kept, for a stream
        without a camera leaf (no ``kind`` metadata) of at most :data:`HELD_BYTES`; else ``None``."""
        if self.open_id is not None:
            return None  # the open episode may be discarded: its samples are read (and checked) each time
        cache = self.__dict__.setdefault("_held", {})
        if plan.name not in cache:
            leaves = tree.leaves(plan.space)
            row = sum(int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize for _, leaf in leaves)
            n = self.buffer.stream_length(plan.name)
            small = n * row <= HELD_BYTES and not any((getattr(leaf, "metadata", None) or {}).get("kind")
                                                      for _, leaf in leaves)
            cache[plan.name] = ([np.asarray(v) for v in tree.flatten(plan.space, self.buffer.read_samples(
                plan.name, np.arange(n)))] if small else None)
        return cache[plan.name]

    def at_times(self, name: str, episode: np.ndarray, t: np.ndarray) -> tuple[list[np.ndarray], Alignment]:
        """Stream ``name`` at times ``t`` (int64 ns ``(Q,)``) in view episodes ``episode``: its leaf arrays
        ``(Q, ...)`` and the :class:`~trajstore.streams.align.Alignment` used."""
        plan = self._by_name[name]
        a = plan.align(episode, t)
        return self.values(plan, a.lo, a.hi, a.weight), a

    def __repr__(self) -> str:
        return f"AlignedStorage({self.where or 'memory'}, steps={len(self)}, streams={list(self._by_name)})"


class ViewDiscardedError(TrajstoreError, ValueError):
    """An aligned view holds an open episode that the writer discarded (its positions may hold new
    samples): make a new view. Not a :class:`~trajstore.errors.StaleReadError`: reading again cannot help."""


def check_holds(path: Any, name: str, held: int, needed: int, *, writer: bool = False) -> None:
    """Raise ValueError when stream ``name`` holds ``held`` samples, fewer than the ``needed`` an aligned
    view was made with: the view (made on a writer's buffer before it flushed) was sent to another process
    (pickled, a DataLoader worker), which reads the folder, holding only flushed samples; or (``writer``:
    the writer's own buffer) the writer discarded an episode the view holds."""
    if held < needed and writer:
        raise ViewDiscardedError(f"this aligned view of {path} was made with {needed} samples of stream {name!r}, "
                                 f"but only {held} are held now: the writer discarded an episode this view holds "
                                 f"(discard_episode()); make a new view")
    if held < needed:
        raise ValueError(f"this aligned view of {path} was made with {needed} samples of stream {name!r}, but "
                         f"only {held} are held here: other processes (an unpickled copy, DataLoader workers) read the "
                         f"folder, which holds only the samples the writer flushed; flush() the writer before "
                         f"sending the view to other processes")


def _unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of int64 ``(Q,)``; by a mark array when the values lie
    close together (a batch's samples usually do), else by sorting."""
    low, high = int(values.min()), int(values.max())
    if high - low > 16 * len(values):
        return np.unique(values, return_inverse=True)
    marks = np.zeros(high - low + 1, bool)
    marks[values - low] = True
    rank = np.cumsum(marks) - 1
    return np.flatnonzero(marks) + low, rank[values - low]
