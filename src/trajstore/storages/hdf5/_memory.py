"""The numeric leaves of an in-memory ``HDF5Storage`` (``cache_path=None``) as NumPy arrays.

An in-memory storage has no file format to keep, and HDF5 (its ``core`` driver) costs 20-80 us per
call and ~20 us per chunk a read touches: 256 random rows of a (4,) float32 leaf over 1M rows took
~5 ms. :class:`MemoryRows` holds each numeric leaf as one array that doubles when it grows (like
``MemmapStorage`` in memory): a write is a slice copy, a read one NumPy gather. Text leaves stay in
the in-memory HDF5 file, which still has every dataset (its extent follows the storage's length).
"""

from __future__ import annotations

import numpy as np

from trajstore.storages._selection import Selection


class MemoryRows:
    """Arrays of the leaves at some positions, ``(rows >= length, *shape)`` each."""

    def __init__(self, leaves: dict[int, tuple[tuple[int, ...], np.dtype]], length: int):
        self._arrays = {i: np.zeros((max(length, 16), *shape), dtype) for i, (shape, dtype) in leaves.items()}

    def handles(self, i: int) -> bool:
        return i in self._arrays

    def resize(self, length: int, old: int) -> None:
        """Room for ``length`` rows; rows past ``length`` after a shrink are zeroed (as new HDF5 rows read)."""
        for i, arr in self._arrays.items():
            if length > len(arr):
                grown = np.zeros((max(length, 2 * len(arr)), *arr.shape[1:]), arr.dtype)
                grown[:old] = arr[:old]
                self._arrays[i] = grown
            elif length < old:
                arr[length:old] = 0

    def write(self, i: int, sel: Selection, values: np.ndarray) -> None:
        arr = self._arrays[i]
        if len(sel.runs) > 2:
            arr[sel.slots] = values
            return
        for row, first, n in sel.runs:
            arr[first:first + n] = values[row:row + n]

    def read(self, i: int, sel: Selection) -> np.ndarray:
        arr, slots = self._arrays[i], sel.slots
        if len(slots) and int(slots[-1]) - int(slots[0]) + 1 == len(slots):  # one run: a slice copy
            return arr[int(slots[0]):int(slots[-1]) + 1].copy()
        return arr[slots]
