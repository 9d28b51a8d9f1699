"""Prioritized draws (Schaul et al. 2016, "Prioritized Experience Replay") under one view: which steps
or anchors, and their importance weights. No data I/O.

**Probabilities.** Steps: held step ``i`` is drawn with ``P(i) = p_i ** alpha / sum_j p_j ** alpha`` over
the held steps ``j``. Windows and transitions: only valid anchors ``A`` can be drawn (those
``sample_windows`` / ``sample_transitions`` draw uniformly, inside the ``episodes=`` chosen), with
``P(i) = p_i ** alpha / sum_{j in A} p_j ** alpha``: the step distribution renormalised over ``A``. Drawn
by the sum tree of the held steps and drawn again where a draw is not in ``A`` (rejection keeps the
renormalised distribution exactly); after 8 rounds the rest are drawn from the running sums of the
masses of ``A`` (``O(n)``, when ``A`` holds a small part of the mass).

**Weights.** ``w_i = (N * P(i)) ** -beta / max_j w_j``, the maximum over the held steps (OpenAI
baselines' and TorchRL's ``PrioritizedSampler``'s normalisation, with the minimum priority):
``w_i = (p_i ** alpha / min_j p_j ** alpha) ** -beta``, ``j`` over every held step (also for windows and
transitions, so there the largest weight of a batch may be below 1). float32, in ``(0, 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.priorities import held_slots, slots_to_logical
from trajstore.replay_buffer.sum_tree import SumTree, draw
from trajstore.replay_buffer.view import View

Drawn = tuple[np.ndarray, np.ndarray, np.ndarray]
_REJECTION_ROUNDS = 8


@dataclass(frozen=True)
class PriorityInfo:
    """What a prioritized draw returns besides the data (``B`` = batch size).

    Attributes:
        index: logical indices of the steps (anchors) drawn, int64 ``(B,)``, valid for the view drawn from
            (as ``return_indices=True`` gives them).
        step: their step numbers (``index`` + the oldest held step's number), int64 ``(B,)``: stable while
            the ring moves; what :meth:`update_priorities` takes.
        weight: importance weights, float32 ``(B,)`` (see the module docstring).
        priority: the priority set drawn by.
        discards: the view's count of discarded episodes, and ``open_start`` the step number its open
            episode began at (``None``: none open); :meth:`update_priorities` drops updates of steps that a
            ``discard_episode`` since gave to other steps.
    """

    index: np.ndarray
    step: np.ndarray
    weight: np.ndarray
    priority: str
    discards: int
    open_start: int | None


class PriorityUpdate(NamedTuple):
    """What ``update_priorities`` did: ``updated`` steps got their value, ``dropped`` were no longer held
    (the ring overwrote them, or a ``discard_episode`` removed them) and kept nothing."""

    updated: int
    dropped: int


class PrioritySource(Protocol):
    """Where a draw gets its tree: the writer's live sets or a reader's committed ones."""

    def names(self) -> list[str]: ...

    def tree(self, view: View, name: str, alpha: float) -> SumTree: ...

    def held_values(self, view: View, name: str) -> np.ndarray: ...


def check_exponents(alpha: Any, beta: Any) -> tuple[float, float]:
    """``alpha`` and ``beta`` as floats.

    Raises:
        ValueError: not a finite number >= 0 (names the argument).
    """
    out = []
    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not (
                np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        out.append(float(value))
    return out[0], out[1]


def locate(held: samplers.HeldAnchors, logical: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which logical indices are valid anchors of ``held``, with their episodes' held steps.

    Returns:
        ``(valid, starts, stops)``: bool ``(B,)``, and int64 ``(B,)`` logical ``[start, stop)`` of the anchor's
        episode where valid.
    """
    index, oldest, before = held.index, held.oldest, held.index.before
    g = logical + oldest
    valid = np.zeros(len(g), bool)
    starts = np.zeros(len(g), np.int64)
    stops = np.zeros(len(g), np.int64)
    if len(index.starts):
        j = np.searchsorted(index.starts, g, side="right") - 1
        jc = np.maximum(j, 0)
        first = np.maximum(index.starts.take(jc), oldest)
        valid = (j >= 0) & (g >= first + before) & (g < index.ends.take(jc))
        starts, stops = first, index.stops.take(jc)
    if held.open_from is not None:
        in_open = (g >= held.open_from + before) & (g < held.appended - index.after)
        valid |= in_open
        starts = np.where(in_open, held.open_from, starts)
        stops = np.where(in_open, held.appended, stops)
    return valid, starts - oldest, stops - oldest


class PrioritizedDraw:
    """Draws of ``batch_size`` by priority set ``name`` of ``source``; :attr:`info` is the last draw's."""

    def __init__(self, source: PrioritySource, name: str, alpha: float, beta: float, batch_size: int,
                 rng: np.random.Generator):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if name not in source.names():
            raise KeyError(f"no priority set {name!r} in this buffer (sets: {source.names()}; declare one with "
                           "ReplayBuffer.create(..., priorities=(name,)) or rb.add_priorities(name); a reader "
                           "sees a set after the writer's next flush)")
        self.source, self.name, self.alpha, self.beta = source, name, alpha, beta
        self.batch_size, self.rng = int(batch_size), rng
        self.info: PriorityInfo | None = None

    def steps(self, view: View, selected: np.ndarray | None = None) -> np.ndarray:
        """Logical indices of held steps (of the ``selected`` episodes, ``None``: all), int64 ``(B,)``."""
        if selected is not None:
            return self.anchors(view, 0, 0, selected)[0]
        if view.count == 0:
            raise ValueError("cannot sample from an empty buffer")
        tree = self.source.tree(view, self.name, self.alpha)
        slots = draw(tree, self.batch_size, self.rng)
        logical = slots_to_logical(view.ring, slots)
        self._record(view, tree, slots, logical)
        return logical

    def anchors(self, view: View, before: int, after: int, selected: np.ndarray | None = None,
                keep_final_steps: bool = False) -> Drawn:
        """Valid anchors of the margin ``before``/``after`` (see :mod:`~trajstore.replay_buffer.samplers`),
        as ``samplers.draw_in`` returns them.

        Raises:
            ValueError: no held step is a valid anchor.
        """
        held = samplers.held_in(view.ring, view.episodes, before, after, selected, keep_final_steps)
        if held.total == 0:
            raise ValueError(samplers.no_anchor_message(held))
        tree = self.source.tree(view, self.name, self.alpha)
        ring = view.ring
        slots = draw(tree, self.batch_size, self.rng)
        logical = slots_to_logical(ring, slots)
        valid, starts, stops = locate(held, logical)
        for _ in range(_REJECTION_ROUNDS):
            if valid.all():
                break
            bad = np.flatnonzero(~valid)
            slots[bad] = draw(tree, len(bad), self.rng)
            logical[bad] = slots_to_logical(ring, slots[bad])
            valid[bad], starts[bad], stops[bad] = locate(held, logical[bad])
        if not valid.all():  # the valid anchors hold little of the mass: their running sums, O(n)
            bad = np.flatnonzero(~valid)
            every = np.arange(ring.count, dtype=np.int64)
            mass = tree.masses(held_slots(ring)) * locate(held, every)[0]
            running = np.cumsum(mass)
            logical[bad] = np.minimum(np.searchsorted(running, self.rng.random(len(bad)) * running[-1],
                                                      side="right"), ring.count - 1)
            slots[bad] = held_slots(ring).take(logical[bad])
            valid[bad], starts[bad], stops[bad] = locate(held, logical[bad])
        self._record(view, tree, slots, logical)
        return logical, starts, stops

    def _record(self, view: View, tree: SumTree, slots: np.ndarray, logical: np.ndarray) -> None:
        smallest = tree.min
        if self.beta == 0:
            weight = np.ones(len(slots), np.float32)
        else:
            weight = ((tree.masses(slots) / smallest) ** -self.beta).astype(np.float32)
        self.info = PriorityInfo(logical, logical + view.first_step, weight, self.name, view.episodes.discards,
                                 view.episodes.open_start)
