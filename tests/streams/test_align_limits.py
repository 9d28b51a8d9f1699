"""Aligned views at the edges of int64 nanoseconds and of memory: rates whose period or anchor count
does not fit, time offsets beyond int64 ns, and copies of a view (pickle, DataLoader workers) made on a
writer's buffer with samples not yet flushed."""

import pickle
import re

import numpy as np
import pytest

from trajstore.spaces import BoxSpace
from trajstore.streams import StreamBuffer
from trajstore.streams.aligned_steps import MAX_RATE_STEPS, rate_count, rate_times

I64 = np.iinfo(np.int64)
SPACES = {"a": BoxSpace(-1e9, 1e9, (2,), np.float32), "b": BoxSpace(-1e9, 1e9, (), np.float64)}


def two_streams(path, t_ns):
    buf = StreamBuffer.create(path, streams=SPACES)
    t_ns = np.asarray(t_ns, np.int64)
    buf.extend("b", np.arange(len(t_ns), dtype=np.float64), t_ns)
    buf.extend("a", np.zeros((len(t_ns), 2), np.float32), t_ns)
    buf.end_episode()
    return buf


@pytest.mark.parametrize("rate", [1e-12, 1e-300, 5e-324, 0.01])
def test_a_period_longer_than_the_episode_gives_only_its_start(tmp_path, rate):
    with two_streams(tmp_path / "b", (np.arange(5) + 1) * 10**9) as buf:
        view = buf.aligned(rate_hz=rate)
        assert view.anchor_times.tolist() == [10**9]
        assert len(view) == 1 and float(view[0]["b"]) == 0.0 and not view[0]["is_pad"]["b"]


@pytest.mark.parametrize("first, last, rate", [
    (I64.min, I64.max, 1e-9),       # a period of 1e18 ns over the whole int64 range
    (I64.max - 10, I64.max, 3e8),   # steps of 3.33 ns up to int64 max
    (I64.min, I64.min + 7, 1e9),
    (0, 10**9, 1e-12),
])
def test_rate_times_stay_inside_the_episode(first, last, rate):
    t = rate_times(first, last, rate)
    assert len(t) and int(t[0]) == first
    assert all(first <= int(x) <= last for x in t)
    assert np.all(np.diff(t) > 0)
    assert rate_count(first, last, rate) >= len(t)
    span = last - first
    period = 1e9 / rate
    want = [first + round(i * period) for i in range(len(t) + 2) if round(i * period) <= span]
    assert [int(x) for x in t] == want


def test_rate_times_by_hand():
    assert rate_times(0, 10**9, 4.0).tolist() == [0, 250_000_000, 500_000_000, 750_000_000, 10**9]
    assert rate_times(5, 4, 4.0).tolist() == []
    assert rate_count(0, 10**9, 4.0) == 5


@pytest.mark.parametrize("rate, count", [(1e8, "10,000,000,001"), (1e300, "9,223,372,036,854,775,809")])
def test_a_rate_with_too_many_anchors_is_refused_before_allocating(tmp_path, rate, count):
    with two_streams(tmp_path / "b", np.array([0, 100]) * 10**9) as buf:
        with pytest.raises(ValueError, match=rf"rate_hz={re.escape(repr(rate))} gives about {count} anchor steps "
                                             rf"over the 100 s "
                                             rf"of 1 episode\(s\), more than the 2,147,483,648 \(2\*\*31\)"):
            buf.aligned(rate_hz=rate)
        # just under the bound is accepted (counted, not made, here)
        assert rate_count(0, 100 * 10**9, (MAX_RATE_STEPS - 2) / 100) <= MAX_RATE_STEPS
        assert len(buf.aligned(rate_hz=1e3)) == 100_001


