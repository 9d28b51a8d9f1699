"""Ring bookkeeping: logical index <-> physical slot. Pure arithmetic, no I/O.

Logical index 0 is the oldest step still held; ``count - 1`` the newest. With a fixed
``capacity`` the steps live in a ring of slots starting at ``head``; unbounded, logical
and physical indices are the same. ``total`` counts every step ever appended (the
*global step*), so an episode table kept in global steps survives overwrites.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class RingState:
    """Where the held steps are.

    Attributes:
        capacity: number of slots, or ``None`` for unbounded.
        count: steps held (<= capacity).
        head: physical slot of logical index 0.
        total: steps appended since creation; global step of logical ``i`` is ``total - count + i``.
    """

    capacity: int | None
    count: int = 0
    head: int = 0
    total: int = 0

    @property
    def oldest_global(self) -> int:
        """Global step number of logical index 0."""
        return self.total - self.count

    def physical(self, logical: np.ndarray) -> np.ndarray:
        """Physical slots of logical indices (already in ``[0, count)``)."""
        if self.capacity is None:
            return logical
        return (logical + self.head) % self.capacity

    def plan_extend(self, n: int) -> tuple["RingState", list[tuple[slice, slice]]]:
        """Where to write a batch of ``n`` new steps.

        Returns:
            the state after the write, and ``(batch rows, physical slots)`` runs to copy
            (at most two, since the ring wraps at most once). When ``n > capacity`` only the
            last ``capacity`` rows are written: the others would be overwritten at once.
        """
        if n < 0:
            raise ValueError(f"cannot extend by {n} steps")
        if self.capacity is None:
            runs = [(slice(0, n), slice(self.count, self.count + n))] if n else []
            return replace(self, count=self.count + n, total=self.total + n), runs
        cap = self.capacity
        skip = max(0, n - cap)
        kept = n - skip
        start = (self.head + self.count + skip) % cap
        first = min(kept, cap - start)
        runs = [(slice(skip, skip + first), slice(start, start + first))] if first else []
        if kept > first:
            runs.append((slice(skip + first, n), slice(0, kept - first)))
        new_count = min(cap, self.count + n)
        new_head = (self.head + self.count + n - new_count) % cap
        return RingState(cap, new_count, new_head, self.total + n), runs

    def to_json(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "count": self.count, "head": self.head, "total": self.total}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RingState":
        state = cls(data["capacity"], int(data["count"]), int(data["head"]), int(data["total"]))
        cap = state.capacity
        if state.count < 0 or state.total < state.count or (cap is not None and not (
                0 <= state.count <= cap and 0 <= state.head < cap)):
            raise ValueError(f"inconsistent ring state {data}")
        return state
