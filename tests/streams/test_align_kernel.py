"""The alignment kernel against a plain-Python reference over random streams (hypothesis): random rates,
jitter, gaps, duplicate timestamps, queries past the episode edges, several episodes laid end to end."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from trajstore.streams.align import StreamTimes, align, interpolate, tolerance_ns


@st.composite
def episode_times(draw):
    """One episode's sample times (ns): a random rate, jitter, gaps and duplicates."""
    n = draw(st.integers(1, 40))
    period = draw(st.integers(1, 50_000_000))  # up to 20 Hz .. 1 GHz
    t0 = draw(st.integers(-10**12, 10**15))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    steps = np.full(n, period, np.int64)
    steps[0] = 0
    steps[1:] += rng.integers(-period // 2, period // 2 + 1, n - 1)  # jitter
    steps[1:] = np.maximum(steps[1:], 0)
    gaps = rng.random(n) < 0.1
    steps[gaps] += period * rng.integers(2, 20, int(gaps.sum()))  # dropped samples
    dupes = rng.random(n) < 0.15
    dupes[0] = False
    steps[dupes] = 0  # equal timestamps
    return t0 + np.cumsum(steps)


@st.composite
def stream_and_queries(draw):
    episodes = draw(st.lists(episode_times(), min_size=1, max_size=4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    starts, stops, pos = [], [], 0
    for e in episodes:
        pos += draw(st.integers(0, 3))  # samples of left-out episodes between segments
        starts.append(pos)
        pos += len(e)
        stops.append(pos)
    times = rng.integers(-10**9, 10**9, pos)  # filler outside every segment
    for e, a, b in zip(episodes, starts, stops):
        times[a:b] = e
    segs, qs = [], []
    for k, e in enumerate(episodes):
        span = int(e[-1] - e[0]) + 1
        m = draw(st.integers(1, 30))
        q = rng.integers(int(e[0]) - span // 2 - 5, int(e[-1]) + span // 2 + 6, m)
        q[: min(m, 3)] = rng.choice(e, min(m, 3))  # exact hits of sample times
        segs.append(np.full(m, k))
        qs.append(q)
    tol = draw(st.none() | st.integers(0, 60_000_000))
    return times, np.array(starts), np.array(stops), np.concatenate(segs), np.concatenate(qs), tol


def reference(times, start, stop, t, method):
    """Position(s) and weight of the sample(s) used for one query, by a plain loop. Among samples with equal
    times the last one is used."""
    idx = list(range(start, stop))
    last_at = lambda time: max(i for i in idx if times[i] == time)  # noqa: E731
    if t < times[start]:
        return last_at(times[start]), None, 0.0
    lo = max(i for i in idx if times[i] <= t)
    if method == "previous":
        return lo, None, 0.0
    if method == "nearest":
        best = min(abs(int(times[i]) - t) for i in idx)
        return last_at(min(times[i] for i in idx if abs(int(times[i]) - t) == best)), None, 0.0
    if times[lo] == t or t > times[stop - 1]:
        return lo, None, 0.0
    return lo, lo + 1, (t - int(times[lo])) / (int(times[lo + 1]) - int(times[lo]))


@settings(max_examples=300, deadline=None)
@given(stream_and_queries(), st.sampled_from(["previous", "nearest", "linear"]))
def test_kernel_matches_reference(case, method):
    times, starts, stops, seg, t, tol = case
    a = StreamTimes(times, starts, stops).align(seg, t, method, tol)
    for j in range(len(t)):
        s, e, q = int(starts[seg[j]]), int(stops[seg[j]]), int(t[j])
        lo, hi, w = reference(times, s, e, q, method)
        assert a.lo[j] == lo, (j, method)
        assert a.hi[j] == (lo if hi is None else hi)
        assert a.weight[j] == pytest.approx(w, abs=1e-12)
        used = [int(times[a.lo[j]])] + ([int(times[hi])] if hi is not None else [])
        assert a.distance[j] == min(abs(u - q) for u in used)
        assert a.outside[j] == (q < times[s] or q > times[e - 1])
        before = method == "previous" and q < times[s]
        assert a.flagged[j] == (before or (tol is not None and a.distance[j] > tol))


@settings(max_examples=200, deadline=None)
@given(stream_and_queries())
def test_previous_never_newer_than_the_query(case):
    times, starts, stops, seg, t, tol = case
    a = StreamTimes(times, starts, stops).align(seg, t, "previous", tol)
    inside = t >= times[starts[seg]]
    assert np.all(times[a.lo][inside] <= t[inside])
    assert np.all(a.flagged[~inside])  # nothing at or before: the first sample, flagged
    assert np.all(a.lo >= starts[seg]) and np.all(a.lo < stops[seg])


@settings(max_examples=200, deadline=None)
@given(stream_and_queries(), st.floats(-5, 5), st.floats(-1e3, 1e3))
def test_linear_of_a_linear_signal_is_exact(case, slope, offset):
    times, starts, stops, seg, t, _ = case
    a = StreamTimes(times, starts, stops).align(seg, t, "linear")
    t_s = (times - times.min()).astype(np.float64) * 1e-9
    signal = (offset + slope * t_s)[:, None] * np.array([1.0, -2.0])  # (N, 2) float64
    got = interpolate(signal[a.lo], signal[a.hi], a.weight, np.dtype(np.float64))
    first, last = times[starts[seg]], times[stops[seg] - 1]
    clipped = (np.clip(t, first, last) - times.min()).astype(np.float64) * 1e-9
    want = (offset + slope * clipped)[:, None] * np.array([1.0, -2.0])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(stream_and_queries())
def test_nearest_picks_a_closest_sample(case):
    times, starts, stops, seg, t, _ = case
    a = StreamTimes(times, starts, stops).align(seg, t, "nearest")
    for j in range(len(t)):
        seg_times = times[starts[seg[j]]:stops[seg[j]]]
        assert a.distance[j] == np.abs(seg_times - t[j]).min()


@settings(max_examples=200, deadline=None)
@given(stream_and_queries(), st.sampled_from(["previous", "nearest", "linear"]))
def test_tolerance_flags_exactly_the_samples_farther_than_it(case, method):
    times, starts, stops, seg, t, tol = case
    tol = 1_000_000 if tol is None else tol
    free = StreamTimes(times, starts, stops).align(seg, t, method)
    a = StreamTimes(times, starts, stops).align(seg, t, method, tol)
    never_at_or_before = (t < times[starts[seg]]) & (method == "previous")
    np.testing.assert_array_equal(a.flagged, (free.distance > tol) | never_at_or_before)
    np.testing.assert_array_equal(a.lo, free.lo)


def test_small_cases_by_hand():
    times = np.array([10, 20, 20, 40])
    q = np.array([5, 10, 15, 20, 25, 30, 35, 45])
    prev = align(times, q, "previous", 5)
    assert prev.lo.tolist() == [0, 0, 0, 2, 2, 2, 2, 3]
    assert prev.flagged.tolist() == [True, False, False, False, False, True, True, False]
    near = align(times, q, "nearest")
    assert near.lo.tolist() == [0, 0, 0, 2, 2, 2, 3, 3]  # 15, 30: ties -> the earlier; equal times -> the last
    lin = align(times, q, "linear")
    assert lin.lo.tolist() == [0, 0, 0, 2, 2, 2, 2, 3]
    assert lin.hi.tolist() == [0, 0, 1, 2, 3, 3, 3, 3]
    np.testing.assert_allclose(lin.weight, [0, 0, 0.5, 0, 0.25, 0.5, 0.75, 0])
    assert lin.distance.tolist() == [5, 0, 5, 0, 5, 10, 5, 5]
    assert lin.outside.tolist() == [True] + [False] * 6 + [True]


def test_bad_input():
    with pytest.raises(ValueError, match="no sample"):
        align(np.zeros(0, np.int64), np.array([1]), "previous")
    with pytest.raises(ValueError, match="'cubic'"):
        align(np.array([1]), np.array([1]), "cubic")
    with pytest.raises(ValueError, match="segment 1 has no sample"):
        StreamTimes(np.array([1, 2]), np.array([0, 2]), np.array([2, 2])).align(np.array([1]), np.array([1]),
                                                                               "nearest")
    with pytest.raises(ValueError, match=r"tolerance\['joints'\].*>= 0"):
        tolerance_ns(-0.1, "joints")
    assert tolerance_ns(0.0105, "j") == 10_500_000
