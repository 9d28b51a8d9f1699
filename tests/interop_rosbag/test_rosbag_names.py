"""Stream names of topics: topics that would share a stream are refused, naming them and how to name them
apart (``topics=`` in Python, ``--topic TOPIC=NAME`` on the command line); a topic whose default name is not
a folder name ("/..") gets one that is."""

import numpy as np
import pytest

pytest.importorskip("rosbags")
from typer.testing import CliRunner  # noqa: E402

from trajstore.cli.main import app  # noqa: E402
from trajstore.interop.rosbag import import_rosbag, read_bag  # noqa: E402

from .bags import T, T0, write_bag  # noqa: E402

FA = "std_msgs/msg/Float64MultiArray"


def array(values):
    return T[FA](layout=T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0),
                 data=np.asarray(values, dtype=np.float64))


@pytest.fixture
def clash_bag(tmp_path):
    """/a/b and /a.b both default to the stream "a.b"; /a_b to "a_b"."""
    topics = ["/a/b", "/a.b", "/a_b"]
    return write_bag(tmp_path / "clash", [(t, FA, T0 + k * 10_000_000 + i, array([k, i]))
                                          for k in range(3) for i, t in enumerate(topics)])


def test_clashing_topics_are_listed_with_both_ways_to_rename(clash_bag, tmp_path):
    with pytest.raises(ValueError) as info:
        import_rosbag(clash_bag, tmp_path / "out")
    text = str(info.value)
    assert "topics /a/b, /a.b would all be the stream 'a.b'" in text
    assert "topics={'/a.b': 'NAME'}" in text and "--topic /a.b=NAME" in text
    assert "/a_b" not in text  # no clash
    assert not (tmp_path / "out").exists()
    # a name given to one topic that another topic's default name has
    with pytest.raises(ValueError, match=r"topics /a/b, /a_b would all be the stream 'a_b'.*--topic /a_b=NAME"):
        import_rosbag(clash_bag, tmp_path / "out", topics={"/a/b": "a_b"})
    # named apart as the message says: imported, each topic's own values
    d = read_bag(clash_bag, topics={"/a.b": "dotted"})
    assert sorted(d) == ["a.b", "a_b", "dotted"]
    np.testing.assert_array_equal(d["dotted"].values[:, 1], [1, 1, 1])
    np.testing.assert_array_equal(d["a.b"].values[:, 1], [0, 0, 0])
    np.testing.assert_array_equal(d["a_b"].values[:, 0], [0, 1, 2])


def test_cli_clash_error_names_the_option(clash_bag, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["import", "rosbag", "--no-progress", str(clash_bag), str(tmp_path / "out")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "topics /a/b, /a.b would all be the stream 'a.b'" in result.output
    assert "--topic /a.b=NAME" in result.output
    result = runner.invoke(app, ["import", "rosbag", "--no-progress", str(clash_bag), str(tmp_path / "out"),
                                 "--topic", "/a.b=dotted"])
    assert result.exit_code == 0, result.output
    assert "imported 1 bag (3 streams, 9 samples)" in result.output


def test_stream_names_of_odd_topics(tmp_path):
    bag = write_bag(tmp_path / "odd", [(t, FA, T0 + k * 10_000_000 + i, array([k, i]))
                                       for k in range(2) for i, t in enumerate(["/timestamp", "/is_pad", "/.."])])
    d = read_bag(bag)
    assert sorted(d) == ["__", "is_pad_", "timestamp_"]
    np.testing.assert_array_equal(d["__"].values[:, 1], [2, 2])
    with pytest.raises(ValueError, match=r"topic /\.\.: stream name 'is_pad' is reserved.*--topic /\.\.=NAME"):
        read_bag(bag, topics={"/..": "is_pad"})
