"""Ring bookkeeping: logical index <-> slot. Pure arithmetic, no I/O.

Logical index 0 is the oldest step still held; ``count - 1`` the newest. With a fixed
``capacity`` the steps live in a ring of slots starting at ``head``; unbounded, a step's
logical index is its slot. ``appended`` counts every step ever appended: step ``g`` (its
*step number*) is the ``g``-th step appended, so an episode table kept in step numbers
survives overwrites.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trajstore.storages._selection import Selection


@dataclass(frozen=True)
class RingState:
    """Where the held steps are.

    Attributes:
        capacity: number of slots, or ``None`` for unbounded.
        count: steps held (<= capacity).
        head: slot of logical index 0.
        appended: steps appended since creation; logical ``i`` is step number ``appended - count + i``.
    """

    capacity: int | None
    count: int = 0
    head: int = 0
    appended: int = 0

    @property
    def first_step(self) -> int:
        """Step number of logical index 0 (the oldest step held)."""
        return self.appended - self.count

    def slots_of(self, logical: Selection) -> Selection:
        """The slot selection of a logical selection (its slots already in ``[0, count)``).

        No sort: sorted logical indices map to at most two increasing runs of slots (the ring
        wraps once), so the slots are the two runs swapped and the request order is rotated.
        """
        if self.capacity is None or self.head == 0:
            return logical
        slots = logical.slots + self.head
        wrap = int(np.searchsorted(slots, self.capacity))  # first logical index whose slot wraps
        if wrap == len(slots):
            return Selection(slots, logical.order, logical.scalar)
        if wrap == 0:
            return Selection(slots - self.capacity, logical.order, logical.scalar)
        n = len(slots)
        slots = np.concatenate((slots[wrap:] - self.capacity, slots[:wrap]))
        # logical.slots[i] now sits at (i - wrap) % n
        order = (np.arange(n) if logical.order is None else logical.order) - wrap
        order %= n
        return Selection(slots, order, logical.scalar)

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
            return RingState(None, self.count + n, self.head, self.appended + n), runs  # per append: no replace()
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
        return RingState(cap, new_count, new_head, self.appended + n), runs

    def advanced(self, n: int) -> "RingState":
        """The state after ``n`` more steps (the first element of :meth:`plan_extend`, without its runs).

        Raises:
            ValueError: ``n`` is negative.
        """
        if n < 0:
            raise ValueError(f"cannot extend by {n} steps")
        if self.capacity is None:
            return RingState(None, self.count + n, self.head, self.appended + n)  # per append: no replace()
        new_count = min(self.capacity, self.count + n)
        return RingState(self.capacity, new_count, (self.head + self.count + n - new_count) % self.capacity,
                         self.appended + n)

    def rewind(self, n: int) -> "RingState":
        """The state without the ``n`` newest steps: their step numbers and slots are the next to be written.

        Steps the ring overwrote to make room for them stay lost: ``count`` goes back by ``n`` at most
        to 0, and the oldest held step (``head``) does not move.

        Raises:
            ValueError: ``n`` is negative or more than were appended.
        """
        if not 0 <= n <= self.appended:
            raise ValueError(f"cannot rewind {n} of {self.appended} steps")
        return replace(self, count=max(0, self.count - n), appended=self.appended - n)

    def to_json(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "count": self.count, "head": self.head, "total": self.appended}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RingState":
        state = cls(data["capacity"], int(data["count"]), int(data["head"]), int(data["total"]))
        cap = state.capacity
        if state.count < 0 or state.appended < state.count or (cap is not None and not (
                0 <= state.count <= cap and 0 <= state.head < cap)):
            raise ValueError(f"inconsistent ring state {data}")
        return state
