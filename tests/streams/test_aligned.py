"""AlignedView on real stream buffers: values at the anchors against a plain reference computed from
``buf.read``, episodes, windows by delta_indices and delta_timestamps with is_pad, only the needed camera
frames read, statistics, pickling and bad arguments."""

import pickle
import warnings

import numpy as np
import pytest

from tests.streams.helpers import H, W
from tests.streams.test_align_kernel import reference
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.streams import StreamBuffer
from trajstore.streams.aligned import AlignedView

SPACES = {
    "wrist": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
    "joints": BoxSpace(-1e6, 1e6, (3,), np.float64),
    "ft": DictSpace({"force": BoxSpace(-1e6, 1e6, (2,), np.float32), "count": BoxSpace(0, 10**6, (), np.int32)}),
    "cmd": BoxSpace(-1e6, 1e6, (2,), np.float32),
}


def jittered(rng, t0, period, n, dupes=False):
    """``n`` times from ``t0`` (ns) at ``period`` with jitter, dropped samples and (optionally) duplicates."""
    steps = np.full(n, period, np.int64)
    steps[0] = 0
    steps[1:] += rng.integers(-period // 3, period // 3 + 1, n - 1)
    gaps = rng.random(n) < 0.05
    gaps[0] = False
    steps[gaps] += 3 * period
    if dupes:
        same = rng.random(n) < 0.1
        same[0] = False
        steps[same] = 0
    return t0 + np.cumsum(steps)


def frame_of(k):
    return np.full((H, W, 3), k % 251, np.uint8)


def record(path, seed=0, episodes=3):
    """Camera ~30 Hz, joints ~500 Hz (duplicates), force ~1 kHz (dict with an int leaf), commands ~50 Hz;
    each stream starts and ends at its own time; the last episode has no command (left out of views of it)."""
    rng = np.random.default_rng(seed)
    buf = StreamBuffer.create(path, streams=SPACES, kind_kwargs={"image": {"format": "PNG"}})
    counter = {"wrist": 0, "joints": 0, "ft": 0, "cmd": 0}
    for e in range(episodes):
        t0 = 10**9 * (5 + 100 * e)
        for name, period, n in (("wrist", 33_333_333, 20), ("joints", 2_000_000, 300), ("ft", 1_000_000, 600),
                                ("cmd", 20_000_000, 30)):
            if name == "cmd" and e == episodes - 1:
                continue
            t = jittered(rng, t0 + int(rng.integers(0, 30_000_000)), period, n, dupes=name == "joints")
            k = counter[name] + np.arange(n)
            counter[name] += n
            if name == "wrist":
                values = np.stack([frame_of(int(i)) for i in k])
            elif name == "joints":
                s = (t - t0) * 1e-9
                values = np.stack([np.sin(s), 2 * s + 1, k.astype(np.float64)], 1)
            elif name == "ft":
                values = {"force": np.stack([k, -k], 1).astype(np.float32), "count": k.astype(np.int32)}
            else:
                values = np.stack([k, k * 0.5], 1).astype(np.float32)
            buf.extend(name, values, t)
        buf.end_episode(task=f"t{e}", interrupted=e == 1)
    return buf


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("aligned") / "buf"
    record(path).close()
    return path


@pytest.fixture
def buf(folder):
    b = StreamBuffer.load_from(folder)
    yield b
    b.close()


def leaf(value, path):
    for key in path:
        value = value[key]
    return value


def expected(buf, view, name, path, method, tol_ns, times=None, episodes=None):
    """The reference values (float64) and flags of stream ``name``'s leaf ``path`` at each step of the view
    (or at ``times`` (S,) in view episodes ``episodes``), from ``buf.read``, by plain loops."""
    kept = {e.id: k for k, e in enumerate(buf.episodes)}
    if times is None:
        times = view.anchor_times
        episodes = np.concatenate([np.full(len(e), i) for i, e in enumerate(view.episodes)])
    values, flags, outside = [], [], []
    for t, ve in zip(times, episodes):
        t_s, v = buf.read(name, episode=kept[view.episodes[ve].id])
        v = np.asarray(leaf(v, path), np.float64)
        lo, hi, w = reference(t_s, 0, len(t_s), int(t), method)
        values.append(v[lo] if hi is None else (1 - w) * v[lo] + w * v[hi])
        used = [abs(int(t_s[lo]) - int(t))] + ([abs(int(t_s[hi]) - int(t))] if hi is not None else [])
        outside.append(t < t_s[0] or t > t_s[-1])
        flags.append((method == "previous" and t < t_s[0]) or (min(used) > tol_ns if tol_ns is not None else outside[-1]))
    return np.array(values), np.array(flags), np.array(outside)


@pytest.mark.parametrize("args", [
    dict(anchor="wrist", how={"joints": "linear", "cmd": "nearest"}, tolerance={"joints": 0.0015, "ft": 0.0005}),
    dict(anchor="joints", how={"ft": "nearest", "cmd": "linear"}, tolerance={"cmd": 0.012, "wrist": 0.02}),
    dict(rate_hz=45.0, how={"joints": "nearest"}, tolerance={"wrist": 0.01, "cmd": 0.0}),
])
def test_values_at_anchors_match_the_reference(buf, args):
    view = buf.aligned(**args)
    assert isinstance(view, AlignedView)
    # the last episode has no "cmd" sample: left out; the others keep their ids, data and flags
    assert [e.id for e in view.episodes] == [0, 1]
    assert [e.data for e in view.episodes] == [{"task": "t0"}, {"task": "t1"}]
    assert [e.interrupted for e in view.episodes] == [False, True]
    steps = view[:]
    assert len(view) == len(view.anchor_times) == steps["timestamp"].shape[0]
    np.testing.assert_array_equal(steps["timestamp"], view.anchor_times)
    if "anchor" in args:
        anchor_times = np.concatenate([buf.read(args["anchor"], episode=k)[0] for k in (0, 1)])
        np.testing.assert_array_equal(view.anchor_times, anchor_times)
    else:
        for k, e in enumerate(view.episodes):
            t = view.anchor_times[e.start:e.stop]
            first = max(buf.episode(k).streams[n].first_ns for n in SPACES)
            last = min(buf.episode(k).streams[n].last_ns for n in SPACES)
            np.testing.assert_array_equal(t, first + np.round(np.arange(len(t)) * 1e9 / 45.0).astype(np.int64))
            assert t[-1] <= last < t[-1] + 1e9 / 45.0
    for name, paths in (("wrist", [()]), ("joints", [()]), ("ft", [("force",), ("count",)]), ("cmd", [()])):
        method = args["how"].get(name, "previous")
        tol = args["tolerance"].get(name)
        for path in paths:
            want, flags, _ = expected(buf, view, name, path, method, None if tol is None else round(tol * 1e9))
            got = leaf(steps[name], path)
            assert got.dtype == leaf(SPACES[name], path).dtype
            np.testing.assert_allclose(got, want.astype(got.dtype), rtol=1e-6)
            np.testing.assert_array_equal(steps["is_pad"][name], flags)
    # one step and a random index read the same values as the whole batch
    idx = np.array([5, 0, 5, len(view) - 1])
    some = view[idx]
    np.testing.assert_array_equal(some["joints"], steps["joints"][idx])
    one = view[3]
    np.testing.assert_array_equal(one["wrist"], steps["wrist"][3])
    assert one["is_pad"]["cmd"] == steps["is_pad"]["cmd"][3]


def test_previous_is_causal_and_linear_is_exact_on_a_linear_leaf(buf):
    view = buf.aligned(anchor="wrist", how={"joints": "linear"}, streams=["joints", "wrist"])
    steps = view[:]
    assert list(view.space.spaces) == ["joints", "wrist", "timestamp", "is_pad"]
    # joints[:, 1] = 2 s + 1: linear interpolation gives it exactly at each anchor inside the samples
    t0 = np.concatenate([np.full(len(e), 10**9 * (5 + 100 * k)) for k, e in enumerate(view.episodes)])
    s = (view.anchor_times - t0) * 1e-9
    inside = ~expected(buf, view, "joints", (), "linear", None)[2]
    np.testing.assert_allclose(steps["joints"][inside, 1], 2 * s[inside] + 1, rtol=1e-12)
    prev = buf.aligned(anchor="wrist", streams=["joints"])
    # previous: the sample's time (joints[:, 2] counts samples) is never after the anchor time
    all_t = buf.timestamps("joints")
    used = prev[:]["joints"][:, 2].astype(np.int64)
    ok = ~prev[:]["is_pad"]["joints"]
    assert np.all(all_t[used][ok] <= prev.anchor_times[ok])


def test_windows_by_delta_indices_merge_tolerance_flags(buf):
    view = buf.aligned(anchor="wrist", tolerance={"cmd": 0.005})
    data, is_pad = view.sample_windows(64, delta_indices={"cmd": [-2, -1, 0], "joints": [0, 1]},
                                       rng=np.random.default_rng(0))
    assert data["cmd"].shape == (64, 3, 2) and data["joints"].shape == (64, 2, 3)
    assert data["wrist"].shape == (64, H, W, 3) and data["timestamp"].shape == (64,)
    steps = view[:]
    anchors = np.searchsorted(view.anchor_times, data["timestamp"])  # anchor times are unique here
    for k, offset in enumerate([-2, -1, 0]):
        ep = [next(e for e in view.episodes if e.start <= a < e.stop) for a in anchors]
        wanted = anchors + offset
        idx = np.clip(wanted, [e.start for e in ep], [e.stop - 1 for e in ep])
        np.testing.assert_array_equal(data["cmd"][:, k], steps["cmd"][idx])
        np.testing.assert_array_equal(is_pad["cmd"][:, k], (idx != wanted) | steps["is_pad"]["cmd"][idx])
    assert is_pad["cmd"].any()  # a few windows leave the episode or miss the tolerance


def test_windows_by_delta_timestamps(buf):
    view = buf.aligned(anchor="wrist", how={"joints": "linear", "cmd": "nearest"}, tolerance={"cmd": 0.015})
    offsets = {"wrist": [-0.1, 0.0], "joints": np.linspace(-0.05, 0.0, 10), "cmd": np.arange(16) * 0.02}
    rng = np.random.default_rng(3)
    data, is_pad = view.sample_windows(64, delta_timestamps=offsets, rng=rng)
    assert data["wrist"].shape == (64, 2, H, W, 3) and data["joints"].shape == (64, 10, 3)
    assert data["cmd"].shape == (64, 16, 2) and data["ft"]["force"].shape == (64, 2)
    assert {k: v.shape for k, v in is_pad.items()} == {"wrist": (64, 2), "joints": (64, 10), "cmd": (64, 16)}
    anchors = np.searchsorted(view.anchor_times, data["timestamp"])
    episodes = np.searchsorted([e.stop for e in view.episodes], anchors, side="right")
    for name, method, tol in (("wrist", "previous", None), ("joints", "linear", None), ("cmd", "nearest", 15_000_000)):
        secs = np.asarray(offsets[name])
        t = (data["timestamp"][:, None] + np.round(secs * 1e9).astype(np.int64)[None]).reshape(-1)
        want, flags, outside = expected(buf, view, name, (), method, tol, t, np.repeat(episodes, len(secs)))
        shape = (64, len(secs))
        np.testing.assert_allclose(data[name].reshape(len(t), -1).astype(np.float64),
                                   want.reshape(len(t), -1), rtol=1e-6)
        np.testing.assert_array_equal(is_pad[name], flags.reshape(shape))
    assert is_pad["cmd"].any() and not is_pad["cmd"].all()
    # the same windows by number (the torch dataset's way), and together with delta_indices
    request = view.window_request(delta_timestamps={"joints": [0.0]}, delta_indices={"ft": [0, 1]})
    assert view.count_anchors(request) == len(view)
    w, pad = view.windows_at([0, 1], request)
    assert w["joints"].shape == (2, 1, 3) and w["ft"]["count"].shape == (2, 2) and set(pad) == {"joints", "ft"}
    np.testing.assert_array_equal(w["ft"]["count"][:, 0], view[[0, 1]]["ft"]["count"])


class CountingReads:
    """Wraps a stream buffer: records every position asked of ``read_samples``."""

    def __init__(self, buf):
        self.buf, self.asked = buf, {}

    def __getattr__(self, name):
        return getattr(self.buf, name)

    def read_samples(self, name, positions):
        self.asked.setdefault(name, []).append(np.asarray(positions).copy())
        return self.buf.read_samples(name, positions)


def test_only_the_needed_camera_frames_are_read(buf):
    counted = CountingReads(buf)
    view = AlignedView(counted, rate_hz=100.0, streams=["wrist", "joints"])
    data, _ = view.sample_windows(16, delta_timestamps={"wrist": [-0.1, 0.0]}, rng=np.random.default_rng(1))
    asked = counted.asked["wrist"]
    assert len(asked) == 1  # one read for the whole batch
    positions = asked[0]
    assert len(positions) == len(np.unique(positions)) <= 32  # each frame once, at most B * T of them
    assert len(positions) < buf.stream_length("wrist") // 2
    # a low-dim stream is read whole once and kept (aligned_storage.HELD_BYTES); a camera never is
    assert [len(p) for p in counted.asked["joints"]] == [buf.stream_length("joints")]
    counted.asked.clear()
    view.sample(8, rng=np.random.default_rng(2))
    assert len(counted.asked["wrist"][0]) <= 8 and "joints" not in counted.asked
    counted.asked.clear()
    view.window_request(delta_indices={"joints": [0]}, leaves=["joints"])
    view.windows_at([0, 1, 2], view.window_request(delta_indices={"joints": [0]}, leaves=["joints"]))
    assert "wrist" not in counted.asked  # a leaf not asked: its stream is not read


def test_statistics_are_the_native_rate_ones(buf):
    view = buf.aligned(anchor="wrist", streams=["joints", "ft"])
    stats = view.stats()
    assert set(stats) == {"joints", "ft/force", "ft/count"}
    native = buf.stats()
    np.testing.assert_array_equal(stats["joints"].mean, native["joints"]["joints"].mean)
    np.testing.assert_array_equal(stats["ft/force"].max, native["ft"]["force"].max)
    assert stats["ft/force"].name == "ft/force"
    assert int(stats["joints"].count[0]) == buf.stream_length("joints")  # every sample, not the aligned steps
    assert set(view.stats("ft")) == {"ft/force", "ft/count"}
    with pytest.raises(KeyError, match="'timestamp'"):
        view.stats("timestamp")


def test_episode_selection_and_sampling(buf):
    view = buf.aligned(anchor="wrist")
    assert view.select_episodes(lambda e: not e.interrupted) == [0]
    batch, idx = view.sample(32, episodes=[1], return_indices=True, rng=np.random.default_rng(0))
    ep = view.episode(1)
    assert np.all((idx >= ep.start) & (idx < ep.stop))
    np.testing.assert_array_equal(batch["cmd"], view[idx]["cmd"])
    np.testing.assert_array_equal(view.get_episode(-1)["timestamp"], view.anchor_times[ep.start:ep.stop])
    assert view.num_episodes == 2 and len(view.episode(0)) == 20
    plain = view.sample_windows(6, 5, rng=np.random.default_rng(1))  # 5 consecutive anchor steps
    assert plain["joints"].shape == (6, 5, 3) and plain["is_pad"]["cmd"].shape == (6, 5)
    assert np.all(np.diff(plain["timestamp"], axis=1) > 0)
    train, val = view.split_episodes(0.5, seed=0)
    assert sorted(train + val) == [0, 1] and len(val) == 1


def test_pickle_reopens_the_folder(buf, folder):
    view = buf.aligned(anchor="joints", how={"cmd": "linear"}, tolerance={"cmd": 0.01}, streams=["cmd", "ft"])
    copy = pickle.loads(pickle.dumps(view))
    try:
        assert copy.how == view.how and copy.tolerance == view.tolerance and copy.streams == ("cmd", "ft")
        assert copy.cache_path == folder
        np.testing.assert_array_equal(copy[:]["cmd"], view[:]["cmd"])
        np.testing.assert_array_equal(copy[:]["is_pad"]["cmd"], view[:]["is_pad"]["cmd"])
    finally:
        copy.close()
    with pytest.raises(ValueError, match="closed"):
        copy[0]


def test_the_open_episode_is_the_view_open_episode(tmp_path):
    with record(tmp_path / "b", episodes=1) as buf:
        buf.extend("wrist", np.stack([frame_of(0)] * 3), np.array([1, 2, 3]) * 10**9 + 10**12)
        buf.extend("joints", np.zeros((2, 3)), np.array([1, 4]) * 10**9 + 10**12)
        buf.extend("ft", {"force": np.zeros((1, 2), np.float32), "count": np.zeros(1, np.int32)}, np.array([10**12]))
        view = buf.aligned(anchor="wrist", streams=["joints", "ft"])
        assert [(e.id, e.done, len(e)) for e in view.episodes] == [(0, True, 20), (1, False, 3)]
        steps = view.get_episode(-1)  # a writer's view reads what it has not flushed yet
        np.testing.assert_array_equal(steps["joints"], np.zeros((3, 3)))
        # ft's one sample is before every anchor: without a tolerance, outside its samples -> flagged
        np.testing.assert_array_equal(steps["is_pad"]["ft"], [True, True, True])
        on_change = buf.aligned(anchor="wrist", streams=["ft"], tolerance={"ft": float("inf")})
        np.testing.assert_array_equal(on_change.get_episode(-1)["is_pad"]["ft"], [False, False, False])
        np.testing.assert_array_equal(steps["is_pad"]["joints"], [False, False, False])


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(), TypeError, "exactly one of anchor"),
    (dict(anchor="wrist", rate_hz=30.0), TypeError, "exactly one of anchor"),
    (dict(anchor="gripper"), ValueError, "anchor: 'gripper' is not a stream.*'wrist', 'joints'"),
    (dict(rate_hz=30.0, streams=["joints", "lidar"]), ValueError, "streams: 'lidar' is not a stream"),
    (dict(rate_hz=0.0), ValueError, "rate_hz must be a positive"),
    (dict(rate_hz=30.0, how={"wrist": "linear"}), ValueError, "leaf 'wrist' is uint8"),
    (dict(rate_hz=30.0, how={"ft": "linear"}), ValueError, "leaf 'ft/count' is int32"),
    (dict(rate_hz=30.0, how={"joints": "cubic"}), ValueError, r"how\['joints'\] must be one of"),
    (dict(rate_hz=30.0, tolerance={"joints": -0.01}), ValueError, r"tolerance\['joints'\] must be a number of seconds >= 0"),
    (dict(rate_hz=30.0, tolerance={"cmd": 0.1}, streams=["joints"]), ValueError, "'cmd' is not included"),
    (dict(rate_hz=30.0, how={"imu": "nearest"}), ValueError, "how: 'imu' is not a stream"),
])
def test_bad_arguments_raise_clear_errors(buf, kwargs, error, match):
    with pytest.raises(error, match=match):
        buf.aligned(**kwargs)


