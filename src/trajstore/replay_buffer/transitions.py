"""Transitions ``(s_t, a_t, R_t, s_{t+n})`` for off-policy training: how ``ReplayBuffer.sample_transitions`` reads them.

The step layout is the one the recorders write (``RecordEpisodes``, ``record_gymnasium``): a dict
space with ``observation`` (any subtree), ``action``, ``reward``, ``terminated`` and ``truncated``,
where step ``t`` holds the observation the action was taken in and the reward, flags that followed.
The observation after step ``t`` is therefore step ``t + 1``'s, and after an episode's last step it
is the episode's final observation (``end_episode(final_observation=...)``), which no step holds.

Anchors are drawn with the window machinery (:mod:`~trajstore.replay_buffer.samplers`): the margin
``after = n_step`` inside the episode, except that an episode with a final observation keeps its last
``n_step`` steps as anchors (their next observation is the final one). Cost ``O(B log E)`` per call
plus the reads, at most two storage reads and one read of the final observations:

- the *dense* leaves (the reward and flag leaves, and every leaf of at most :data:`SMALL_LEAF_BYTES`
  bytes a step without ``kind`` metadata: a low-dim observation, the action) in one read at the steps
  ``t .. t + n`` of each draw (clamped to its episode, repeats read once), then NumPy gathers: step ``t``'s
  observation and action, the ``(B, n)`` rewards summed with a mask and the cached powers of ``gamma``,
  the flags at ``t + k - 1``, the next observation at ``t + n``;
- the other observation and action leaves (camera frames) at ``t`` and ``t + n`` only, in one read;
- the final observations of the distinct episodes some draw ends past, in one read, only when a draw needs one.

The per-call constants (leaf positions, the split, ``gamma`` powers) are computed once per space,
``n_step`` and ``gamma`` (:func:`transition_plan`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trajstore.replay_buffer.reads import BufferReads, Drawn
from trajstore.replay_buffer.view import Touched, View
from trajstore.spaces import DictSpace, Space, tree
from trajstore.storages._selection import Selection, from_slots

STEP_KEYS = ("action", "reward", "terminated", "truncated")
#: A leaf of at most this many bytes a step (and no ``kind`` metadata: not a camera leaf) is read at every
#: step ``t .. t + n`` with the rewards (one read).
SMALL_LEAF_BYTES = 256

_CACHE_SIZE = 16
_leaves_cache: dict[tuple[int, str], tuple[Space, dict[str, list[int]]]] = {}
_plan_cache: dict[tuple[int, str, int, float], tuple[Space, "TransitionPlan"]] = {}


def _remember(cache: dict, key: Any, space: Space, value: Any) -> Any:
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = (space, value)
    return value


def transition_leaves(space: Space, observation_key: str) -> dict[str, list[int]]:
    """Leaf positions of each part of a step (``{key: [positions]}`` for ``observation_key`` and
    :data:`STEP_KEYS`), checked once per space object (cached; do not edit the lists).

    Raises:
        ValueError: the space is not a dict with ``observation_key`` and :data:`STEP_KEYS`.
    """
    hit = _leaves_cache.get((id(space), observation_key))
    if hit is not None and hit[0] is space:
        return hit[1]
    missing = [k for k in (observation_key, *STEP_KEYS) if not isinstance(space, DictSpace)
               or k not in space.spaces]
    if missing:
        raise ValueError(f"sample_transitions needs the step keys {[observation_key, *STEP_KEYS]}; the space "
                         f"has no {missing}")
    paths = tree.leaf_paths(space)
    found = {key: [i for i, p in enumerate(paths) if tree.under(p, (key,))] for key in (observation_key, *STEP_KEYS)}
    return _remember(_leaves_cache, (id(space), observation_key), space, found)


def _small(leaf: Space) -> bool:
    if leaf.metadata.get("kind") is not None:  # a camera (image, depth, video) leaf: frames decode one by one
        return False
    shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", np.dtype(bool))
    if shape is None or not isinstance(dtype, np.dtype) or dtype.kind in "OUS":
        return False
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize <= SMALL_LEAF_BYTES


@dataclass(frozen=True)
class TransitionPlan:
    """What :func:`read_transitions` reads for one space, ``n_step`` and ``gamma``.

    Attributes:
        n: ``n_step``.
        obs, action, flags: leaf positions of the observation, the action, and (reward, terminated,
            truncated) (one leaf each: positions into the step's leaves).
        dense: increasing leaf positions read at the ``n + 1`` steps ``t .. t + n``: the flags and the small leaves.
        sparse: increasing leaf positions read at ``t`` and ``t + n`` (empty with ``n == 1``: all are dense).
        offsets: ``arange(n + 1)``, int64.
        powers: ``gamma ** arange(n + 1)``, float64 ``(n + 1,)``.
        weights: float64 ``(n + 1, n)``: row ``k`` is ``gamma ** i`` for ``i < k``, else 0 (the n-step sum's).
        obs_space: the observation subspace.
    """

    n: int
    obs: list[int]
    action: list[int]
    flags: list[int]
    dense: list[int]
    sparse: list[int]
    offsets: np.ndarray
    powers: np.ndarray
    weights: np.ndarray
    obs_space: Space


def transition_plan(space: Space, leaves: dict[str, list[int]], observation_key: str, n: int, gamma: float
                    ) -> TransitionPlan:
    """The :class:`TransitionPlan` of a space (as :func:`transition_leaves` checked it), cached."""
    key = (id(space), observation_key, n, gamma)
    hit = _plan_cache.get(key)
    if hit is not None and hit[0] is space:
        return hit[1]
    flags = leaves["reward"] + leaves["terminated"] + leaves["truncated"]
    if len(leaves["reward"]) != 1 or len(leaves["terminated"]) != 1 or len(leaves["truncated"]) != 1:
        raise ValueError("sample_transitions needs 'reward', 'terminated' and 'truncated' to be leaves, not "
                         "subtrees")
    obs, action = leaves[observation_key], leaves["action"]
    spaces = [s for _, s in tree.leaves(space)]
    wanted = sorted(set(obs) | set(action))
    dense = sorted(set(flags) | {p for p in wanted if n == 1 or _small(spaces[p])})
    sparse = [p for p in wanted if p not in dense]
    offsets, powers = np.arange(n + 1, dtype=np.int64), gamma ** np.arange(n + 1, dtype=np.float64)
    weights = np.where(offsets[None, :n] < offsets[:, None], powers[None, :n], 0.0)
    plan = TransitionPlan(n, obs, action, flags, dense, sparse, offsets, powers, weights,
                          tree.subspace(space, (observation_key,)))
    return _remember(_plan_cache, key, space, plan)


def read_transitions(reads: BufferReads, view: View, drawn: Drawn, leaves: dict[str, list[int]], n: int,
                     gamma: float, observation_key: str, touched: Touched) -> dict[str, Any]:
    """The transitions anchored at ``drawn`` under ``view`` (see ``ReplayBuffer.sample_transitions``).

    ``drawn``: ``(t, episode starts, episode stops)``, logical int64 ``(B,)`` each, every ``t`` a valid anchor
    (``t + n < stop``, or its episode has a final observation).
    """
    plan = transition_plan(reads.space, leaves, observation_key, n, gamma)
    t, _, stop = drawn
    left = stop - t  # steps from t to the episode's end, >= 1
    steps = np.minimum(t[:, None] + plan.offsets, (stop - 1)[:, None])  # (B, n + 1), clamped to the episode
    value, at = _read(reads, view, steps, plan.dense, touched)
    if plan.sparse:
        sparse, at_sparse = _read(reads, view, steps[:, [0, n]], plan.sparse, touched)
        value.update(sparse)
        at_next = at_sparse[:, 1]
    else:
        at_sparse, at_next = at, at[:, n]
    first = at[:, 0]
    now = [value[p][first if p in plan.dense else at_sparse[:, 0]] for p in plan.obs]
    nxt = [value[p][at_next if p in plan.sparse else at[:, n]] for p in plan.obs]
    inside = left > n  # t + n is held in the episode: its observation, else the episode's final one
    if not inside.all():
        _finals_into(reads, view, stop[~inside], nxt, ~inside, plan.obs_space, touched)
    reward, term, trunc = (value[p] for p in plan.flags)
    dtype = reward.dtype if reward.dtype.kind == "f" else np.dtype(np.float32)
    if n == 1:  # k = 1: step t's own reward and flags, discount gamma
        reward_n, term, trunc = reward[first].astype(dtype, copy=False), term[first], trunc[first]
        discount = np.full(len(t), plan.powers[1], np.float64).astype(dtype)
    else:
        k = np.minimum(left, n)  # rewards summed, at t .. t + k - 1
        weights = plan.weights[k]  # (B, n): gamma ** i for i < k, else 0
        summed = reward[at[:, :n]]
        weights = weights.reshape(*weights.shape, *([1] * (summed.ndim - 2)))
        reward_n = (summed * weights).sum(axis=1).astype(dtype)
        last = at[np.arange(len(t)), k - 1]
        term, trunc, discount = term[last], trunc[last], plan.powers[k].astype(dtype)
    return {"observation": tree.unflatten(plan.obs_space, now),
            "action": tree.unflatten(reads.space.spaces["action"],
                                     [value[p][first if p in plan.dense else at_sparse[:, 0]] for p in plan.action]),
            "reward": reward_n, "next_observation": tree.unflatten(plan.obs_space, nxt),
            "terminated": term, "truncated": trunc, "discount": discount, "index": t.astype(np.int64)}


def _read(reads: BufferReads, view: View, logical: np.ndarray, which: list[int], touched: Touched
          ) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """Leaves ``which`` at the distinct logical indices of ``logical`` (int64 ``(B, m)``), in one storage read.

    Returns:
        ``({position: values (M, ...)}, rows)``: ``values[rows[b, j]]`` is the leaf at ``logical[b, j]``
        (``rows`` int64 ``(B, m)``).
    """
    flat = logical.reshape(-1)
    ordered = np.sort(flat)
    new = np.empty(len(ordered), bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    distinct = ordered[new]
    touched.steps(int(distinct[0]), int(distinct[-1]))
    slots = view.slots_of(Selection(distinct, np.searchsorted(distinct, flat)))
    values = reads.storage.read_leaves(Selection(slots.slots), which)
    return dict(zip(which, values)), slots.order.reshape(logical.shape)


def _finals_into(reads: BufferReads, view: View, stops: np.ndarray, out: list[np.ndarray], rows: np.ndarray,
                 obs_space: Space, touched: Touched) -> None:
    """Fill ``out[leaf][rows]`` (``rows``: bool ``(B,)``) with the final observations of the episodes ending at
    logical ``stops`` (one per true row), in one read of the final observation storage."""
    table = view.episodes
    # Each stop is that of a closed episode with a final observation (only those keep their last anchors).
    cols = from_slots(np.searchsorted(table.stops, stops + view.first_step))
    numbers = table.finals[cols.slots]
    for col, number in zip(cols.slots.tolist(), numbers.tolist()):
        touched.finals.append((int(table.ids[col]), number))
    values = reads.finals.read_leaves(numbers)
    at = np.flatnonzero(rows)
    for leaf, v in zip(out, values):
        leaf[at] = v if cols.order is None else v[cols.order]
