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
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

if TYPE_CHECKING:
    from trajstore.replay_buffer.episodes import EpisodeTable
    from trajstore.replay_buffer.ring import RingState


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


def _anchor_counts(starts: np.ndarray, ends: np.ndarray, before: int) -> np.ndarray:
    return np.maximum(0, ends - (starts + before))


@dataclass(frozen=True)
class AnchorIndex:
    """Valid anchors of the closed episodes for one margin, in global step numbers.

    Attributes:
        starts, stops: the closed episodes' step ranges ``[start, stop)``, int64 ``(E,)``, increasing
            (a ring may have overwritten the first steps of ``starts[0]``; :func:`draw_anchors` clamps).
        ends: int64 ``(E,)``: episode ``j``'s anchors are ``[starts[j] + before, ends[j])``
            (``stops - after`` unless :func:`anchor_index` was given other ends).
        cumulative: int64 ``(E + 1,)``; episode ``j`` owns anchor numbers ``[cumulative[j], cumulative[j + 1])``.
        before, after: the margin, both >= 0 (``after`` applies to the open episode and to ``ends`` by default).
    """

    starts: np.ndarray
    stops: np.ndarray
    ends: np.ndarray
    cumulative: np.ndarray
    before: int
    after: int


def anchor_index(starts: np.ndarray, stops: np.ndarray, before: int, after: int,
                 ends: np.ndarray | None = None) -> AnchorIndex:
    """The :class:`AnchorIndex` of closed episodes ``[starts, stops)`` (int64 ``(E,)``), in ``O(E)``.

    ``ends`` (int64 ``(E,)``, default ``stops - after``) bounds each episode's anchors from above
    (exclusive); transitions use it to keep the last steps of episodes that have a final observation.
    """
    ends = (stops - after) if ends is None else np.asarray(ends, np.int64)
    cumulative = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(_anchor_counts(starts, ends, before), out=cumulative[1:])
    return AnchorIndex(starts.copy(), stops.copy(), ends.copy(), cumulative, before, after)


@dataclass(frozen=True)
class HeldAnchors:
    """The valid anchors of the held steps, numbered ``0 .. total - 1`` in step order (see :func:`held_anchors`)."""

    index: AnchorIndex
    oldest: int
    appended: int
    open_from: int | None  # first held step of the open episode, or None
    skip: int  # anchor numbers of ``index`` before the first held anchor
    closed_total: int  # anchor numbers of ``index`` in use by closed episodes (including skipped ones)
    total: int


def held_anchors(index: AnchorIndex, *, oldest: int, appended: int, open_start: int | None) -> HeldAnchors:
    """Count the valid anchors of the held steps, in ``O(log E)``.

    The held steps are the global steps ``[oldest, appended)``; the closed episodes are those of
    ``index`` (steps before ``oldest`` are not held: the ring overwrote them), the open one (if
    ``open_start`` is not ``None``) holds ``[open_start, appended)`` and has the margin of ``index``.
    """
    before, after, cumulative = index.before, index.after, index.cumulative
    n = len(index.starts)
    j = int(np.searchsorted(index.stops, oldest, side="right"))  # the first closed episode with a held step
    through_j = int(cumulative[j + 1]) if j < n else int(cumulative[-1])
    first = (int(_anchor_counts(max(int(index.starts[j]), oldest), int(index.ends[j]), before)) if j < n else 0)
    open_from = None if open_start is None or appended <= open_start else max(open_start, oldest)
    in_open = int(_anchor_counts(open_from, appended - after, before)) if open_from is not None else 0
    closed_total = int(cumulative[-1])
    total = first + (closed_total - through_j) + in_open
    return HeldAnchors(index, oldest, appended, open_from, through_j - first, closed_total, total)