def test_bad_window_arguments(buf):
    view = buf.aligned(anchor="wrist")
    with pytest.raises(ValueError, match="'ft/force' is not a stream of this view"):
        view.sample_windows(4, delta_timestamps={"ft/force": [0.0]})
    with pytest.raises(ValueError, match="both delta_indices and delta_timestamps"):
        view.sample_windows(4, delta_timestamps={"cmd": [0.0]}, delta_indices={"cmd": [0]})
    with pytest.raises(ValueError, match=r"delta_timestamps\['cmd'\] must be a non-empty"):
        view.sample_windows(4, delta_timestamps={"cmd": [np.nan]})
    with pytest.raises(TypeError, match="not with window"):
        view.sample_windows(4, 3, delta_timestamps={"cmd": [0.0]})
    with pytest.raises(Exception, match="read-only"):
        view.storage.set(0, view[0])
    # a stream buffer folder is not a replay buffer
    with pytest.raises(Exception, match="StreamBuffer.load_from"):
        ReplayBuffer.load_from(buf.cache_path)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_with_two_workers(buf, context):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset

    view = buf.aligned(anchor="wrist", how={"joints": "linear"}, tolerance={"cmd": 0.005})
    steps = view[:]
    ds = ReplayBufferDataset(view, delta_indices={"cmd": [-1, 0]})
    assert len(ds) == len(view)
    loader = DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context=context)
    got = list(loader)
    joints = torch.cat([b["joints"] for b in got]).numpy()
    np.testing.assert_array_equal(joints, steps["joints"])
    cmd = torch.cat([b["cmd"] for b in got]).numpy()
    np.testing.assert_array_equal(cmd[:, 1], steps["cmd"])
    pad = torch.cat([b["is_pad"]["cmd"] for b in got]).numpy()
    assert pad.shape == (len(view), 2)
    np.testing.assert_array_equal(pad[:, 1], steps["is_pad"]["cmd"])  # the window's flags extend the step's
    np.testing.assert_array_equal(torch.cat([b["is_pad"]["wrist"] for b in got]).numpy(), steps["is_pad"]["wrist"])
    starts = [e.start for e in view.episodes]
    assert pad[starts, 0].all()  # before the episode's first step