@pytest.mark.parametrize("offset, shown", [(1e10, "10000000000.0"), (-9.3e9, "-9300000000.0"), (1e30, "1e+30")])
def test_time_offsets_beyond_int64_ns_are_refused(tmp_path, offset, shown):
    with two_streams(tmp_path / "b", np.arange(5) * 10**9) as buf:
        view = buf.aligned(anchor="a")
        with pytest.raises(ValueError, match=rf"delta_timestamps\['b'\] must be finite seconds within int64 "
                                             rf"nanoseconds .*got {re.escape(shown)}"):
            view.sample_windows(2, delta_timestamps={"b": [0.0, offset]})
        for bad in (np.nan, np.inf, -np.inf):
            with pytest.raises(ValueError, match=r"delta_timestamps\['b'\] must be a non-empty 1-D sequence of finite"):
                view.window_request(delta_timestamps={"b": [bad]})
        # the largest offsets that fit are accepted: far past every sample, the edge sample, flagged
        data, pad = view.windows_at([0, 4], view.window_request(delta_timestamps={"b": [9.2e9, -9.2e9, 1.0]}))
        assert data["b"].tolist() == [[4.0, 0.0, 1.0], [4.0, 0.0, 4.0]]
        assert pad["b"].tolist() == [[True, True, False], [True, True, True]]


def test_anchor_plus_offset_past_int64_saturates_instead_of_wrapping(tmp_path):
    with StreamBuffer.create(tmp_path / "b", streams=SPACES) as buf:
        buf.extend("b", np.array([0.0, 1.0]), np.array([I64.max - 20, I64.max - 10]))
        buf.extend("a", np.zeros((2, 2), np.float32), np.array([I64.max - 25, I64.max - 10]))
        buf.end_episode()
        view = buf.aligned(anchor="a", tolerance={"b": 1.0})
        assert view[:]["b"].tolist() == [0.0, 1.0] and view[:]["is_pad"]["b"].tolist() == [True, False]
        data, pad = view.windows_at([0, 1], view.window_request(delta_timestamps={"b": [-5.0, 0.0, 5.0]}))
        # + 5 s lies past int64: after b's last sample (not wrapped round to before its first), and
        # flagged (5 s from it, farther than the tolerance)
        assert data["b"].tolist() == [[0.0, 0.0, 1.0], [0.0, 1.0, 1.0]]
        assert pad["b"].tolist() == [[True, True, True], [True, False, True]]


def test_kernel_distances_and_spans_at_the_int64_edges():
    from trajstore.streams.align import StreamTimes, add_ns, align, distance_ns

    a = align(np.array([I64.min, I64.min + 5]), np.array([I64.max, I64.min + 2]), "nearest", tolerance=10)
    assert a.lo.tolist() == [1, 0] and a.distance.tolist() == [I64.max, 2] and a.flagged.tolist() == [True, False]
    a = align(np.array([I64.max - 4, I64.max]), np.array([I64.min, I64.max - 1]), "linear", tolerance=1)
    assert a.lo.tolist() == [0, 0] and a.hi.tolist() == [0, 1] and a.weight[1] == 0.75
    assert a.distance.tolist() == [I64.max, 1] and a.flagged.tolist() == [True, False]
    # two episodes at both ends of int64: their spans lay end to end
    split = StreamTimes(np.array([I64.min, I64.min + 3, I64.max - 1, I64.max]), np.array([0, 2]), np.array([2, 4]))
    a = split.align(np.array([0, 1, 1]), np.array([I64.min + 2, I64.max, 0]), "previous")
    assert a.lo.tolist() == [0, 3, 2] and a.flagged.tolist() == [False, False, True]
    with pytest.raises(ValueError, match=r"past the limit of 2\*\*62 ns \(about 146 years\)"):
        StreamTimes(np.array([I64.min, I64.max]), np.array([0]), np.array([2]))
    assert distance_ns(np.array([I64.min]), np.array([I64.max])).tolist() == [I64.max]
    total, past = add_ns(np.array([I64.max - 1, I64.min + 1, 5]), np.array([5, -5, -7]))
    assert total.tolist() == [I64.max, I64.min, -2] and past.tolist() == [True, True, False]


