"""Bags cut short by a crash import their readable prefix, with a warning naming what was lost: an MCAP
file cut in its (uncompressed or zstd) chunk, a bare .mcap file, a folder without metadata.yaml, a sqlite3
database missing rows its metadata.yaml counts."""

import json
import shutil
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from trajstore.errors import FormatError  # noqa: E402
from trajstore.interop.rosbag import RosbagWarning, import_rosbag, read_bag  # noqa: E402
from trajstore.streams import StreamBuffer  # noqa: E402

from .bags import T, T0, header, write_bag  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rosbag2_mcap"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())


def cut_copy(tmp_path, b, keep_bytes):
    """A copy of fixture bag b whose .mcap keeps only its first ``keep_bytes`` bytes."""
    bag = Path(shutil.copytree(FIXTURE / f"episode_{b}", tmp_path / f"cut_{b}"))
    for p in bag.iterdir():
        p.chmod(0o644)
    mcap = bag / f"episode_{b}.mcap"
    mcap.write_bytes(mcap.read_bytes()[:keep_bytes])
    return bag


def rosbag_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, RosbagWarning)]


@pytest.mark.parametrize("b", [0, 1])
def test_cut_mcap_imports_its_prefix_with_a_warning(tmp_path, b):
    size = (FIXTURE / f"episode_{b}" / f"episode_{b}.mcap").stat().st_size
    bag = cut_copy(tmp_path, b, size // 3)
    exp = EXPECTED[f"episode_{b}"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = import_rosbag([bag, FIXTURE / "episode_1"], tmp_path / "out")
    msgs = rosbag_warnings(caught)
    assert len(msgs) == 1 and "only a readable prefix" in msgs[0] and "cut short" in msgs[0]
    lost = summary.lost[str(bag)]
    with StreamBuffer.load_from(tmp_path / "out") as buf:
        ep = buf.episode(0)
        assert ep.interrupted and not ep.done and ep.data["lost"] == lost
        assert buf.episode(1).done and buf.episode(1).data["bag"] == "episode_1"
        for topic, v in exp["topics"].items():
            name = topic.strip("/").replace("/", ".")
            read = ep.streams[name].count
            assert 0 < read < v["count"]  # a third of the file: some of every topic, not all
            assert lost[topic] == v["count"] - read
            assert f"{topic}: {v['count'] - read} messages (read {read})" in msgs[0]
        t, joints = buf.read("joint_states", episode=0)  # the prefix holds the right values
        n = len(t)
        np.testing.assert_array_equal(joints["position"][:, :3],
                                      np.column_stack([(t - exp["t0_ns"]) / 1e9, np.arange(n), np.full(n, b)]))
        assert t[0] == exp["topics"]["/joint_states"]["first_header_stamp_ns"]
        _, frames = buf.read("camera.image_raw", episode=0)
        ks = [k for k in range(60) if k != exp["topics"]["/camera/image_raw"]["dropped_frame_index"]]
        for i in range(len(frames)):
            assert frames[i, 0, 0, 0] == ks[i]


@pytest.mark.parametrize("b", [0, 1])
def test_cut_after_the_last_message_imports_whole(tmp_path, b):
    """Cut in its summary section (10 bytes before its end: in the footer): every message is imported, the
    episode is not interrupted, a warning says the file was cut."""
    size = (FIXTURE / f"episode_{b}" / f"episode_{b}.mcap").stat().st_size
    bag = cut_copy(tmp_path, b, size - 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = import_rosbag(bag, tmp_path / "out")
    assert rosbag_warnings(caught) == [f"{bag}: episode_{b}.mcap is cut short in the MCAP summary section, after "
                                       "the last message; every message was read and imported"]
    assert summary.lost == {} and "partly" not in summary.line()
    with StreamBuffer.load_from(tmp_path / "out") as buf:
        ep = buf.episode(0)
        assert ep.done and not ep.interrupted and "lost" not in ep.data
        for topic, v in EXPECTED[f"episode_{b}"]["topics"].items():
            assert ep.streams[topic.strip("/").replace("/", ".")].count == v["count"]


def test_cut_bare_mcap_file_counts_are_unknown(tmp_path):
    mcap = tmp_path / "rec.mcap"
    mcap.write_bytes((FIXTURE / "episode_0" / "episode_0.mcap").read_bytes()[:300_000])
    with pytest.warns(RosbagWarning, match=r"rec.mcap: only a readable prefix.*/imu: an unknown number of messages "
                                           r"\(read \d+\)"):
        d = read_bag(mcap)
    assert 0 < len(d["imu"].t_ns) < 400


def test_cut_before_any_message(tmp_path):
    bag = cut_copy(tmp_path, 0, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="none of the chosen topics has a message"):
            import_rosbag(bag, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_folder_without_metadata_yaml(tmp_path):
    bag = Path(shutil.copytree(FIXTURE / "episode_1", tmp_path / "unfinished"))
    (bag / "metadata.yaml").chmod(0o644)
    (bag / "metadata.yaml").unlink()
    with pytest.warns(RosbagWarning, match="no metadata.yaml"):
        d = read_bag(bag)
    assert {k: len(v.t_ns) for k, v in d.items()} == {
        k.strip("/").replace("/", "."): v["count"] for k, v in EXPECTED["episode_1"]["topics"].items()}


def joint_bag(path, n, storage="sqlite3"):
    msgs = []
    for k in range(n):
        ns = T0 + k * 10_000_000
        msgs.append(("/joints", "sensor_msgs/msg/JointState", ns + 1, T["sensor_msgs/msg/JointState"](
            header=header(ns), name=["a", "b"], position=np.array([k, -k], float), velocity=np.zeros(0),
            effort=np.zeros(0))))
        if k % 2 == 0:
            msgs.append(("/gripper", "std_msgs/msg/Float64", ns + 2, T["std_msgs/msg/Float64"](data=k / 2)))
    return write_bag(path, msgs, storage)


def test_sqlite_db_missing_rows(tmp_path):
    bag = joint_bag(tmp_path / "crashed", 40)
    with sqlite3.connect(bag / "crashed.db3") as db:  # the last 15 joint rows never reached the disk
        (tid,) = db.execute("SELECT id FROM topics WHERE name = '/joints'").fetchone()
        db.execute("DELETE FROM messages WHERE topic_id = ? AND timestamp >= ?", (tid, T0 + 25 * 10_000_000))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = import_rosbag(bag, tmp_path / "out")
    msgs = rosbag_warnings(caught)
    assert len(msgs) == 1 and "/joints: 15 messages (read 25)" in msgs[0] and "/gripper" not in msgs[0]
    assert summary.lost == {str(bag): {"/joints": 15}}
    with StreamBuffer.load_from(tmp_path / "out") as buf:
        ep = buf.episode(0)
        assert ep.interrupted and ep.data["lost"] == {"/joints": 15}
        t, j = buf.read("joints", episode=0)
        np.testing.assert_array_equal(j["position"][:, 0], np.arange(25.0))
        assert ep.streams["gripper"].count == 20


def test_sqlite_db_cut_short_is_refused(tmp_path):
    """sqlite cannot open a database file cut short ("database disk image is malformed"): refused, naming
    the bag, and nothing is made."""
    bag = joint_bag(tmp_path / "torn", 400)
    db = bag / "torn.db3"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(FormatError, match=f"{bag}: not a readable ROS 2 bag: .*malformed"):
        import_rosbag(bag, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))
