"""A :class:`Selection`: which slots a read or write touches, made once per request.

The edge (the replay buffer, or a storage used on its own) turns the user's index into a
``Selection`` with :func:`select`; every layer below takes it as it is, the way h5py passes
an existing selection through and zarr builds its indexer once. Storages read and write
sorted, unique slots; ``order`` puts a read back into the requested order (unsorted and
repeated indices, what samplers produce), and ``runs`` are the contiguous stretches that a
file can read or write in one call.

Sorting uses ``argsort`` rather than ``np.unique``: the first ``np.unique`` call of a process
imports ``numpy.ma`` (several ms), which would be paid by every fresh reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Selection:
    """Slots of one request.

    Attributes:
        slots: sorted, unique slot numbers, int64, shape ``(M,)``.
        order: ``slots[order]`` is the requested sequence (shape ``(N,)``, N >= M with repeats),
            or ``None`` when the request was ``slots`` itself.
        scalar: the request was an int: results drop the leading axis.
    """

    slots: np.ndarray
    order: np.ndarray | None = None
    scalar: bool = False

    @property
    def size(self) -> int:
        """Number of values the request reads or writes (``N``)."""
        return len(self.slots) if self.order is None else len(self.order)

    @cached_property
    def runs(self) -> tuple[tuple[int, int, int], ...]:
        """``(row in slots, first slot, count)`` of each contiguous run of :attr:`slots`."""
        s = self.slots
        if len(s) == 0:
            return ()
        if int(s[-1]) - int(s[0]) + 1 == len(s):
            return ((0, int(s[0]), len(s)),)
        breaks = np.flatnonzero(np.diff(s) != 1) + 1
        starts = np.concatenate(([0], breaks)).tolist()
        ends = np.concatenate((breaks, [len(s)])).tolist()
        return tuple((a, int(s[a]), b - a) for a, b in zip(starts, ends))

    def in_slot_order(self) -> "Selection":
        """The same slots with no reordering: what a storage below the edge is handed."""
        return self if self.order is None and not self.scalar else Selection(self.slots)

    def last_writes(self) -> np.ndarray | None:
        """For a write with repeated slots: the input row that lands in each slot (the last one).

        Returns ``None`` when every input row is used in order.
        """
        if self.order is None:
            return None
        n = len(self.order)
        by_slot = np.argsort(self.order, kind="stable")  # rows of one slot stay in input order
        ordered = self.order[by_slot]
        last = np.empty(len(ordered), bool)  # not np.r_: 10-20 us a call, called per transition batch
        last[:-1] = ordered[1:] != ordered[:-1]
        last[-1:] = True
        rows = np.empty(len(self.slots), dtype=np.int64)
        rows[ordered[last]] = by_slot[last]
        return rows if n else None


def from_slots(slots: np.ndarray, scalar: bool = False) -> Selection:
    """A selection of trusted in-range ``slots`` given in the requested order (int64, shape ``(N,)``)."""
    if len(slots) < 2 or bool(np.all(slots[1:] > slots[:-1])):
        return Selection(slots, None, scalar)
    by_value = np.argsort(slots, kind="stable")
    ordered = slots[by_value]
    new = np.empty(len(ordered), bool)
    new[:1] = True
    new[1:] = ordered[1:] != ordered[:-1]
    order = np.empty(len(slots), dtype=np.int64)
    order[by_value] = np.cumsum(new) - 1
    return Selection(ordered[new], order, scalar)


def span(start: int, stop: int) -> Selection:
    """Slots ``start .. stop - 1``."""
    return Selection(np.arange(start, stop, dtype=np.int64))


def select(index: Any, length: int) -> Selection:
    """Normalise a user's ``index`` against ``length`` slots, NumPy-style.

    An index is an int (negative counts from the end), a slice with step >= 1, a 1-D integer
    array or list (any order, repeats allowed) or a boolean mask of length ``length``.

    Raises:
        IndexError: an int or array entry outside ``[-length, length)``, or a mask of the wrong length.
        TypeError: an index of another kind (float, a 2-D array, ...).
        ValueError: a slice with a step < 1 (as h5py).
    """
    if isinstance(index, (int, np.integer)) and not isinstance(index, (bool, np.bool_)):
        i = int(index)
        if not -length <= i < length:
            raise IndexError(f"index {i} is out of range for {length} slots")
        return Selection(np.array([i % length], dtype=np.int64), None, True)
    if isinstance(index, slice):
        start, stop, step = index.indices(length)
        if step < 1:
            raise ValueError(f"slice step must be >= 1, got {index.step}")
        return Selection(np.arange(start, stop, step, dtype=np.int64))
    arr = np.asarray(index)
    if arr.dtype == bool:
        if arr.ndim != 1 or len(arr) != length:
            raise IndexError(f"boolean mask of shape {arr.shape} does not match {length} slots")
        return Selection(np.flatnonzero(arr).astype(np.int64))
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"index must be an int, a slice, a 1-D integer array or a boolean mask, "
                        f"got {type(index).__name__} with dtype {arr.dtype} and shape {arr.shape}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < -length or arr.max() >= length):
        bad = arr[(arr < -length) | (arr >= length)][0]
        raise IndexError(f"index {bad} is out of range for {length} slots")
    return from_slots(np.where(arr < 0, arr + length, arr))
