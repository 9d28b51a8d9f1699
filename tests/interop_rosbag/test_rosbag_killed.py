"""An import killed with SIGKILL leaves only its hidden staging folder ``.OUT.<pid>.partial`` (and its owner
file) beside OUT, never OUT; the next import into the same OUT removes them and imports whole."""

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from trajstore.interop.rosbag import import_rosbag  # noqa: E402
from trajstore.streams import StreamBuffer  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rosbag2_mcap"
BAGS = [FIXTURE / "episode_0", FIXTURE / "episode_1"]

KILLED = """
import os, signal, sys
from trajstore.interop.rosbag import import_
real = import_._import_bag
def first_bag_then_kill(buf, *args):
    real(buf, *args)  # the first bag's episode is written into the staging folder
    os.kill(os.getpid(), signal.SIGKILL)
import_._import_bag = first_bag_then_kill
import_.import_rosbag(sys.argv[2:], sys.argv[1])
"""


def test_import_killed_mid_way_is_cleaned_up_by_the_next(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(out), *map(str, BAGS)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert not out.exists()
    assert left == [f".out.{proc.pid}.partial", f".out.{proc.pid}.partial.owner"]
    staged = tmp_path / left[0]
    assert any(staged.rglob("*")) and staged.is_dir()  # the killed run had written its first episode

    summary = import_rosbag(BAGS, out)  # a new process id: the dead run's staging is taken as left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert summary.episodes == 2 and summary.lost == {}
    with StreamBuffer.load_from(out) as buf:
        assert [buf.episode(i).data["bag"] for i in range(2)] == ["episode_0", "episode_1"]
        assert buf.episode(1).done and not buf.episode(1).interrupted
        _, joints = buf.read("joint_states", episode=1)
        assert len(joints["position"]) == 200
        np.testing.assert_array_equal(joints["position"][:, 2], np.ones(200))  # bag 1's joint 3 is its index