def test_dataset_of_time_windows(buf):
    pytest.importorskip("torch")
    from trajstore.training.torch import ReplayBufferDataset

    view = buf.aligned(rate_hz=20.0)
    ds = ReplayBufferDataset(view, delta_timestamps={"joints": [-0.02, 0.0], "wrist": [0.0]})
    assert len(ds) == len(view)
    item = ds[4]
    assert tuple(item["joints"].shape) == (2, 3) and tuple(item["wrist"].shape) == (1, H, W, 3)
    assert tuple(item["is_pad"]["joints"].shape) == (2,)
    data, is_pad = view.windows_at([4], view.window_request(delta_timestamps={"joints": [-0.02, 0.0]}))
    np.testing.assert_array_equal(item["joints"].numpy(), data["joints"][0])
    np.testing.assert_array_equal(item["is_pad"]["joints"].numpy(), is_pad["joints"][0])


def test_empty_and_non_overlapping_episodes(tmp_path):
    spaces = {"a": BoxSpace(-1, 1, (2,), np.float32), "b": BoxSpace(-1, 1, (), np.float32)}
    with StreamBuffer.create(tmp_path / "b", streams=spaces) as buf:
        view = buf.aligned(rate_hz=10.0)
        assert len(view) == 0 and view.episodes == [] and view[:]["a"].shape == (0, 2)
        with pytest.raises(ValueError, match="empty"):
            view.sample(2)
        buf.extend("a", np.zeros((3, 2), np.float32), np.array([0, 1, 2]) * 10**8)
        buf.extend("b", np.array([0.5, 1.0], np.float32), np.array([5, 6]) * 10**8)
        assert len(buf.aligned(rate_hz=10.0)) == 0  # no time both streams cover
        view = buf.aligned(anchor="a", how={"b": "linear"}, tolerance={"b": 0.45})
        steps = view[:]
        # before b's first sample: linear takes the edge sample, flagged only by distance (> 0.45 s)
        np.testing.assert_array_equal(steps["b"], [0.5, 0.5, 0.5])
        np.testing.assert_array_equal(steps["is_pad"]["b"], [True, False, False])  # 0.5, 0.4, 0.3 s away
        prev = buf.aligned(anchor="a", streams=["b"])[:]
        np.testing.assert_array_equal(prev["is_pad"]["b"], [True, True, True])  # nothing at or before


