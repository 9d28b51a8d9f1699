"""Measured stream rates on synthetic timestamps whose answers are known by construction."""

import numpy as np
import pytest

from trajstore.streams.rates import GAP_FACTOR, differences, measure_rates

MS = 1_000_000  # ns


def test_regular_stream_has_exact_period_and_no_jitter():
    t = np.arange(100, dtype=np.int64) * 2 * MS + 5_000  # 500 Hz
    r = measure_rates([t])
    assert r.samples == 100 and r.periods == 99 and r.episodes == 1
    assert r.median_period_s == pytest.approx(0.002, abs=1e-15)
    assert r.rate_hz == pytest.approx(500.0, abs=1e-9)
    assert r.mean_rate_hz == pytest.approx(500.0, abs=1e-9)
    assert r.jitter_std_s == 0.0 and r.jitter_p99_s == 0.0
    assert r.gaps == 0 and r.max_gap_s is None and r.missing_estimate == 0
    assert r.duplicates == 0 and r.non_monotonic == 0 and r.ordered
    assert r.span_s == pytest.approx(99 * 0.002)


def test_jitter_std_and_p99_match_numpy_on_known_deviations():
    # 30 Hz nominal: periods 33.333 ms +- a known pattern of deviations (all well under the gap limit)
    period = 33_333_333
    dev = np.tile(np.array([-1, 0, 1, 2, -2], np.int64) * 100_000, 20)  # +-0.2 ms
    t = np.concatenate([[0], np.cumsum(period + dev)])
    r = measure_rates([t])
    periods = np.diff(t).astype(np.float64)
    median = np.median(periods)
    assert median == period  # the pattern is symmetric about 0
    assert r.median_period_s == pytest.approx(period * 1e-9)
    assert r.jitter_std_s == pytest.approx(np.std(periods - median) * 1e-9)
    assert r.jitter_std_s == pytest.approx(np.sqrt(2) * 1e-4)  # deviations -0.2..0.2 ms, each equally often
    assert r.jitter_p99_s == pytest.approx(np.percentile(np.abs(periods - median), 99) * 1e-9)
    assert r.jitter_p99_s == pytest.approx(2e-4)
    assert r.gaps == 0


def test_gaps_counted_with_the_largest_its_episode_and_time():
    period = 10 * MS  # 100 Hz
    a = np.arange(50, dtype=np.int64) * period + 1_000 * MS
    a = np.delete(a, [10, 11, 12])                  # 40 ms period after sample 9: 3 missing
    b = np.arange(40, dtype=np.int64) * period + 9_000 * MS
    b = np.delete(b, [30])                          # 20 ms period after sample 29: 1 missing
    c = np.arange(30, dtype=np.int64) * period + 20_000 * MS
    c = np.concatenate([c[:5], c[5:] + 4 * MS])     # one 14 ms period (1.4x): not a gap
    r = measure_rates([a, b, c], episode_ids=[7, 8, 9])
    assert r.median_period_s == pytest.approx(0.010)
    assert r.gaps == 2
    assert r.missing_estimate == 4
    assert r.max_gap_s == pytest.approx(0.040)
    assert r.max_gap_episode == 7
    assert r.max_gap_at_ns == 1_000 * MS + 9 * period
    assert r.max_gap_at_s == pytest.approx(0.090)
    assert r.samples == 47 + 39 + 30
    assert r.periods == r.samples - 3  # no period across episodes
    # the gaps are left out of the jitter: only the 14 ms period deviates
    regular = np.array([10.0] * (r.periods - 3) + [14.0])
    assert r.jitter_std_s == pytest.approx(np.std(regular - 10.0) * 1e-3)


def test_exactly_the_gap_factor_is_not_a_gap():
    t = np.array([0, 10, 20, 35, 45], np.int64) * MS  # 15 ms = 1.5 x 10 ms
    assert measure_rates([t]).gaps == 0
    t = np.array([0, 10, 20, 36, 46], np.int64) * MS
    r = measure_rates([t])
    assert r.gaps == 1 and r.max_gap_s == pytest.approx(0.016)
    assert measure_rates([t], gap_factor=2.0).gaps == 0
    assert GAP_FACTOR == 1.5


def test_time_between_episodes_is_not_a_period():
    a = np.arange(10, dtype=np.int64) * MS
    b = np.arange(10, dtype=np.int64) * MS + 3_600_000 * MS  # an hour later
    c = np.arange(10, dtype=np.int64) * MS + 5 * MS          # earlier than the end of b: not out of order
    r = measure_rates([a, b, c])
    assert r.gaps == 0 and r.non_monotonic == 0 and r.periods == 27
    assert r.median_period_s == pytest.approx(0.001)
    assert r.span_s == pytest.approx(3 * 0.009)


def test_duplicates_and_out_of_order_samples_are_counted_and_located():
    a = np.array([0, 10, 20, 20, 30, 40], np.int64) * MS
    b = np.array([0, 10, 20, 15, 30, 30, 30, 25], np.int64) * MS
    r = measure_rates([a, b], episode_ids=[3, 4])
    assert r.duplicates == 3
    assert r.non_monotonic == 2
    assert not r.ordered
    assert r.first_non_monotonic == (4, 3)
    # the statistics use the positive periods only: median 10 ms
    assert r.median_period_s == pytest.approx(0.010)
    assert "OUT OF ORDER" in r.line()


