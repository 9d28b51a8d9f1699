"""Transitions ``(s_t, a_t, R_t, s_{t+n})`` for off-policy training: how ``ReplayBuffer.sample_transitions`` reads them.

The step layout is the one the recorders write (``RecordEpisodes``, ``record_gymnasium``): a dict
space with ``observation`` (any subtree), ``action``, ``reward``, ``terminated`` and ``truncated``,
where step ``t`` holds the observation the action was taken in and the reward, flags that followed.
The observation after step ``t`` is therefore step ``t + 1``'s, and after an episode's last step it
is the episode's final observation (``end_episode(final_observation=...)``), which no step holds.

Anchors are drawn with the window machinery (:mod:`~trajstore.replay_buffer.samplers`): the margin
``after = n_step`` inside the episode, except that an episode with a final observation keeps its last
``n_step`` steps as anchors (their next observation is the final one). Cost ``O(B log E)`` per call
plus the reads: the reward/flag leaves at ``B * n`` steps, the observation and action leaves at ``B``
steps (with ``n_step=1``, one read of every leaf at the ``B`` steps), the observation leaves at up to ``B``
next steps, one final observation per distinct episode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trajstore.replay_buffer.reads import BufferReads, Drawn
from trajstore.replay_buffer.view import Touched, View
from trajstore.spaces import DictSpace, Space, tree

STEP_KEYS = ("action", "reward", "terminated", "truncated")


def transition_leaves(space: Space, observation_key: str) -> dict[str, list[int]]:
    """Leaf positions of each part of a step, checked once.

    Raises:
        ValueError: the space is not a dict with ``observation_key`` and :data:`STEP_KEYS`.
    """
    missing = [k for k in (observation_key, *STEP_KEYS) if not isinstance(space, DictSpace)
               or k not in space.spaces]
    if missing:
        raise ValueError(f"sample_transitions needs the step keys {[observation_key, *STEP_KEYS]}; the space "
                         f"has no {missing}")
    paths = tree.leaf_paths(space)
    return {key: [i for i, p in enumerate(paths) if tree.under(p, (key,))] for key in (observation_key, *STEP_KEYS)}


def read_transitions(reads: BufferReads, view: View, drawn: Drawn, leaves: dict[str, list[int]], n: int,
                     gamma: float, observation_key: str, touched: Touched) -> dict[str, Any]:
    """The transitions anchored at ``drawn`` under ``view`` (see ``ReplayBuffer.sample_transitions``)."""
    space = reads.space
    t, _, stop = drawn
    batch = len(t)
    steps = t[:, None] + np.arange(n, dtype=np.int64)[None, :]
    summed = steps < stop[:, None]  # (B, n)
    k = summed.sum(axis=1)  # rewards summed, >= 1
    flags = leaves["reward"] + leaves["terminated"] + leaves["truncated"]
    obs_leaves = leaves[observation_key]
    if n == 1:  # every leaf at step t: one read
        both = reads.leaves_at(view, t[:, None], obs_leaves + leaves["action"] + flags, touched)
        now, (reward_n, term_n, trunc_n) = [v[:, 0] for v in both[:-3]], both[-3:]
    else:
        reward_n, term_n, trunc_n = reads.leaves_at(view, np.minimum(steps, stop[:, None] - 1), flags, touched)
        now = reads.leaves_at(view, t, obs_leaves + leaves["action"], touched)
    dtype = reward_n.dtype if reward_n.dtype.kind == "f" else np.dtype(np.float32)
    weights = np.where(summed, gamma ** np.arange(n, dtype=np.float64)[None, :], 0.0)
    weights = weights.reshape(*weights.shape, *([1] * (reward_n.ndim - 2)))
    rows = np.arange(batch)
    nxt = t + n
    inside = nxt < stop
    next_leaves = [np.empty((batch, *v.shape[1:]), v.dtype) for v in now[:len(obs_leaves)]]
    if inside.any():
        for out, value in zip(next_leaves, reads.leaves_at(view, nxt[inside], obs_leaves, touched)):
            out[inside] = value
    obs_space = tree.subspace(space, (observation_key,))
    reads.finals_into(view, stop[~inside], next_leaves, ~inside, obs_space, touched)
    return {"observation": tree.unflatten(obs_space, now[:len(obs_leaves)]),
            "action": tree.unflatten(space.spaces["action"], now[len(obs_leaves):]),
            "reward": (reward_n * weights).sum(axis=1).astype(dtype),
            "next_observation": tree.unflatten(obs_space, next_leaves),
            "terminated": term_n[rows, k - 1], "truncated": trunc_n[rows, k - 1],
            "discount": (gamma ** k.astype(np.float64)).astype(dtype), "index": t.astype(np.int64)}
