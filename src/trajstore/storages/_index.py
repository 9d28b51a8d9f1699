"""Turn a user index (int, slice, integer array, boolean mask) into slot positions.

Storages read and write sorted, unique positions; the caller scatters results back
through the inverse map, so unsorted and repeated indices (what samplers produce) work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Selection:
    """A normalised index.

    Attributes:
        positions: sorted unique slot numbers, int64, shape ``(M,)``.
        inverse: ``positions[inverse]`` is the requested order (shape ``(N,)``), or ``None``
            when the request already was ``positions``.
        scalar: the index was an int: the result drops the leading axis.
    """

    positions: np.ndarray
    inverse: np.ndarray | None
    scalar: bool

    @property
    def size(self) -> int:
        return len(self.positions) if self.inverse is None else len(self.inverse)


def normalize_index(index: Any, length: int) -> Selection:
    """Normalise ``index`` against ``length`` slots, NumPy-style.

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
        return Selection(np.arange(start, stop, step, dtype=np.int64), None, False)
    arr = np.asarray(index)
    if arr.dtype == bool:
        if arr.ndim != 1 or len(arr) != length:
            raise IndexError(f"boolean mask of shape {arr.shape} does not match {length} slots")
        return Selection(np.flatnonzero(arr).astype(np.int64), None, False)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"index must be an int, a slice, a 1-D integer array or a boolean mask, "
                        f"got {type(index).__name__} with dtype {arr.dtype} and shape {arr.shape}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and (arr.min() < -length or arr.max() >= length):
        bad = arr[(arr < -length) | (arr >= length)][0]
        raise IndexError(f"index {bad} is out of range for {length} slots")
    arr = np.where(arr < 0, arr + length, arr)
    if arr.size == 0 or np.all(arr[1:] > arr[:-1]):
        return Selection(arr, None, False)
    positions, inverse = np.unique(arr, return_inverse=True)
    return Selection(positions, inverse, False)


def last_writes(sel: Selection) -> np.ndarray | None:
    """For a write with repeated positions: which input row lands in each position (the last one).

    Returns ``None`` when every input row is used in order.
    """
    if sel.inverse is None:
        return None
    n = len(sel.inverse)
    rows = np.empty(len(sel.positions), dtype=np.int64)
    # Stable sort by position; the last row of each run of equal positions wins.
    order = np.lexsort((np.arange(n), sel.inverse))
    last = np.r_[sel.inverse[order][1:] != sel.inverse[order][:-1], True]
    rows[sel.inverse[order][last]] = order[last]
    return rows


def contiguous(positions: np.ndarray) -> bool:
    """True if sorted unique ``positions`` form one run ``a, a+1, ..., b``."""
    return len(positions) > 0 and int(positions[-1]) - int(positions[0]) + 1 == len(positions)