I64 = np.iinfo(np.int64)


def test_times_at_the_int64_edges_are_ordered_by_comparison_not_a_wrapping_difference():
    # np.diff wraps here: 1 -> int64.min looks like a huge positive period, int64.min -> 0 like a negative one
    down = np.array([0, 1, I64.min], np.int64)
    up = np.array([I64.min, 0, I64.max], np.int64)
    r = measure_rates([down, up], episode_ids=[7, 8])
    assert r.non_monotonic == 1 and r.first_non_monotonic == (7, 2) and not r.ordered
    assert r.duplicates == 0
    # the increasing episode's periods: 2**63 ns and 2**63 - 1 ns (as float64), its span 2**64 - 1 ns
    r = measure_rates([up])
    assert r.ordered and r.periods == 2
    assert r.median_period_s == pytest.approx(2.0**63 * 1e-9)
    assert r.span_s == pytest.approx(2.0**64 * 1e-9)
    # a gap from an edge: 0, 10 ms, 20 ms, then int64.max: one gap, located at 20 ms from the start
    r = measure_rates([np.array([0, 10 * MS, 20 * MS, I64.max], np.int64)])
    assert r.gaps == 1 and r.median_period_s == pytest.approx(0.010)
    assert r.max_gap_s == pytest.approx((I64.max - 20 * MS) * 1e-9) and r.max_gap_at_s == pytest.approx(0.020)


def test_differences_have_the_sign_of_the_comparison():
    later = np.array([I64.min, 0, I64.max, 5, I64.max], np.int64)
    earlier = np.array([1, I64.min, I64.min, 5, I64.max - 3], np.int64)
    d = differences(later, earlier)
    assert d.dtype == np.float64
    np.testing.assert_array_equal(d, [-(2.0**63) - 1, 2.0**63, 2.0**64 - 1, 0.0, 3.0])
    assert list(np.sign(d)) == list(np.sign(later.astype(object) - earlier.astype(object)))


def test_empty_and_single_sample_episodes():
    r = measure_rates([np.zeros(0, np.int64), np.array([5], np.int64)])
    assert r.samples == 1 and r.episodes == 2 and r.episodes_with_samples == 1 and r.periods == 0
    assert r.median_period_s is None and r.rate_hz is None and r.gaps == 0
    assert "no period" in r.line()
    r = measure_rates([])
    assert r.samples == 0 and r.episodes == 0 and r.median_period_s is None


def test_all_duplicates_have_no_rate():
    r = measure_rates([np.full(5, 7, np.int64)])
    assert r.duplicates == 4 and r.median_period_s is None and r.jitter_std_s is None


def test_random_jittered_stream_matches_a_plain_reference():
    rng = np.random.default_rng(0)
    episodes, ids = [], [11, 12, 13, 14]
    for k in range(4):
        n = int(rng.integers(50, 400))
        periods = rng.normal(2 * MS, 0.05 * MS, n - 1).astype(np.int64)
        drop = rng.random(n - 1) < 0.02
        periods[drop] *= 3
        episodes.append(np.concatenate([[k * 10**12], k * 10**12 + np.cumsum(periods)]))
    r = measure_rates(episodes, ids)
    every = [p for t in episodes for p in np.diff(t).tolist()]
    median = float(np.median(every))
    gaps = [(p, k, int(t[i])) for k, t in zip(ids, episodes) for i, p in enumerate(np.diff(t).tolist())
            if p > 1.5 * median]
    regular = np.array([p for p in every if p <= 1.5 * median], np.float64)
    assert r.median_period_s == pytest.approx(median * 1e-9)
    assert r.gaps == len(gaps) > 0
    longest = max(gaps, key=lambda g: g[0])
    assert (r.max_gap_s, r.max_gap_episode, r.max_gap_at_ns) == (pytest.approx(longest[0] * 1e-9), longest[1],
                                                                 longest[2])
    assert r.jitter_std_s == pytest.approx(np.std(regular - median) * 1e-9)
    assert r.jitter_p99_s == pytest.approx(np.percentile(np.abs(regular - median), 99) * 1e-9)


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="episode 1.*int64"):
        measure_rates([np.arange(3), np.arange(3) * 0.5])
    with pytest.raises(ValueError, match="1-D"):
        measure_rates([np.zeros((2, 2), np.int64)])
    with pytest.raises(ValueError, match="episode_ids"):
        measure_rates([np.arange(3)], episode_ids=[1, 2])
    with pytest.raises(ValueError, match="gap_factor"):
        measure_rates([np.arange(3)], gap_factor=1.0)


def test_json_and_line():
    t = np.array([0, 10, 20, 60, 70], np.int64) * MS
    r = measure_rates([t], [5])
    d = r.to_json()
    assert d["gaps"] == 1 and d["max_gap_episode"] == 5 and d["rate_hz"] == pytest.approx(100.0)
    line = r.line()
    assert "100 Hz" in line and "median period 10 ms" in line and "1 gap (max 40 ms in episode 5 at 0.020 s)" in line
