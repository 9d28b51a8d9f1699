"""Aligned views of random stream buffers (hypothesis): random rates, jitter, gaps, duplicate times, streams
starting and stopping at their own times, episodes where a stream is missing; every step's values and
flags equal the plain reference computed from ``buf.read``."""

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.streams.test_aligned import expected
from trajstore.spaces import BoxSpace
from trajstore.streams import StreamBuffer

SPACES = {"a": BoxSpace(-1e9, 1e9, (2,), np.float64), "b": BoxSpace(-1e9, 1e9, (), np.float32),
          "c": BoxSpace(-10**9, 10**9, (), np.int64)}


@st.composite
def recording(draw):
    n_episodes = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    episodes = []
    for _ in range(n_episodes):
        streams = {}
        for name in SPACES:
            if draw(st.integers(0, 9)) == 0:
                continue  # this stream has no sample in the episode
            n = draw(st.integers(1, 25))
            period = draw(st.integers(1_000_000, 60_000_000))
            steps = np.maximum(period + rng.integers(-period // 2, period // 2 + 1, n), 0)
            steps[rng.random(n) < 0.1] *= 4  # gaps
            steps[rng.random(n) < 0.1] = 0  # equal times
            steps[0] = draw(st.integers(0, 80_000_000))  # each stream starts at its own time
            streams[name] = np.cumsum(steps).astype(np.int64)
        episodes.append(streams)
    how = {n: draw(st.sampled_from(["previous", "nearest"] + (["linear"] if n != "c" else []))) for n in SPACES}
    tolerance = {n: draw(st.none() | st.floats(0, 0.05)) for n in SPACES}
    anchor = draw(st.sampled_from([None, "a", "b", "c"]))
    rate = draw(st.floats(5, 200)) if anchor is None else None
    return episodes, how, tolerance, anchor, rate


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recording())
def test_random_views_match_the_reference(case):
    episodes, how, tolerance, anchor, rate = case
    with tempfile.TemporaryDirectory() as tmp:
        buf = StreamBuffer.create(Path(tmp) / "b", streams=SPACES)
        count = 0
        for e, streams in enumerate(episodes):
            if not streams:
                continue
            for name, t in streams.items():
                values = np.arange(count, count + len(t)) + 0.25 * (t - t[0]) * 1e-6
                count += len(t)
                shaped = np.stack([values, -values], 1) if name == "a" else values
                buf.extend(name, np.round(shaped).astype(SPACES[name].dtype) if name == "c" else shaped, t + e * 10**10)
            buf.end_episode()
        view = buf.aligned(anchor=anchor, rate_hz=rate, how=how, tolerance=tolerance)
        kept = [ep.id for ep in buf.episodes if all(ep.streams[n].count for n in SPACES) and (
            anchor is not None or max(ep.streams[n].first_ns for n in SPACES) <= min(
                ep.streams[n].last_ns for n in SPACES))]
        assert [e.id for e in view.episodes] == kept  # episodes missing a stream (or no common time) left out
        if not len(view):
            buf.close()
            return
        steps = view[:]
        for name in SPACES:
            tol = tolerance[name]
            want, flags, _ = expected(buf, view, name, (), how[name], None if tol is None else round(tol * 1e9))
            np.testing.assert_allclose(steps[name].astype(np.float64), want.astype(SPACES[name].dtype), rtol=1e-6)
            np.testing.assert_array_equal(steps["is_pad"][name], flags)
        buf.close()
