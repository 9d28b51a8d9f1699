"""The rosbag2_mcap fixture imported: every value, count and timestamp (header stamps and log times),
the dropped frame, the topic map and the stream metadata, as its README and expected.json give them."""

import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")
from PIL import Image  # noqa: E402

from trajstore.interop.rosbag import import_rosbag, read_bag  # noqa: E402
from trajstore.streams import StreamBuffer  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rosbag2_mcap"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
BAGS = [FIXTURE / "episode_0", FIXTURE / "episode_1"]
NAMES = {"/camera/image_raw": "camera.image_raw", "/camera/compressed": "camera.compressed",
         "/joint_states": "joint_states", "/imu": "imu", "/cmd": "cmd"}
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


def frame(k):
    """Raw frame k of the fixture (README: pixel (r, c) = [k % 256, 4r, 4c])."""
    img = np.empty((48, 64, 3), np.uint8)
    img[..., 0] = k % 256
    img[..., 1] = (4 * np.arange(48))[:, None]
    img[..., 2] = (4 * np.arange(64))[None, :]
    return img


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("rosbag") / "buf"
    summary = import_rosbag(BAGS, out)
    with StreamBuffer.load_from(out) as buf:
        yield summary, buf


@pytest.fixture(scope="module")
def by_log(tmp_path_factory):
    out = tmp_path_factory.mktemp("rosbag") / "buf"
    import_rosbag(BAGS, out, stamp="log", topics={"/camera/image_raw": "wrist"})
    with StreamBuffer.load_from(out) as buf:
        yield buf


def test_summary_streams_and_episodes(imported):
    summary, buf = imported
    assert summary.episodes == 2 and summary.streams == NAMES and summary.lost == {}
    assert list(buf.streams) == list(NAMES.values())
    assert buf.num_episodes == 2
    for b, name in enumerate(["episode_0", "episode_1"]):
        exp = EXPECTED[name]
        ep = buf.episode(b)
        assert ep.done and not ep.interrupted
        assert ep.data["bag"] == name and ep.data["path"] == str(BAGS[b].resolve())
        assert ep.data["topics"] == {t: v["msgtype"] for t, v in exp["topics"].items()}
        assert ep.data["start_ns"] == min(v["first_log_time_ns"] for v in exp["topics"].values())
        assert ep.data["stamp"] == "header"
        for topic, v in exp["topics"].items():
            span = ep.streams[NAMES[topic]]
            assert span.count == v["count"]
            first = v["first_header_stamp_ns"] if v["first_header_stamp_ns"] is not None else v["first_log_time_ns"]
            last = v["last_header_stamp_ns"] if v["last_header_stamp_ns"] is not None else v["last_log_time_ns"]
            assert (span.first_ns, span.last_ns) == (first, last)
    assert sum(summary.samples.values()) == sum(EXPECTED[n]["message_count"] for n in EXPECTED)


def test_stream_metadata(imported):
    _, buf = imported
    s = buf.streams
    for topic, v in EXPECTED["episode_0"]["topics"].items():
        meta = s[NAMES[topic]].metadata
        assert meta["topic"] == topic and meta["ros_type"] == v["msgtype"]
        assert meta["fps"] == v["nominal_hz"]
    for cam in ("camera.image_raw", "camera.compressed"):
        assert s[cam].shape == (48, 64, 3) and s[cam].dtype == np.uint8
        assert (s[cam].metadata["kind"], s[cam].metadata["layout"]) == ("image", "HWC")
    assert s["camera.compressed"].metadata["encoding"] == "rgb8; jpeg compressed bgr8"
    joints = s["joint_states"]
    assert list(joints.spaces) == ["position", "velocity"]  # effort is empty in the bag
    assert list(joints.metadata["names"]) == JOINTS
    assert list(joints.spaces["position"].metadata["names"]) == JOINTS
    imu = s["imu"].spaces
    assert imu["angular_velocity"].metadata["units"] == "rad/s"
    assert imu["linear_acceleration"].metadata["units"] == "m/s^2"
    assert s["cmd"].shape == (7,) and list(s["cmd"].metadata["dims"]) == ["action"]


def _k_of(t_ns, t0, period, offset):
    """Sample index k of each timestamp (stamp = t0 + offset + round(k * period) + jitter, |jitter| <= P/10)."""
    return np.round((np.asarray(t_ns) - t0 - offset) / period).astype(int)


@pytest.mark.parametrize("b", [0, 1])
def test_camera_frames_and_dropped_frame(imported, b):
    _, buf = imported
    exp = EXPECTED[f"episode_{b}"]
    t, frames = buf.read("camera.image_raw", episode=b)
    dropped = exp["topics"]["/camera/image_raw"]["dropped_frame_index"]
    ks = [k for k in range(60) if k != dropped]
    np.testing.assert_array_equal(_k_of(t, exp["t0_ns"], 1e9 / 30, 5_000_000), ks)
    for i, k in enumerate(ks):
        np.testing.assert_array_equal(frames[i], frame(k))
    gaps = np.diff(t)
    assert int(np.argmax(gaps)) == dropped - 1  # the one gap of two periods is where the frame was dropped
    assert 1.7 * 1e9 / 30 < gaps.max() < 2.3 * 1e9 / 30
    assert np.all(np.delete(gaps, dropped - 1) < 1.3 * 1e9 / 30)


