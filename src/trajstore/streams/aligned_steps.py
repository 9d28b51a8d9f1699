"""The steps of an aligned view: anchor times per episode, and where each stream's value at each comes from.

Pure bookkeeping over a stream buffer's timestamps (int64 ns), no sample read. :func:`anchor_steps`
chooses the anchor times of every episode (one stream's samples, or a fixed rate), in step order;
:class:`StreamPlan` is one included stream with its method, tolerance and its
:class:`~trajstore.streams.align.Alignment` at every anchor step, computed once with one
``np.searchsorted``; :func:`episode_table` is the view's :class:`~trajstore.replay_buffer.episodes.EpisodeTable`
(episode ``k`` of the view = the anchor steps of the ``k``-th kept stream episode).
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from trajstore.errors import AlignmentWarning

from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.spaces import Space
from trajstore.streams.align import Alignment, StreamTimes


@dataclass(frozen=True)
class AnchorSteps:
    """The view's steps: ``S`` anchor times in ``E`` episodes.

    Attributes:
        times: int64 ``(S,)`` anchor times (ns), non-decreasing within each episode.
        episode: int64 ``(S,)`` the view episode (``0 .. E-1``) of each step.
        starts, stops: int64 ``(E,)`` step ranges ``[start, stop)`` of each view episode.
        kept: the stream episodes (``StreamEpisode``) kept, one per view episode, in order.
    """

    times: np.ndarray
    episode: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    kept: tuple[Any, ...]

    def __len__(self) -> int:
        return len(self.times)


#: The most anchor steps a view made with ``rate_hz`` may have: a view keeps about 40 bytes per step and
#: stream in memory (over 100 GiB at this count), and step indices stay within int32.
MAX_RATE_STEPS = 2 ** 31


def rate_count(first_ns: int, last_ns: int, rate_hz: float) -> int:
    """How many anchor times :func:`rate_times` gives from ``first_ns`` to ``last_ns`` (to within one, never
    fewer), without making them; at most ``2**63``."""
    if last_ns < first_ns:
        return 0
    steps = (int(last_ns) - int(first_ns)) / _period(rate_hz)  # Python int span: exact over all of int64
    return int(min(steps, 2.0 ** 63)) + 1


def rate_times(first_ns: int, last_ns: int, rate_hz: float) -> np.ndarray:
    """Anchor times ``first + round(i * 1e9 / rate_hz)`` ns for ``i = 0, 1, ...`` up to ``last_ns``
    (included), int64 ``(n,)``, every one in ``[first_ns, last_ns]`` (a period longer than that: only
    ``first_ns``); empty when ``last_ns < first_ns``. The caller bounds ``n`` (:func:`rate_count`)."""
    if last_ns < first_ns:
        return np.zeros(0, np.int64)
    span = int(last_ns) - int(first_ns)
    offsets = np.round(np.arange(rate_count(first_ns, last_ns, rate_hz) + 1, dtype=np.float64) * _period(rate_hz))
    offsets = offsets[offsets < 2.0 ** 64].astype(np.uint64)
    offsets = offsets[offsets <= np.uint64(span)]  # exact: past last_ns never, so the sum below fits int64
    return (np.asarray(first_ns, np.int64).view(np.uint64) + offsets).view(np.int64)


def _period(rate_hz: float) -> float:
    """``1e9 / rate_hz`` ns, capped at ``2**64`` (longer than any int64 span; never inf)."""
    return min(1e9 / rate_hz, 2.0 ** 64)


def rate_bound(episodes: Sequence[tuple[int, int]], rate_hz: float) -> None:
    """Refuse (ValueError) a rate that gives more than :data:`MAX_RATE_STEPS` anchor steps over the
    ``(first_ns, last_ns)`` time ranges ``episodes``, before any is made."""
    total = sum(rate_count(first, last, rate_hz) for first, last in episodes)
    if total > MAX_RATE_STEPS:
        seconds = sum(max(0, last - first) for first, last in episodes) * 1e-9
        raise ValueError(f"rate_hz={rate_hz!r} gives about {total:,} anchor steps over the {seconds:.6g} s of "
                         f"{len(episodes)} episode(s), more than the {MAX_RATE_STEPS:,} (2**31) a view may have "
                         f"(it keeps about 40 bytes per step and stream in memory): use a lower rate_hz")


def anchor_steps(episodes: Sequence[Any], names: Sequence[str], times: dict[str, np.ndarray], *,
                 anchor: str | None, rate_hz: float | None) -> AnchorSteps:
    """The anchor steps of every episode in which each stream of ``names`` (and the anchor) has a sample.

    Args:
        episodes: the buffer's ``StreamEpisode`` list (``.streams[name]`` spans).
        names: the included streams.
        times: every held timestamp (int64 ns) of each stream of ``names`` and of the anchor, by position.
        anchor: the anchor stream (its samples in the episode are the steps), or ``None`` with ``rate_hz``.
        rate_hz: steps at this rate (Hz) from the latest first-sample time to the earliest last-sample
            time of ``names`` in the episode (see :func:`rate_times`).
    """
    needed = list(dict.fromkeys([*names, *([anchor] if anchor is not None else [])]))
    chunks, kept, counts, left_out = [], [], [], []
    full = []  # the episodes in which every needed stream has a sample
    for ep in episodes:
        spans = [ep.streams[n] for n in needed]
        empty = [n for n, s in zip(needed, spans) if s.count == 0]
        if empty:  # a stream without a sample in the episode: nothing to align to
            left_out.append(f"{ep.id} (no sample of {', '.join(map(repr, empty[:3]))})")
        else:
            full.append((ep, max(int(s.first_ns) for s in spans), min(int(s.last_ns) for s in spans)))
    if rate_hz is not None:
        rate_bound([(first, last) for _, first, last in full], rate_hz)
    for ep, first, last in full:
        if anchor is not None:
            span = ep.streams[anchor]
            t = times[anchor][span.start:span.stop]
        else:
            t = rate_times(first, last, rate_hz)
        if len(t):
            chunks.append(np.asarray(t, np.int64))
            kept.append(ep)
            counts.append(len(t))
        else:
            left_out.append(f"{ep.id} (no time every stream covers)")
    if left_out:
        warnings.warn(f"the aligned view leaves out {len(left_out)} episode(s): {'; '.join(left_out[:5])}"
                      f"{'; ...' if len(left_out) > 5 else ''} (pass streams= without the stream to keep them)",
                      AlignmentWarning, stacklevel=4)
    counts_arr = np.asarray(counts, np.int64)
    stops = np.cumsum(counts_arr).astype(np.int64)
    starts = stops - counts_arr
    all_times = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
    episode = np.repeat(np.arange(len(kept), dtype=np.int64), counts_arr)
    return AnchorSteps(all_times, episode, starts, stops, tuple(kept))


@dataclass(frozen=True)
class StreamPlan:
    """One included stream of a view.

    Attributes:
        name: the stream.
        space: its value space.
        method: ``"previous"``, ``"nearest"`` or ``"linear"``.
        tolerance: int ns, or ``None`` (never flagged for distance).
        times: its timestamps split by the view's episodes (segment ``k`` = view episode ``k``).
        at_steps: the :class:`Alignment` of every anchor step, arrays ``(S,)``.
    """

    name: str
    space: Space
    method: str
    tolerance: int | None
    times: StreamTimes
    at_steps: Alignment

    def align(self, episode: np.ndarray, t: np.ndarray) -> Alignment:
        """This stream at times ``t`` (int64 ns ``(Q,)``) in view episodes ``episode`` (int64 ``(Q,)``)."""
        return self.times.align(episode, t, self.method, self.tolerance)


def stream_plan(name: str, space: Space, method: str, tolerance: int | None, times: np.ndarray,
                steps: AnchorSteps) -> StreamPlan:
    """The :class:`StreamPlan` of stream ``name`` (all its held timestamps ``times``) over ``steps``."""
    starts = np.asarray([ep.streams[name].start for ep in steps.kept], np.int64)
    stops = np.asarray([ep.streams[name].stop for ep in steps.kept], np.int64)
    split = StreamTimes(times, starts, stops)
    return StreamPlan(name, space, method, tolerance, split, split.align(steps.episode, steps.times, method,
                                                                         tolerance))


def episode_table(steps: AnchorSteps, open_id: int | None) -> EpisodeTable:
    """The view's episode table: one closed episode per kept stream episode (its id, data and
    interrupted flag), but the one with id ``open_id`` (the buffer's open episode, if kept and last),
    which is the table's open episode."""
    kept = list(steps.kept)
    open_start = None
    next_id = kept[-1].id + 1 if kept else 0
    if kept and open_id is not None and kept[-1].id == open_id:
        open_start = int(steps.starts[-1])
        next_id = open_id
        kept = kept[:-1]
    n = len(kept)
    rows = np.zeros((5, n), np.int64)
    rows[0] = [ep.id for ep in kept]
    rows[1] = steps.starts[:n]
    rows[2] = steps.stops[:n]
    rows[3] = -1
    rows[4] = [int(ep.interrupted) for ep in kept]
    return EpisodeTable.from_columns(rows, [ep.data or None for ep in kept],
                                     {"open_start": open_start, "next_id": next_id})