def test_time_window_requests_are_checked_once_and_reused(buf):
    view = buf.aligned(anchor="wrist")
    a = view.window_request(delta_timestamps={"cmd": np.arange(4) * 0.02}, delta_indices={"ft": [0, 1]})
    b = view.window_request(delta_timestamps={"cmd": [0.0, 0.02, 0.04, 0.06]}, delta_indices={"ft": [0, 1]})
    assert a is b
    c = view.window_request(delta_timestamps={"cmd": [0.0, 0.02, 0.04, 0.06]}, delta_indices={"ft": [0, 1]},
                            pad=False)
    assert c is not a and c.base.pad is False
    assert view.window_request(delta_timestamps={"cmd": [0.0]}).offsets["cmd"].tolist() == [0]


@pytest.mark.parametrize("spread", [5, 10**6])
def test_unique_positions_by_marks_or_sorting(spread):
    from trajstore.streams.aligned_storage import _unique

    values = np.random.default_rng(spread).integers(100, 100 + spread, 300)
    got, inverse = _unique(values)
    want, want_inverse = np.unique(values, return_inverse=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(inverse, want_inverse)
    np.testing.assert_array_equal(got[inverse], values)


def test_episodes_left_out_are_named_in_a_warning(tmp_path):
    from trajstore.errors import AlignmentWarning

    spaces = {"a": BoxSpace(-1, 1, (), np.float32), "b": BoxSpace(-1, 1, (), np.float32)}
    with StreamBuffer.create(tmp_path / "b", streams=spaces) as buf:
        for e in range(3):
            buf.extend("a", np.zeros(3, np.float32), (np.arange(3) + 10 * e) * 10**8)
            if e != 1:
                buf.extend("b", np.zeros(2, np.float32), (np.arange(2) + 10 * e) * 10**8)
            buf.end_episode()
        with pytest.warns(AlignmentWarning, match=r"leaves out 1 episode\(s\): 1 \(no sample of 'b'\)"):
            view = buf.aligned(anchor="a")
        assert [e.id for e in view.episodes] == [0, 2]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert [e.id for e in buf.aligned(anchor="a", streams=["a"]).episodes] == [0, 1, 2]