@pytest.mark.parametrize("b", [0, 1])
def test_compressed_frames_within_jpeg_tolerance(imported, b):
    _, buf = imported
    t_raw, _ = buf.read("camera.image_raw", episode=b)
    t, frames = buf.read("camera.compressed", episode=b)
    exp = EXPECTED[f"episode_{b}"]
    dropped = exp["topics"]["/camera/image_raw"]["dropped_frame_index"]
    ks = _k_of(t, exp["t0_ns"], 1e9 / 30, 5_000_000)
    np.testing.assert_array_equal(ks, 2 * np.arange(30))  # frame j is raw frame 2j, same header stamp
    for j in range(30):
        if 2 * j != dropped:
            assert t[j] in set(t_raw.tolist())
        err = np.abs(frames[j].astype(int) - frame(2 * j).astype(int)).max()
        assert err <= 8, (j, err)


def test_compressed_frames_are_the_decoded_jpeg_exactly(imported):
    """Stored as PNG (the default): what the bag's JPEG decodes to, pixel for pixel."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    _, buf = imported
    _, frames = buf.read("camera.compressed", episode=0)
    with Reader(BAGS[0]) as reader:
        conns = [c for c in reader.connections if c.topic == "/camera/compressed"]
        for j, (conn, _, raw) in enumerate(reader.messages(connections=conns)):
            msg = ts.deserialize_cdr(raw, conn.msgtype)
            decoded = np.asarray(Image.open(io.BytesIO(msg.data.tobytes())).convert("RGB"))
            np.testing.assert_array_equal(frames[j], decoded)


@pytest.mark.parametrize("b", [0, 1])
def test_joint_imu_cmd_values_header_stamps(imported, b):
    _, buf = imported
    exp = EXPECTED[f"episode_{b}"]
    t0 = exp["t0_ns"]
    t, joints = buf.read("joint_states", episode=b)
    s = (t - t0) / 1e9
    n = len(t)
    k = np.arange(n)
    want = np.column_stack([s, k, np.full(n, b), *[np.full(n, x) for x in (0.75, 1.0, 1.25, 1.5)]])
    np.testing.assert_array_equal(joints["position"], want)
    np.testing.assert_array_equal(joints["velocity"], np.tile([1, 0, 0, 0, 0, 0, 0], (n, 1)))

    t, imu = buf.read("imu", episode=b)
    s = (t - t0) / 1e9
    n = len(t)
    np.testing.assert_array_equal(imu["angular_velocity"], np.column_stack([s, np.arange(n), np.full(n, b)]))
    np.testing.assert_array_equal(imu["orientation"], np.tile([0, 0, 0, 1.0], (n, 1)))
    np.testing.assert_array_equal(imu["linear_acceleration"], np.tile([0, 0, 9.81], (n, 1)))
    for c in ("orientation_covariance", "angular_velocity_covariance", "linear_acceleration_covariance"):
        np.testing.assert_array_equal(imu[c], np.zeros((n, 3, 3)))

    t, cmd = buf.read("cmd", episode=b)  # no header: log time
    s_log = (t - t0) / 1e9
    n = len(t)
    k = np.arange(n)
    want = np.column_stack([s_log, k, np.full(n, b), np.zeros(n), np.zeros(n), np.zeros(n),
                            (k < 50).astype(float)])
    np.testing.assert_array_equal(cmd, want)
    assert n == exp["topics"]["/cmd"]["count"]


@pytest.mark.parametrize("b", [0, 1])
def test_log_times_and_topic_map(by_log, b):
    exp = EXPECTED[f"episode_{b}"]
    assert list(by_log.streams) == ["wrist", "camera.compressed", "joint_states", "imu", "cmd"]
    ep = by_log.episode(b)
    assert ep.data["stamp"] == "log" and ep.data["streams"]["/camera/image_raw"] == "wrist"
    for topic, v in exp["topics"].items():
        name = "wrist" if topic == "/camera/image_raw" else NAMES[topic]
        t, _ = by_log.read(name, episode=b)
        assert len(t) == v["count"]
        assert (t[0], t[-1]) == (v["first_log_time_ns"], v["last_log_time_ns"])
        assert np.all(np.diff(t) > 0)
    # log time = header stamp + latency in [0.2, 3] ms: the same messages, later
    t_log, joints = by_log.read("joint_states", episode=b)
    s_header = joints["position"][:, 0]
    latency = (t_log - exp["t0_ns"]) / 1e9 - s_header
    assert np.all((latency >= 0.2e-3 - 1e-9) & (latency <= 3e-3 + 1e-9))
    t, frames = by_log.read("wrist", episode=b)
    assert frames[0, 0, 0, 0] == 0 and frames.shape == (59, 48, 64, 3)


def test_read_bag_matches_the_import(imported):
    _, buf = imported
    data = read_bag(BAGS[1], topics=["/imu", "/cmd"], only=True)
    assert list(data) == ["imu", "cmd"]
    t, imu = buf.read("imu", episode=1)
    np.testing.assert_array_equal(data["imu"].t_ns, t)
    np.testing.assert_array_equal(data["imu"].values["angular_velocity"], imu["angular_velocity"])
    assert data["cmd"].space.metadata["fps"] == 50.0
