"""Checks of what a storage is given: capacities, stored spaces, and the values of one step or a batch.

Re-exported by :mod:`trajstore.storages.base` (``from trajstore.storages.base import validated_step``
keeps working). Each check runs once, at the edge (``SpaceStorage.set``/``extend``, the buffer's
``append``), and hands trusted leaf arrays down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.spaces import Space, space_from_json, tree
from trajstore.spaces.step_check import step_check
from trajstore.storages._selection import Selection


def check_capacity(capacity: Any) -> int | None:
    """``None`` (unbounded) or a positive int.

    Raises:
        ValueError: 0, a negative number, or a non-integer.
    """
    if capacity is None:
        return None
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity must be None (unbounded) or an int >= 1, got {capacity!r}")
    return int(capacity)


def stored_space(path: Path, stored: Any, expected: Space | None, parsed: Space | None = None) -> Space:
    """The space a folder records, checked against ``expected`` when given.

    The comparison is on the JSON forms, so an owner that knows the space (a buffer reopening
    its storage) pays no parsing. ``parsed``: ``stored`` already parsed, if it was.

    Raises:
        ValueError: ``expected`` differs from the stored space.
        FormatError, UnknownTypeError: the stored JSON is not a space.
    """
    if expected is not None and stored == expected.to_json():
        return expected
    space = parsed if parsed is not None else space_from_json(stored)
    if expected is not None and space != expected:
        raise ValueError(f"{path}: the given space differs from the stored one:\n"
                         f"  given:  {expected!r}\n  stored: {space!r}")
    return space



def validated_step(space: Space, value: Any, *, check_bounds: bool = True) -> list[np.ndarray]:
    """One value of ``space``, validated, as leaf arrays with a leading axis of 1.

    ``check_bounds=False`` stores values outside a leaf's bounds (and NaN) as they are.

    Raises:
        InvalidValueError: names the leaf and what was expected.
    """
    return step_check(space, check_bounds).validate(value)  # one pass; the full validation where it refuses


def validated_batch(space: Space, value: Any, *, check_bounds: bool = True) -> tuple[list[np.ndarray], int]:
    """A batch of ``space`` (every leaf with the same leading axis ``N``), validated: ``(leaf arrays, N)``.

    Raises:
        InvalidValueError: names the leaf and what was expected, or two leaves whose ``N`` differ.
    """
    leaves = tree.flatten(space, space.validate(value, batched=True, check_bounds=check_bounds))
    return leaves, (len(leaves[0]) if leaves else 0)


def validated_for(space: Space, value: Any, sel: Selection, *, check_bounds: bool = True) -> list[np.ndarray]:
    """``value`` validated for a write at ``sel``: one value for an int index, else a batch of ``sel.size``.

    Raises:
        InvalidValueError: names the leaf and what was expected, or the batch and index sizes.
    """
    if sel.scalar:
        return validated_step(space, value, check_bounds=check_bounds)
    leaves, n = validated_batch(space, value, check_bounds=check_bounds)
    if n != sel.size:
        raise InvalidValueError(f"the index selects {sel.size} slots but the value has a batch of {n}")
    return leaves