def writer_with_unflushed_samples(path):
    """Episode 0 committed (5 steps at anchor 'a'); episode 1 open with 5 samples per stream, not flushed."""
    buf = StreamBuffer.create(path, streams=SPACES)
    buf.extend("b", np.arange(5.0), np.arange(5) * 10**8)
    buf.extend("a", np.ones((5, 2), np.float32), np.arange(5) * 10**8 + 1)
    buf.end_episode()
    buf.extend("b", np.arange(5.0) + 100, np.arange(5) * 10**8 + 10**10)
    buf.extend("a", np.ones((5, 2), np.float32), np.arange(5) * 10**8 + 10**10 + 1)
    return buf


def test_a_copy_of_a_view_has_its_steps_or_refuses_clearly(tmp_path):
    with writer_with_unflushed_samples(tmp_path / "b") as buf:
        view = buf.aligned(anchor="a", how={"b": "nearest"})
        want = view[:]
        assert want["b"].tolist() == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
        with pytest.raises(ValueError, match=r"made with 10 samples of stream '.', but only 5 are held here.*"
                                             r"flush\(\) the "
                                             r"writer before sending the view to other processes"):
            pickle.dumps(view)
        buf.flush()
        data = pickle.dumps(view)
        # the writer goes on: more samples of the open episode, flushed, then a new episode
        buf.extend("b", np.array([200.0]), np.array([10**10 + 4 * 10**8 + 1]))
        buf.extend("a", np.ones((1, 2), np.float32), np.array([10**10 + 10**9]))
        buf.end_episode()
        buf.extend("b", np.arange(3.0), np.arange(3) * 10**8 + 10**11)
        buf.extend("a", np.ones((3, 2), np.float32), np.arange(3) * 10**8 + 10**11)
        buf.end_episode()
        for copy in (pickle.loads(data), pickle.loads(pickle.dumps(view))):
            with copy:  # the steps the original was made with, not the samples committed since
                assert len(copy) == 10 and [(e.id, e.done, len(e)) for e in copy.episodes] == [(0, True, 5),
                                                                                                  (1, False, 5)]
                got = copy[:]
                np.testing.assert_array_equal(got["b"], want["b"])
                np.testing.assert_array_equal(got["timestamp"], want["timestamp"])
                np.testing.assert_array_equal(got["is_pad"]["b"], want["is_pad"]["b"])
        assert len(buf.aligned(anchor="a")) == 14


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_of_a_view_with_unflushed_samples(tmp_path, context):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset

    with writer_with_unflushed_samples(tmp_path / "b") as buf:
        view = buf.aligned(anchor="a")
        ds = ReplayBufferDataset(view, delta_timestamps={"b": [-0.1, 0.0]})
        assert len(ds) == 10
        loader = DataLoader(ds, batch_size=10, num_workers=2, multiprocessing_context=context)
        with pytest.raises(ValueError, match=r"but only 5 are held here.*flush\(\) the writer before sending the view"):
            list(loader)
        buf.flush()
        buf.extend("b", np.array([7.0]), np.array([10**10 + 4 * 10**8 + 1]))  # after the view: not in its steps
        buf.flush()
        batches = list(DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=context))
        got = torch.cat([b["b"] for b in batches]).numpy()
        want, _ = view.windows_at(np.arange(10), ds.request)
        np.testing.assert_array_equal(got, want["b"])
        assert got[:, 1].tolist() == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]


def test_unpickling_refuses_a_folder_that_lost_the_view_samples(tmp_path):
    with writer_with_unflushed_samples(tmp_path / "b") as buf:
        buf.flush()
        with StreamBuffer.load_from(tmp_path / "b") as reader:
            view = reader.aligned(anchor="a")
            assert len(view) == 10
            data = pickle.dumps(view)  # a reader's view: no check at pickling
            assert buf.discard_episode() == 10  # the open episode's samples are gone from the folder
            with pytest.raises(ValueError, match=r"made with 10 samples of stream '.', but only 5 are held here"):
                pickle.loads(data)
