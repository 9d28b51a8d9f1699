"""A topic recorded with two message types is refused before anything is read or written; storage files of a
bag folder that its metadata.yaml does not list are named in a warning (not imported)."""

import shutil
import warnings

import numpy as np
import pytest

pytest.importorskip("rosbags")
from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402

from trajstore.errors import FormatError  # noqa: E402
from trajstore.interop.rosbag import RosbagWarning, import_rosbag, read_bag  # noqa: E402
from trajstore.interop.rosbag._source import open_bag  # noqa: E402
from trajstore.streams import StreamBuffer  # noqa: E402

from .bags import TS, T, T0, header, write_bag  # noqa: E402

FA = "std_msgs/msg/Float64MultiArray"
JS = "sensor_msgs/msg/JointState"
TYPES = r"topic '/x' has 2 message types \(sensor_msgs/msg/JointState, std_msgs/msg/Float64MultiArray\)"


def fa(x, n=3):
    return T[FA](layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0), data=np.full(n, x, np.float64))


def js(ns, k):
    return T[JS](header=header(ns), name=["a"], position=np.full(1, float(k)), velocity=np.zeros(0),
                 effort=np.zeros(0))


def mixed_bag(path, storage):
    """/x with a Float64MultiArray and a JointState connection, /y a Float64MultiArray."""
    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        x_fa = writer.add_connection("/x", FA, typestore=TS)
        x_js = writer.add_connection("/x", JS, typestore=TS)
        y = writer.add_connection("/y", FA, typestore=TS)
        for k in range(4):
            t = T0 + k * 10**7
            writer.write(x_fa, t, TS.serialize_cdr(fa(k), FA))
            writer.write(x_js, t + 5, TS.serialize_cdr(js(t + 5, k), JS))
            writer.write(y, t + 7, TS.serialize_cdr(fa(10 + k, 2), FA))
    return path


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_topic_with_two_types_refused_up_front(tmp_path, storage):
    bag = mixed_bag(tmp_path / "bag", storage)
    with pytest.raises(FormatError, match=f"bag: {TYPES}.*Leave the topic out.*--exclude-msgtype"):
        import_rosbag(bag, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    with pytest.raises(FormatError, match=TYPES):
        read_bag(bag)
    # leaving /x out imports the rest
    summary = import_rosbag(bag, tmp_path / "out", topics=["/y"], only=True)
    assert summary.samples == {"y": 4}
    with StreamBuffer.load_from(tmp_path / "out") as buf:
        t, d = buf.read("y", episode=0)
    np.testing.assert_array_equal(t, T0 + np.arange(4) * 10**7 + 7)
    np.testing.assert_array_equal(d, 10 + np.arange(4)[:, None] * np.ones(2))


def test_topic_with_two_types_in_a_cut_short_mcap(tmp_path):
    bag = mixed_bag(tmp_path / "bag", "mcap")
    (bag / "metadata.yaml").unlink()
    data = (bag / "bag.mcap").read_bytes()
    (bag / "bag.mcap").write_bytes(data[:-40])  # cut in the summary section: read record by record
    src = open_bag(bag)
    assert src.problem is not None and src.mixed == {"/x": [JS, FA]}  # read past rosbags
    src.close()
    with pytest.raises(FormatError, match=TYPES):
        import_rosbag(bag, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unlisted_storage_files_warned(tmp_path):
    first = write_bag(tmp_path / "first", [("/y", FA, T0 + k * 10**7, fa(k, 2)) for k in range(3)], "mcap")
    second = write_bag(tmp_path / "second", [("/y", FA, T0 + k * 10**7, fa(k, 2)) for k in range(5)], "mcap")
    shutil.copy(second / "second.mcap", first / "other.mcap")
    (first / "extra.db3").write_bytes(b"")
    with pytest.warns(RosbagWarning, match=r"first: extra.db3, other.mcap are in the bag folder but not listed in "
                                           r"its metadata.yaml, and not imported \(to import one, pass the file "
                                           r"itself: .*first/extra.db3\)"):
        summary = import_rosbag(first, tmp_path / "out")
    assert summary.samples == {"y": 3}  # only the listed file
    (first / "extra.db3").unlink()
    with pytest.warns(RosbagWarning, match=r"first: other.mcap is in the bag folder"):
        import_rosbag(first, tmp_path / "out2")
    assert import_rosbag(first / "other.mcap", tmp_path / "out3").samples == {"y": 5}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RosbagWarning)
        assert import_rosbag(second, tmp_path / "out4").samples == {"y": 5}
