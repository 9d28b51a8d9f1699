"""``sample_transitions``: n-step transitions drawn for off-policy learning, uniformly or by priority.

:class:`TransitionsAPI` is a base of :class:`~trajstore.replay_buffer.training_api.TrainingAPI`; it checks
the request and reads with :func:`~trajstore.replay_buffer.transitions.read_transitions` under the one
retry policy. It holds no state.
"""

from __future__ import annotations

import abc
from typing import Any, Iterable

import numpy as np

from trajstore.replay_buffer import samplers
from trajstore.replay_buffer.output import output
from trajstore.replay_buffer.transitions import read_transitions, transition_leaves
from trajstore.replay_buffer.view import View, retrying


class TransitionsAPI(abc.ABC):
    """``sample_transitions``; the buffer gives ``_reads``, ``_selected`` and ``_priority_draw``
    (:class:`~trajstore.replay_buffer.training_api.TrainingAPI`)."""

    space: Any
    _reads: Any
    _selected: Any
    _priority_draw: Any

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
