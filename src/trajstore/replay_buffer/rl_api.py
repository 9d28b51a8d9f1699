"""Prioritized replay in the buffer's public API.

:class:`ReinforcementAPI` is a base of :class:`~trajstore.replay_buffer.ReplayBuffer` (over
:class:`~trajstore.replay_buffer.training_api.TrainingAPI`, whose samplers and
:mod:`~trajstore.replay_buffer.transitions_api`'s ``sample_transitions`` take ``priority=``): the priority sets
(``priority_sets``, ``add_priorities``, ``priorities``) and ``update_priorities``. The samplers'
``priority=`` draws are made by :mod:`~trajstore.replay_buffer.prioritized`; the sets live in
:mod:`~trajstore.replay_buffer.priorities` (on disk, with their durability rule) and their trees in
:mod:`~trajstore.replay_buffer.sum_tree`. It holds no state.

Only the writer changes priorities; its changes are durable and seen by readers after its next commit
(``flush``, ``end_episode``, ``close``). A reader (``load_from``, a DataLoader worker) draws by the
committed priorities of its view, rebuilt after each ``refresh``.
"""

from __future__ import annotations

import abc
from typing import Any, Iterable

import numpy as np

from trajstore.replay_buffer.prioritized import PrioritizedDraw, PriorityInfo, PriorityUpdate, check_exponents
from trajstore.replay_buffer.training_api import TrainingAPI
from trajstore.replay_buffer.view import retrying


