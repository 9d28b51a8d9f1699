"""The reinforcement-learning half of the buffer's public API: n-step transitions and prioritized replay.

:class:`ReinforcementAPI` is a base of :class:`~trajstore.replay_buffer.ReplayBuffer` (over
:class:`~trajstore.replay_buffer.training_api.TrainingAPI`): ``sample_transitions``, the priority sets
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

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.output import output
from trajstore.replay_buffer.prioritized import PrioritizedDraw, PriorityInfo, PriorityUpdate, check_exponents
from trajstore.replay_buffer.training_api import TrainingAPI
from trajstore.replay_buffer.transitions import read_transitions, transition_leaves
from trajstore.replay_buffer.view import View, retrying


class ReinforcementAPI(TrainingAPI):
    """``sample_transitions``, ``priority_sets``, ``add_priorities``, ``priorities``, ``sample_indices``,
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
                gets its last value. The largest ever given is what new steps get.
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

    # -- transitions -----------------------------------------------------------------------
    def sample_transitions(self, batch_size: int, *, n_step: int = 1, gamma: float = 0.99,
                           rng: np.random.Generator | None = None, observation_key: str = "observation",
                           episodes: Iterable[int] | None = None, on_damaged: str = "raise", as_torch: bool = False,
                           device: Any = None, pin_memory: bool = False, priority: str | None = None,
                           alpha: float = 0.6, beta: float = 0.4) -> Any:
        """``batch_size`` transitions drawn uniformly (with replacement) among the valid steps ``t``.

        A step ``t`` is valid when its ``n_step``-th successor ``t + n`` is held in the same episode,
        or when the episode ends before ``t + n`` and has a final observation. A transition never
        crosses an episode boundary or the ring's oldest held step (``t`` is held, so is every later
        step of its episode). The last ``n_step`` steps of an episode without a final observation (the
        one being recorded, an interrupted one) are never drawn.

        Returns:
            a dict, ``B`` = ``batch_size``:

            - ``observation``: step ``t``'s observation, nested like the space's, leaves ``(B, ...)``.
            - ``action``: step ``t``'s action, ``(B, ...)``.
            - ``reward``: the n-step return ``sum_{i<k} gamma**i * reward[t + i]``, ``k = min(n_step,
              stop - t)`` (the sum stops at the episode's end), ``(B, ...)`` in the reward leaf's float
              dtype (float32 for an integer reward).
            - ``next_observation``: step ``t + n``'s observation, or the episode's final observation
              when ``t + n`` is past its last step; nested like ``observation``.
            - ``terminated``, ``truncated``: those of step ``t + k - 1``, the last step summed (for
              ``n_step=1``, step ``t``'s own); dtype as stored, ``(B, ...)``.
            - ``discount``: ``gamma**k``, ``(B,)``, same dtype as ``reward``: the factor of the bootstrap,
              ``target = reward + discount * (1 - terminated) * V(next_observation)``.
            - ``index``: logical index of step ``t``, int64 ``(B,)`` (0 = oldest held step).

        Args:
            n_step: ``n`` >= 1.
            gamma: discount in ``[0, 1]``.
            rng: the generator of the draw (default: a fresh ``np.random.default_rng()``).
            observation_key: the key of the observation subtree. Final observations are kept for
                ``"observation"`` only: with another key, episode ends are never drawn.
            episodes: episode ids (``Episode.id``): draw only inside those episodes.
            on_damaged: ``"raise"`` (default): when an episode it may draw from is damaged (a payload
                file holding some of its steps is missing, see :attr:`damaged`), raise ``FormatError``
                before reading; ``"skip"``: leave the damaged episodes out (a damaged step is never drawn).
            as_torch, device, pin_memory: as :meth:`sample`.
            priority, alpha, beta: draw the valid steps ``t`` by a priority set (``P(t)`` renormalised over the
                valid steps, :mod:`~trajstore.replay_buffer.prioritized`) and return ``(transitions, info)``.

        Raises:
            ValueError: the space is not a dict with ``observation_key``, ``action``, ``reward``,
                ``terminated`` and ``truncated``; ``n_step`` < 1, ``gamma`` outside ``[0, 1]``,
                ``batch_size`` < 1; no step is valid; ``episodes`` names an id that is not held.
            RetriesExhaustedError: a reader of a live ring raced the writer on every one of its draws
                (:data:`~trajstore.replay_buffer.view.MAX_READ_ATTEMPTS`); a race is otherwise drawn again.
        """
        leaves = transition_leaves(self.space, observation_key)
        if isinstance(n_step, bool) or not isinstance(n_step, (int, np.integer)) or n_step < 1:
            raise ValueError(f"n_step must be an int >= 1, got {n_step!r}")
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
        rng, out, reads = rng or np.random.default_rng(), output(as_torch, device, pin_memory), self._reads()
        selected = self._selected(reads, episodes, on_damaged)
        keep_final = observation_key == "observation"
        n, g = int(n_step), float(gamma)
        draw = self._priority_draw(priority, alpha, beta, batch_size, rng)

        def drawn(view: View) -> Any:
            if draw is not None:
                return draw.anchors(view, 0, n, selected, keep_final_steps=keep_final)
            return samplers.draw_in(view.ring, view.episodes, 0, n, batch_size, rng, selected,
                                    keep_final_steps=keep_final)

        result = out(retrying(reads.views, lambda view, touched: read_transitions(
            reads, view, drawn(view), leaves, n, g, observation_key, touched), "sample_transitions"))
        return result if draw is None else (result, draw.info)


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
