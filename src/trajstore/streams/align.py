"""The alignment kernel: which stream samples answer which query times. Pure NumPy, no I/O.

A stream's timestamps are int64 nanoseconds, non-decreasing within each *segment* (one episode's
samples: positions ``[start, stop)`` of the stream's whole sample sequence; equal times allowed). A
query is an int64 time with the segment it belongs to. :meth:`StreamTimes.align` answers a batch
of queries with one ``np.searchsorted`` (no Python loop per query or per segment): the segments are
laid end to end on one increasing *key* axis (each shifted to start one past the previous one's
end), and each query is clipped into its segment's time range on that axis.

Methods (``t`` = the query time, ``t_i`` = sample times of its segment):

* ``"previous"``: the latest sample with ``t_i <= t`` (never newer than ``t``); before the first
  sample: the first sample, flagged.
* ``"nearest"``: the sample closest in time; a tie goes to the earlier sample.

Among samples with equal times, the last one (the newest recorded) is used.
* ``"linear"``: the samples ``lo``, ``hi`` with ``t_lo <= t < t_hi`` and the weight
  ``w = (t - t_lo) / (t_hi - t_lo)`` of ``hi`` (value ``(1 - w) v_lo + w v_hi``); outside the
  samples: the edge sample (``w = 0``).

The distance of a query is ``|t_i - t|`` of the sample used (``linear``: the nearer bracketing one);
with a tolerance, a query is *flagged* when its distance is strictly greater than it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The alignment methods, in the order the docs list them.
METHODS = ("previous", "nearest", "linear")


@dataclass(frozen=True)
class Alignment:
    """The answer to ``Q`` queries (all arrays shaped ``(Q,)``).

    Attributes:
        lo: int64 sample positions (in the stream's whole sequence) of the sample used, or of the
            earlier bracketing sample for ``linear``.
        hi: int64 positions of the later bracketing sample (``== lo`` but for ``linear`` inside).
        weight: float64 weight of ``hi`` in ``[0, 1)`` (0 but for ``linear`` between two samples).
        distance: int64 nanoseconds from the query to the sample used (see the module docstring).
        outside: bool, the query lies before the segment's first or after its last sample time.
        flagged: bool, farther than the tolerance, or ``previous`` before the first sample.
    """

    lo: np.ndarray
    hi: np.ndarray
    weight: np.ndarray
    distance: np.ndarray
    outside: np.ndarray
    flagged: np.ndarray


def check_method(method: str, where: str) -> str:
    """``method`` if it is one of :data:`METHODS`, else ValueError naming ``where`` (the stream)."""
    if method not in METHODS:
        raise ValueError(f"how[{where!r}] must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
    return method


def tolerance_ns(tolerance: float | None, where: str) -> int | None:
    """A tolerance in seconds (``None``: none) as int64 nanoseconds, rounded.

    Raises:
        ValueError: negative, NaN or infinite, or not a number (names ``where``, the stream).
    """
    if tolerance is None:
        return None
    if isinstance(tolerance, (bool, np.bool_)) or not isinstance(tolerance, (int, float, np.integer, np.floating)):
        raise ValueError(f"tolerance[{where!r}] must be a number of seconds or None, got {tolerance!r}")
    value = float(tolerance)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"tolerance[{where!r}] must be a finite number of seconds >= 0, got {tolerance!r}")
    return int(round(value * 1e9))


class StreamTimes:
    """One stream's timestamps split into segments, ready for :meth:`align`.

    Args:
        times: int64 ``(N,)`` nanoseconds, non-decreasing within each segment (trusted).
        starts, stops: int64 ``(E,)`` positions ``[start, stop)`` of each segment in ``times``,
            increasing and non-overlapping; a segment may be empty (no query may name it).

    Raises:
        ValueError: the segments do not fit ``times``, or their time spans add up past int64.
    """

    def __init__(self, times: np.ndarray, starts: np.ndarray, stops: np.ndarray):
        self.times = np.asarray(times, np.int64)
        self.starts = np.asarray(starts, np.int64).reshape(-1)
        self.stops = np.asarray(stops, np.int64).reshape(-1)
        if len(self.starts) != len(self.stops) or np.any(self.stops < self.starts) or (
                len(self.stops) and (self.starts.min() < 0 or self.stops.max() > len(self.times))):
            raise ValueError("segments must be [start, stop) ranges inside the timestamps")
        counts = self.stops - self.starts
        full = counts > 0
        self.first = np.zeros(len(counts), np.int64)
        self.last = np.zeros(len(counts), np.int64)
        self.first[full] = self.times[self.starts[full]]
        self.last[full] = self.times[self.stops[full] - 1]
        spans = np.where(full, self.last - self.first + 1, 0)
        if sum(int(s) for s in spans) >= 2 ** 62:
            raise ValueError("the stream's episodes span more time than int64 nanoseconds can lay end to end")
        self.base = np.concatenate(([0], np.cumsum(spans)[:-1])).astype(np.int64) if len(spans) else spans
        # Keys: each segment's times shifted to start at its base; the key axis increases over segments.
        shift = np.repeat(self.base - self.first, counts)
        self.keys = self.times[np.repeat(self.starts, counts) + _ranks(counts)] + shift
        self.counts = counts
        self.rank_start = (np.cumsum(counts) - counts).astype(np.int64)  # rank of each segment's first key

    def align(self, segment: np.ndarray, t: np.ndarray, method: str, tolerance: int | None = None) -> Alignment:
        """Answer queries at times ``t`` (int64 ns, any shape, flattened to ``(Q,)``) in segments
        ``segment`` (int64, same shape) by ``method`` (see the module docstring); ``tolerance`` in ns.

        Raises:
            ValueError: an unknown method, or a query in an empty segment (names the segment).
        """
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")
        seg = np.asarray(segment, np.int64).reshape(-1)
        t = np.asarray(t, np.int64).reshape(-1)
        if len(seg) and np.any(self.counts[seg] == 0):
            raise ValueError(f"segment {int(seg[self.counts[seg] == 0][0])} has no sample to align to")
        first, last = self.first[seg], self.last[seg]
        to_position = self.starts[seg] - self.rank_start[seg]  # key rank + this = sample position
        before, after = t < first, t > last
        clipped = np.minimum(np.maximum(t, first), last)
        q = clipped - first + self.base[seg]
        # q lies in its segment's key range, so the searches below stay inside the segment.
        prev_rank = np.searchsorted(self.keys, q, "right") - 1  # the last key <= q
        lo = prev_rank + to_position  # before the first sample: the (last) first sample
        stop = self.stops[seg]
        hi, weight = lo, np.zeros(len(t))
        if method == "nearest":
            # The next time after t: its last sample (among equal times, the last one), if in the segment.
            has_next = ~before & (prev_rank + 1 + to_position < stop)  # its key is > q (prev_rank is the last <= q)
            next_rank = np.minimum(prev_rank + 1, len(self.keys) - 1)
            nxt = np.searchsorted(self.keys, self.keys[next_rank], "right") - 1 + to_position
            take_next = has_next & ((self.times[nxt] - t) < (t - self.times[lo]))
            lo = np.where(take_next, nxt, lo)
            hi = lo
        elif method == "linear":
            inside = ~before & ~after & (lo + 1 < stop) & (self.times[lo] != t)
            hi = lo.copy()
            hi[inside] = lo[inside] + 1
            # lo is the last sample <= t; its successor is the first > t (same segment, inside).
            t_lo, t_hi = self.times[lo[inside]], self.times[hi[inside]]
            weight[inside] = (t[inside] - t_lo).astype(np.float64) / (t_hi - t_lo).astype(np.float64)
        distance = np.abs(self.times[lo] - t)
        if method == "linear":
            distance = np.minimum(distance, np.where(hi != lo, np.abs(self.times[hi] - t), distance))
        flagged = before.copy() if method == "previous" else np.zeros(len(t), bool)
        if tolerance is not None:
            flagged |= distance > tolerance
        return Alignment(lo.astype(np.int64), hi.astype(np.int64), weight, distance.astype(np.int64),
                         before | after, flagged)


def align(times: np.ndarray, t: np.ndarray, method: str, tolerance: int | None = None) -> Alignment:
    """:meth:`StreamTimes.align` of queries ``t`` (int64 ns ``(Q,)``) against one sorted run of sample
    times ``times`` (int64 ns ``(N,)``, non-decreasing, ``N >= 1``); positions index ``times``.

    Raises:
        ValueError: ``times`` is empty, or an unknown method.
    """
    times = np.asarray(times, np.int64)
    if not len(times):
        raise ValueError("no sample to align to")
    t = np.asarray(t, np.int64).reshape(-1)
    return StreamTimes(times, np.array([0]), np.array([len(times)])).align(np.zeros(len(t), np.int64), t, method,
                                                                          tolerance)


def interpolate(lo_values: np.ndarray, hi_values: np.ndarray, weight: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``(1 - w) lo + w hi`` per row, computed in float64 and cast to ``dtype`` (a float dtype).

    ``lo_values``, ``hi_values``: ``(Q, ...)``; ``weight``: float64 ``(Q,)``. A row with ``w == 0`` is
    ``lo`` exactly.
    """
    w = weight.reshape(-1, *([1] * (lo_values.ndim - 1)))
    lo = lo_values.astype(np.float64)
    out = lo + w * (hi_values - lo)  # float64, as lo
    if not bool(np.all(w)):
        out = np.where(w == 0, lo, out)
    return out.astype(dtype, copy=False)


def _ranks(counts: np.ndarray) -> np.ndarray:
    """``0 .. c - 1`` for each count ``c``, concatenated (int64)."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - counts, counts)
