"""Which steps to read for training: logical indices only, no data I/O.

Samplers read the episode table's arrays and return logical indices; the buffer gathers the
data. Window sampling costs ``O(B log E)`` per call for ``B`` windows over ``E`` episodes:
an :class:`AnchorIndex` (prefix sums of the valid anchors per closed episode, built in
``O(E)`` with NumPy and cached by the episode table until it changes) is searched with
``searchsorted``; no per-episode object or per-step array is made.

An *anchor* is a held step; a window reads the steps at ``anchor + offset`` for each offset.
With a margin ``before`` (steps needed before the anchor) and ``after`` (steps needed after it),
an episode holding steps ``[s, e)`` has the valid anchors ``[s + before, e - after)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def uniform_steps(count: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """``batch_size`` logical indices in ``[0, count)``, uniform with replacement, int64 ``(B,)``.

    Raises:
        ValueError: ``count`` is 0 or ``batch_size`` < 1.
    """
    if count <= 0:
        raise ValueError("cannot sample from an empty buffer")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return rng.integers(0, count, size=batch_size, dtype=np.int64)


def _anchor_counts(starts: np.ndarray, stops: np.ndarray, before: int, after: int) -> np.ndarray:
    return np.maximum(0, (stops - after) - (starts + before))


@dataclass(frozen=True)
class AnchorIndex:
    """Valid anchors of the closed episodes for one margin, in global step numbers.

    Attributes:
        starts, stops: the closed episodes' step ranges ``[start, stop)``, int64 ``(E,)``, increasing
            (a ring may have overwritten the first steps of ``starts[0]``; :func:`draw_anchors` clamps).
        cumulative: int64 ``(E + 1,)``; episode ``j`` owns draws ``[cumulative[j], cumulative[j + 1])``.
        before, after: the margin, both >= 0.
    """

    starts: np.ndarray
    stops: np.ndarray
    cumulative: np.ndarray
    before: int
    after: int


def anchor_index(starts: np.ndarray, stops: np.ndarray, before: int, after: int) -> AnchorIndex:
    """The :class:`AnchorIndex` of closed episodes ``[starts, stops)`` (int64 ``(E,)``), in ``O(E)``."""
    cumulative = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(_anchor_counts(starts, stops, before, after), out=cumulative[1:])
    return AnchorIndex(starts.copy(), stops.copy(), cumulative, before, after)


def draw_anchors(index: AnchorIndex, *, oldest: int, appended: int, open_start: int | None, batch_size: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``batch_size`` anchors drawn uniformly with replacement among the valid anchors of the held steps.

    The held steps are the global steps ``[oldest, appended)``; the closed episodes are those of
    ``index`` (steps before ``oldest`` are not held: the ring overwrote them), the open one (if ``open_start`` is
    not ``None``) holds ``[open_start, appended)``. Every valid anchor is equally likely, so a long
    episode gives proportionally more windows. Valid anchors are numbered in step order and draw
    ``k`` picks the ``k``-th, which is what drawing from the concatenated list of all of them did.

    Returns:
        ``(anchors, episode_starts, episode_stops)``, int64 ``(B,)`` each, in logical indices
        (global step minus ``oldest``): the anchor and the held steps ``[start, stop)`` of its episode.

    Raises:
        ValueError: ``batch_size`` < 1, or no held step is a valid anchor (the message gives the
            longest episode).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    before, after, cumulative = index.before, index.after, index.cumulative
    n = len(index.starts)
    j = int(np.searchsorted(index.stops, oldest, side="right"))  # the first closed episode with a held step
    through_j = int(cumulative[j + 1]) if j < n else int(cumulative[-1])
    first = int(_anchor_counts(max(int(index.starts[j]), oldest), int(index.stops[j]), before, after)) if j < n else 0
    open_from = None if open_start is None or appended <= open_start else max(open_start, oldest)
    in_open = int(_anchor_counts(open_from, appended, before, after)) if open_from is not None else 0
    closed_total = int(cumulative[-1])
    total = first + (closed_total - through_j) + in_open
    if total == 0:
        longest = max(int(np.max(index.stops[j:] - np.maximum(index.starts[j:], oldest))) if j < n else 0,
                      appended - open_from if open_from is not None else 0)
        raise ValueError(f"no held step has {before} steps before it and {after} after it in its episode "
                         f"(longest episode: {longest} steps)")
    # Draw numbers of episodes before j, and of episode j's overwritten first steps, are skipped.
    k = rng.integers(0, total, size=batch_size) + (through_j - first)
    closed = k < closed_total
    episode = np.searchsorted(cumulative, k[closed], side="right") - 1
    anchors = np.empty(batch_size, np.int64)
    ep_start = np.empty(batch_size, np.int64)
    ep_stop = np.empty(batch_size, np.int64)
    anchors[closed] = index.starts[episode] + before + (k[closed] - cumulative[episode])
    ep_start[closed] = np.maximum(index.starts[episode], oldest)
    ep_stop[closed] = index.stops[episode]
    if in_open:
        anchors[~closed] = open_from + before + (k[~closed] - closed_total)
        ep_start[~closed] = open_from
        ep_stop[~closed] = appended
    return anchors - oldest, ep_start - oldest, ep_stop - oldest


def window_indices(anchors: np.ndarray, episode_starts: np.ndarray, episode_stops: np.ndarray,
                   offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The steps at ``anchor + offset``, clamped to the anchor's episode.

    An index before the episode's first held step reads that step, one past its last reads the
    last, and both are flagged (the rule of LeRobot's ``delta_timestamps`` and Diffusion
    Policy's ``SequenceSampler``: padding repeats the boundary step).

    Args:
        anchors, episode_starts, episode_stops: int64 ``(B,)``, as :func:`draw_anchors` returns.
        offsets: int64 ``(T,)``.

    Returns:
        ``(indices, is_pad)``: logical indices int64 ``(B, T)`` and bool ``(B, T)``.
    """
    wanted = anchors[:, None] + offsets[None, :]
    indices = np.clip(wanted, episode_starts[:, None], episode_stops[:, None] - 1)
    return indices, indices != wanted