def anchors_at(held: HeldAnchors, numbers: np.ndarray, *, trusted: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The anchors numbered ``numbers`` (int ``(B,)`` in ``[0, held.total)``), in ``O(B log E)``.

    ``trusted=True``: ``numbers`` is an int64 ``(B,)`` array known to be in range (a draw), not checked again.

    Returns:
        ``(anchors, episode_starts, episode_stops)``, int64 ``(B,)`` each, in logical indices
        (global step minus ``oldest``): the anchor and the held steps ``[start, stop)`` of its episode.

    Raises:
        IndexError: a number outside ``[0, held.total)``.
    """
    if not trusted:
        numbers = checked_numbers(numbers, held.total)
    index, before = held.index, held.index.before
    k = numbers + held.skip  # numbers of episodes before the first held one, and of its overwritten steps, skipped
    if held.total == held.closed_total - held.skip:  # no anchor in the open episode: no masks
        episode = np.searchsorted(index.cumulative, k, side="right") - 1
        first = index.starts[episode]
        anchors = first + (before - held.oldest) + (k - index.cumulative[episode])
        return anchors, np.maximum(first - held.oldest, 0), index.stops[episode] - held.oldest
    closed = k < held.closed_total
    episode = np.searchsorted(index.cumulative, k[closed], side="right") - 1
    anchors = np.empty(len(k), np.int64)
    ep_start = np.empty(len(k), np.int64)
    ep_stop = np.empty(len(k), np.int64)
    anchors[closed] = index.starts[episode] + before + (k[closed] - index.cumulative[episode])
    ep_start[closed] = np.maximum(index.starts[episode], held.oldest)
    ep_stop[closed] = index.stops[episode]
    if not closed.all():
        anchors[~closed] = held.open_from + before + (k[~closed] - held.closed_total)
        ep_start[~closed] = held.open_from
        ep_stop[~closed] = held.appended
    return anchors - held.oldest, ep_start - held.oldest, ep_stop - held.oldest


def checked_numbers(numbers: Any, total: int) -> np.ndarray:
    """Anchor numbers as int64 ``(N,)``: an int or a 1-D sequence of ints (not bools, floats, strings).

    Raises:
        TypeError: not integers.
        IndexError: a number outside ``[0, total)`` (checked before any cast, so huge ones too).
    """
    if isinstance(numbers, (bool, np.bool_)):
        raise TypeError(f"anchor numbers must be ints, got {numbers!r}")
    if isinstance(numbers, (int, np.integer)):
        if not 0 <= int(numbers) < total:
            raise IndexError(f"anchor numbers must lie in [0, {total}), got {int(numbers)}")
        return np.array([numbers], np.int64)
    arr = np.asarray(numbers)
    if arr.dtype == object and all(isinstance(v, int) and not isinstance(v, bool) for v in arr.reshape(-1)):
        values = [int(v) for v in arr.reshape(-1)]
        if values and not (0 <= min(values) and max(values) < total):
            raise IndexError(f"anchor numbers must lie in [0, {total}), got {min(values)}..{max(values)}")
        arr = np.asarray(values, np.int64)
    if arr.ndim > 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"anchor numbers must be an int or a 1-D sequence of ints, got {arr.dtype} of shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= total):
        raise IndexError(f"anchor numbers must lie in [0, {total}), got {arr.min()}..{arr.max()}")
    return arr.astype(np.int64).reshape(-1)


def no_anchor_message(held: HeldAnchors) -> str:
    """Why :attr:`HeldAnchors.total` is 0, with the longest held episode."""
    index, oldest = held.index, held.oldest
    j = int(np.searchsorted(index.stops, oldest, side="right"))
    longest = max(int(np.max(index.stops[j:] - np.maximum(index.starts[j:], oldest))) if j < len(index.stops) else 0,
                  held.appended - held.open_from if held.open_from is not None else 0)
    return (f"no held step has {index.before} steps before it and {index.after} after it in its episode "
            f"(longest episode: {longest} steps)")


def draw_anchors(index: AnchorIndex, *, oldest: int, appended: int, open_start: int | None, batch_size: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``batch_size`` anchors drawn uniformly with replacement among the valid anchors of the held steps.

    See :func:`held_anchors` for the held steps. Every valid anchor is equally likely, so a long
    episode gives proportionally more windows. Valid anchors are numbered in step order and draw
    ``k`` picks the ``k``-th (:func:`anchors_at`), which is what drawing from the concatenated list
    of all of them did.

    Returns:
        ``(anchors, episode_starts, episode_stops)`` as :func:`anchors_at`.

    Raises:
        ValueError: ``batch_size`` < 1, or no held step is a valid anchor (the message gives the
            longest episode).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    held = held_anchors(index, oldest=oldest, appended=appended, open_start=open_start)
    if held.total == 0:
        raise ValueError(no_anchor_message(held))
    return anchors_at(held, rng.integers(0, held.total, size=batch_size, dtype=np.int64), trusted=True)


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


# -- the buffer's draws: the functions above, applied to one view ---------------------------
def selected_ids(ring: "RingState", table: "EpisodeTable", episodes: Iterable[int] | None) -> np.ndarray | None:
    """``episodes`` checked against a view: sorted unique int64 ids, or ``None`` for every episode.

    Raises:
        TypeError: not a collection of ints.
        ValueError: an id that is not a held episode (the message lists a few).
    """
    if episodes is None:
        return None
    if isinstance(episodes, (str, bytes)) or not isinstance(episodes, Iterable):
        raise TypeError(f"episodes must be a collection of episode ids, got {type(episodes).__name__}")
    ids = list(episodes)
    if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in ids):
        raise TypeError("episodes must hold episode ids (ints, Episode.id)")
    selected = np.unique(np.asarray(ids, np.int64))
    known = np.zeros(len(selected), bool)
    known[np.isin(selected, table.ids)] = True
    if table.is_open(ring.appended):
        known |= selected == table.next_id
    if not known.all():
        raise ValueError(f"episodes: ids {selected[~known][:5].tolist()} are not held episodes "
                         f"(held: {table.count(ring.appended)}, see rb.episodes)")
    return selected


def _index_of(ring: "RingState", table: "EpisodeTable", before: int, after: int, selected: np.ndarray | None,
              keep_final_steps: bool) -> tuple[AnchorIndex, int | None]:
    open_start = table.open_start
    if selected is not None and not np.any(selected == table.next_id):
        open_start = None  # the open episode is not selected
    return table.anchor_index(before, after, selected=selected, keep_final_steps=keep_final_steps), open_start


def held_in(ring: "RingState", table: "EpisodeTable", before: int, after: int, selected: np.ndarray | None = None,
            keep_final_steps: bool = False) -> HeldAnchors:
    """:func:`held_anchors` of a view (ring state and episode table), ``O(log E)`` once its index is cached."""
    index, open_start = _index_of(ring, table, before, after, selected, keep_final_steps)
    return held_anchors(index, oldest=ring.first_step, appended=ring.appended, open_start=open_start)


def draw_in(ring: "RingState", table: "EpisodeTable", before: int, after: int, batch_size: int,
            rng: np.random.Generator, selected: np.ndarray | None = None,
            keep_final_steps: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`draw_anchors` of a view: what every sampler of the buffer draws with.

    Raises:
        ValueError: ``batch_size`` < 1, or no held step is a valid anchor.
    """
    index, open_start = _index_of(ring, table, before, after, selected, keep_final_steps)
    return draw_anchors(index, oldest=ring.first_step, appended=ring.appended, open_start=open_start,
                        batch_size=batch_size, rng=rng)
