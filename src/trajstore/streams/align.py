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

The distance of a query is ``|t_i - t|`` of the sample used (``linear``: the nearer bracketing one).
A query is *flagged* (``is_pad``) when ``previous`` has no sample at or before it (the value would come
from the future); otherwise, with a tolerance, when its distance is strictly greater than it; without
one, when it lies outside the segment's samples (before the first or after the last). Steps and
windows (``delta_timestamps``) use this one rule.
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
        flagged: bool, by the module's rule (``previous`` before the first sample; farther than the
            tolerance; without one, outside the samples).
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


#: int64 nanoseconds, as Python ints.
NS_MIN, NS_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def seconds_to_ns(seconds: np.ndarray, where: str) -> np.ndarray:
    """Seconds (any real array) as int64 nanoseconds, rounded.

    Raises:
        ValueError: a NaN or infinite value, or one beyond int64 nanoseconds (about +-292 years, 9.22e9 s);
            names ``where`` (e.g. ``delta_timestamps['b']``) and the first such value.
    """
    ns = np.round(np.asarray(seconds, np.float64) * 1e9)
    bad = ~(np.abs(ns) < 2.0 ** 63)  # NaN and inf too; the largest float below 2**63 fits int64
    if np.any(bad):
        value = np.asarray(seconds).reshape(-1)[int(np.argmax(bad.reshape(-1)))].item()
        raise ValueError(f"{where} must be finite seconds within int64 nanoseconds (|s| < 9.22e9, about 292 "
                         f"years), got {value!r}")
    return ns.astype(np.int64)


def add_ns(t: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(t + offset, past)``: the sum of int64 ns arrays (broadcast) saturated at the int64 limits instead
    of wrapping round, and the bool mask of the sums that did not fit (no timestamp lies there)."""
    t, offset = np.asarray(t, np.int64), np.asarray(offset, np.int64)
    out = t + offset  # wraps where it overflows: fixed below
    up = (offset > 0) & (out < t)
    down = (offset < 0) & (out > t)
    past = up | down
    if np.any(past):
        out = np.where(up, NS_MAX, np.where(down, NS_MIN, out))
    return out, past


def distance_ns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` of int64 ns arrays, exact, saturated at the int64 maximum (the difference of two int64
    times may not fit)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    hi, lo = np.maximum(a, b).view(np.uint64), np.minimum(a, b).view(np.uint64)
    return np.minimum(hi - lo, np.uint64(NS_MAX)).astype(np.int64)  # uint64 difference: exact, >= 0


def tolerance_ns(tolerance: float | None, where: str) -> int | None:
    """A tolerance in seconds (``None``: none) as int64 nanoseconds, rounded; ``float("inf")`` (flag
    nothing by distance: a stream published on change) and very large values become the int64 maximum.

    Raises:
        ValueError: negative or NaN, or not a number (names ``where``, the stream).
    """
    if tolerance is None:
        return None
    if isinstance(tolerance, (bool, np.bool_)) or not isinstance(tolerance, (int, float, np.integer, np.floating)):
        raise ValueError(f"tolerance[{where!r}] must be a number of seconds or None, got {tolerance!r}")
    value = float(tolerance)
    if np.isnan(value) or value < 0:
        raise ValueError(f"tolerance[{where!r}] must be a number of seconds >= 0, got {tolerance!r}")
    return NS_MAX if value * 1e9 >= NS_MAX else int(round(value * 1e9))


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
        # Python ints: a segment's span (last - first) may itself not fit int64.
        spans = [int(b) - int(a) + 1 if f else 0 for a, b, f in zip(self.first, self.last, full)]
        if sum(spans) >= 2 ** 62:
            raise ValueError(f"the stream's episodes span {sum(spans)} ns in all (each episode's first to last "
                             f"sample, summed), past the limit of 2**62 ns (about 146 years) that aligning "
                             f"lays end to end")
        spans = np.asarray(spans, np.int64)
        self.base = np.concatenate(([0], np.cumsum(spans)[:-1])).astype(np.int64) if len(spans) else spans
        # Keys: each segment's times shifted to start at its base; the key axis increases over segments.
        # (times - first) fits (a span < 2**62), and so does adding the base.
        position = np.repeat(self.starts, counts) + _ranks(counts)
        self.keys = (self.times[position] - np.repeat(self.first, counts)) + np.repeat(self.base, counts)
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
        # A query outside its segment may lie farther from it than int64 holds: saturated.
        distance = distance_ns(self.times[lo], t)
        if method == "linear":
            distance = np.minimum(distance, np.where(hi != lo, distance_ns(self.times[hi], t), distance))
        # One rule for steps and windows alike: a value from the future (previous before the first
        # sample) always; else farther than the tolerance, or, without one, any query outside the samples.
        flagged = before & (method == "previous")
        flagged |= (distance > tolerance) if tolerance is not None else (before | after)
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