class ReinforcementAPI(TrainingAPI):
    """``priority_sets``, ``add_priorities``, ``priorities``, ``sample_indices``,
    ``update_priorities``."""

    @abc.abstractmethod
    def _priority_source(self) -> Any:
        """The draws' :class:`~trajstore.replay_buffer.prioritized.PrioritySource` (raises if closed)."""

    @abc.abstractmethod
    def _writable(self) -> Any:
        """The buffer's writer (raises ReadOnlyError for a reader)."""

    # -- priority sets ---------------------------------------------------------------------
    @property
    def priority_sets(self) -> tuple[str, ...]:
        """The names of the priority sets (a reader: those committed in its view), sorted."""
        return tuple(self._priority_source().names())

    def add_priorities(self, name: str) -> None:
        """Add the priority set ``name``: every held step gets priority 1.0; committed with the next flush.

        Raises:
            ReadOnlyError: a read-only buffer. ValueError: a bad or taken name. TypeError: not a str.
        """
        writer = self._writable()
        writer.priorities.add(name, writer.view().ring)

    def priorities(self, priority: str) -> np.ndarray:
        """The priorities of set ``priority`` of the held steps, float32 ``(len(rb),)``, in logical order
        (a reader: as committed for its view).

        Raises:
            KeyError: no such set (names the sets there are).
        """
        source = self._priority_source()
        if priority not in source.names():
            raise KeyError(f"no priority set {priority!r} in this buffer (sets: {source.names()})")
        return source.held_values(self._reads().views.current(), priority).copy()

    def sample_indices(self, batch_size: int, *, priority: str, alpha: float = 0.6, beta: float = 0.4,
                       rng: np.random.Generator | None = None, episodes: Iterable[int] | None = None,
                       on_damaged: str = "raise") -> PriorityInfo:
        """What ``sample(batch_size, priority=...)`` draws, without reading any data: the
        :class:`~trajstore.replay_buffer.prioritized.PriorityInfo` (indices, step numbers, weights).
        ``O(B log N)``. Arguments and errors as :meth:`sample`."""
        reads, rng = self._reads(), rng or np.random.default_rng()
        selected = self._selected(reads, episodes, on_damaged)
        draw = self._priority_draw(priority, alpha, beta, batch_size, rng)
        if draw is None:
            raise TypeError("sample_indices needs a priority set: priority='td'")
        retrying(reads.views, lambda view, touched: draw.steps(view, selected), "sample_indices")
        return draw.info

    def update_priorities(self, indices: Any, values: Any, priority: str | None = None) -> PriorityUpdate:
        """Set the priorities of steps; the writer only. Durable and seen by readers after the next
        :meth:`flush` (or ``end_episode``, ``close``). ``O(B log N)``.

        Args:
            indices: step numbers, int ``(B,)`` (``info.step`` of a prioritized draw: stable while the ring
                moves, not logical indices), or the :class:`~trajstore.replay_buffer.prioritized.PriorityInfo`
                itself (its ``step``; then steps that a ``discard_episode`` since gave to new steps are dropped too).
            values: the new priorities, float ``(B,)``, each finite and > 0 (as float32); a step given twice
                gets one of its values (NumPy's assignment keeps the last). The largest ever given is what new steps get.
            priority: the set; default the info's, else the buffer's only set.

        Returns:
            :class:`~trajstore.replay_buffer.prioritized.PriorityUpdate` ``(updated, dropped)``: steps no
            longer held (the ring overwrote them since the draw, or they were discarded) are dropped: the
            step now in their slot keeps its own priority.

        Raises:
            ReadOnlyError: a read-only buffer (readers draw by the writer's committed priorities).
            KeyError: no such set. ValueError: ``values`` not finite and > 0, lengths that differ, a negative
                step number, no ``priority`` given with several sets. TypeError: indices that are not ints.
        """
        writer = self._writable()
        info = indices if isinstance(indices, PriorityInfo) else None
        steps = _steps(info.step if info is not None else indices)
        new = _values(values, len(steps))
        names = sorted(writer.priorities.sets)
        if priority is None:
            if info is None and len(names) != 1:
                raise ValueError(f"update_priorities: say which set with priority= (sets: {names})")
            priority = info.priority if info is not None else names[0]
        chosen = writer.priorities.get(priority)
        view = writer.view()
        ring = view.ring
        chosen.sync(ring)
        held = (steps >= ring.first_step) & (steps < ring.appended)
        if info is not None and info.discards != view.episodes.discards and info.open_start is not None:
            held &= steps < info.open_start  # a discard since the draw gave these step numbers to new steps
        kept = steps[held] - ring.first_step
        slots = kept if ring.capacity is None else (kept + ring.head) % ring.capacity
        chosen.update(ring, slots, new[held])
        return PriorityUpdate(int(held.sum()), int(len(steps) - held.sum()))

    def _priority_draw(self, priority: str | None, alpha: Any, beta: Any, batch_size: int, rng: np.random.Generator,
                       return_indices: bool = False) -> PrioritizedDraw | None:
        if priority is None:
            return None
        if return_indices:
            raise TypeError("priority= returns (batch, info) with the indices in info.index: drop return_indices")
        alpha, beta = check_exponents(alpha, beta)
        return PrioritizedDraw(self._priority_source(), priority, alpha, beta, batch_size, rng)


def _steps(indices: Any) -> np.ndarray:
    """Step numbers as int64 ``(B,)``.

    Raises:
        TypeError: not integers. ValueError: not 1-D, or a negative one.
    """
    arr = np.asarray(indices)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)) or arr.dtype == bool:
        raise TypeError(f"update_priorities: indices must be a 1-D array of step numbers (ints, info.step), got "
                        f"{arr.dtype} of shape {arr.shape}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"update_priorities: indices are step numbers >= 0, got {int(arr.min())}")
    return arr


def _values(values: Any, n: int) -> np.ndarray:
    """New priorities as float32 ``(n,)``, each finite and > 0.

    Raises:
        ValueError: another length, or a value that is not finite and > 0 as float32 (the first one named).
    """
    try:
        arr = np.asarray(values, np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"update_priorities: values must be numbers, got {type(values).__name__}") from exc
    if arr.shape != (n,):
        raise ValueError(f"update_priorities: values must have shape ({n},) like indices, got {arr.shape}")
    with np.errstate(over="ignore"):
        out = arr.astype(np.float32)  # too large for float32: inf, refused below
    bad = ~(np.isfinite(out) & (out > 0))
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise ValueError(f"update_priorities: values must be finite and > 0 (as float32), got values[{at}] = "
                         f"{arr[at]!r}")
    return out
