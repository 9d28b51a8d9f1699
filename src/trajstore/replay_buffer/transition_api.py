"""Transitions ``(s_t, a_t, R_t, s_{t+n})`` for off-policy training: :meth:`TransitionMethods.sample_transitions`,
mixed into :class:`~trajstore.replay_buffer.ReplayBuffer`.

The step layout is the one the recorders write (``RecordEpisodes``, ``record_gymnasium``): a dict
space with ``observation`` (any subtree), ``action``, ``reward``, ``terminated`` and ``truncated``,
where step ``t`` holds the observation the action was taken in and the reward, flags that followed.
The observation after step ``t`` is therefore step ``t + 1``'s, and after an episode's last step it
is the episode's final observation (``end_episode(final_observation=...)``), which no step holds.

Anchors are drawn with the window machinery (:mod:`~trajstore.replay_buffer.samplers`): the margin
``after = n_step`` inside the episode, except that an episode with a final observation keeps its last
``n_step`` steps as anchors (their next observation is the final one). Cost ``O(B log E)`` per call
plus the reads: the reward/flag leaves at ``B * n`` steps, the observation and action leaves at ``B``
steps, the observation leaves at up to ``B`` next steps, one final observation per distinct episode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from trajstore.errors import StaleReadError
from trajstore.spaces import DictSpace, tree
from trajstore.storages._selection import Selection, from_slots

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

STEP_KEYS = ("action", "reward", "terminated", "truncated")


class TransitionMethods:
    """``sample_transitions`` of a :class:`~trajstore.replay_buffer.ReplayBuffer` (no state of its own)."""

    def sample_transitions(self: "ReplayBuffer", batch_size: int, *, n_step: int = 1, gamma: float = 0.99,
                           rng: np.random.Generator | None = None, observation_key: str = "observation",
                           episodes: Iterable[int] | None = None) -> dict[str, Any]:
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

        Raises:
            ValueError: the space is not a dict with ``observation_key``, ``action``, ``reward``,
                ``terminated`` and ``truncated``; ``n_step`` < 1, ``gamma`` outside ``[0, 1]``,
                ``batch_size`` < 1; no step is valid; ``episodes`` names an id that is not held.
            StaleReadError: never from here: a reader of a live ring redraws by itself.
        """
        leaves = self._transition_leaves(observation_key)
        if isinstance(n_step, bool) or not isinstance(n_step, (int, np.integer)) or n_step < 1:
            raise ValueError(f"n_step must be an int >= 1, got {n_step!r}")
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {gamma!r}")
        rng = rng or np.random.default_rng()
        selected = self._selected_ids(episodes)
        keep_final = observation_key == "observation"
        return self._draw_and_read(
            lambda: self._draw_anchors(0, int(n_step), batch_size, rng, selected, keep_final_steps=keep_final),
            lambda drawn: self._read_transitions(drawn, leaves, int(n_step), float(gamma), observation_key))

    def _transition_leaves(self: "ReplayBuffer", observation_key: str) -> dict[str, list[int]]:
        """Leaf positions of each part of a step, checked once."""
        missing = [k for k in (observation_key, *STEP_KEYS) if not isinstance(self.space, DictSpace)
                   or k not in self.space.spaces]
        if missing:
            raise ValueError(f"sample_transitions needs the step keys {[observation_key, *STEP_KEYS]}; the space "
                             f"has no {missing}")
        paths = tree.leaf_paths(self.space)
        return {key: [i for i, p in enumerate(paths) if tree.under(p, (key,))] for key in (observation_key, *STEP_KEYS)}

    def _read_at(self: "ReplayBuffer", logical: np.ndarray, which: list[int]) -> list[np.ndarray]:
        """Leaves ``which`` at logical indices ``logical`` (int64, any shape), shaped ``(*logical.shape, ...)``."""
        sel = self._ring.slots_of(from_slots(logical.reshape(-1)))
        values = self.storage.read_leaves(Selection(sel.slots), which)
        out = []
        for value in values:
            if sel.order is not None:
                value = value[sel.order]
            out.append(value.reshape(*logical.shape, *value.shape[1:]))
        return out

    def _read_transitions(self: "ReplayBuffer", drawn: tuple[np.ndarray, np.ndarray, np.ndarray],
                          leaves: dict[str, list[int]], n: int, gamma: float, observation_key: str) -> dict[str, Any]:
        if not self.read_only:
            self._write_staged()  # the writer reads its own staged steps
        view, view_episodes = self._ring, self._episodes
        t, _, stop = drawn
        batch = len(t)
        steps = t[:, None] + np.arange(n, dtype=np.int64)[None, :]
        summed = steps < stop[:, None]  # (B, n)
        k = summed.sum(axis=1)  # rewards summed, >= 1
        reward_n, term_n, trunc_n = self._read_at(np.minimum(steps, stop[:, None] - 1),
                                                  leaves["reward"] + leaves["terminated"] + leaves["truncated"])
        dtype = reward_n.dtype if reward_n.dtype.kind == "f" else np.dtype(np.float32)
        weights = np.where(summed, gamma ** np.arange(n, dtype=np.float64)[None, :], 0.0)
        weights = weights.reshape(*weights.shape, *([1] * (reward_n.ndim - 2)))
        rows = np.arange(batch)
        obs_leaves = leaves[observation_key]
        now = self._read_at(t, obs_leaves + leaves["action"])
        nxt = t + n
        inside = nxt < stop
        next_leaves = [np.empty((batch, *v.shape[1:]), v.dtype) for v in now[:len(obs_leaves)]]
        if inside.any():
            for out, value in zip(next_leaves, self._read_at(nxt[inside], obs_leaves)):
                out[inside] = value
        finals = self._read_finals(view, stop[~inside], next_leaves, ~inside, observation_key)
        self._check_not_stale(view, view_episodes, int(t.min()), int(np.minimum(nxt, stop - 1).max()))
        for episode_id, number in finals:
            if self._episodes.final_number(episode_id) != number:
                raise StaleReadError(f"episode {episode_id} left {self.cache_path} while its final observation was "
                                     "read: the view is refreshed, index again")
        obs_space = tree.subspace(self.space, (observation_key,))
        return {"observation": tree.unflatten(obs_space, now[:len(obs_leaves)]),
                "action": tree.unflatten(self.space.spaces["action"], now[len(obs_leaves):]),
                "reward": (reward_n * weights).sum(axis=1).astype(dtype),
                "next_observation": tree.unflatten(obs_space, next_leaves),
                "terminated": term_n[rows, k - 1], "truncated": trunc_n[rows, k - 1],
                "discount": (gamma ** k.astype(np.float64)).astype(dtype), "index": t.astype(np.int64)}

    def _read_finals(self: "ReplayBuffer", view: Any, stops: np.ndarray, out: list[np.ndarray],
                     rows: np.ndarray, observation_key: str) -> list[tuple[int, int]]:
        """Fill ``out[leaf][rows]`` (``rows``: bool ``(B,)``) with the final observations of the episodes
        ending at logical ``stops`` (one per true row), reading each episode's once; return the
        ``(episode id, final number)`` pairs read."""
        if not len(stops):
            return []
        table = self._episodes
        # Each stop is that of a closed episode with a final observation (only those keep their last anchors).
        cols = np.searchsorted(table.stops, stops + view.first_step)
        obs_space = tree.subspace(self.space, (observation_key,))
        targets = np.flatnonzero(rows)
        read = []
        for col in np.unique(cols):
            number = int(table.finals[col])
            value = tree.flatten(obs_space, self._finals.read(number))
            at = targets[cols == col]
            for leaf, v in zip(out, value):
                leaf[at] = v
            read.append((int(table.ids[col]), number))
        return read
