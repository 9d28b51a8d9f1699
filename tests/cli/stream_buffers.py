"""A small stream buffer with known rates, made by the tests of tests/cli/test_streams*.py.

Two episodes of one second each (the second starts at 10 s):

* ``wrist``: camera (24, 32, 3) uint8, PNG, 30 Hz (``round(i * 1e9 / 30)`` ns); episode 1 drops frame 12
  (one gap of 66.7 ms after its frame 11, at 0.367 s): 30 + 29 samples;
* ``joints``: (7,) float32 at 500 Hz (2 ms): 500 + 500 samples, value ``arange(7) + i / 8`` (``i`` the
  sample's index in its episode, plus 1000 in episode 1);
* ``gripper``: () float64 at 50 Hz (20 ms), ``value = t`` in seconds from the episode start; episode 1 has
  one duplicate time (its samples 24 and 25 both at 0.48 s): 50 + 51 samples.
"""

from __future__ import annotations

import numpy as np

from trajstore.spaces import BoxSpace
from trajstore.streams import StreamBuffer

H, W = 24, 32
T1 = 10_000_000_000  # ns: start of episode 1
WRIST_NS = np.array([round(i * 1e9 / 30) for i in range(30)], np.int64)
JOINTS_NS = np.arange(500, dtype=np.int64) * 2_000_000
GRIPPER_NS = np.arange(50, dtype=np.int64) * 20_000_000
GRIPPER1_NS = np.insert(GRIPPER_NS, 25, GRIPPER_NS[24])  # a duplicate time


def spaces():
    return {"wrist": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 30}),
            "joints": BoxSpace(-1e6, 1e6, (7,), np.float32),
            "gripper": BoxSpace(-1e6, 1e6, (), np.float64)}


def frames(idx):
    """Flat frames whose value names the frame (PNG keeps them exactly)."""
    idx = np.asarray(idx)
    return np.broadcast_to(((idx * 7) % 256).astype(np.uint8)[:, None, None, None], (len(idx), H, W, 3)).copy()


def joint_values(idx):
    return (np.arange(7, dtype=np.float32)[None] + np.asarray(idx, np.float32)[:, None] / np.float32(8))


def make_stream_buffer(path):
    """The buffer described in the module docstring, closed, at ``path``."""
    with StreamBuffer.create(path, streams=spaces(), kind_kwargs={"image": {"format": "PNG"}}) as buf:
        for e, t0 in enumerate((0, T1)):
            cam = np.arange(30) if e == 0 else np.delete(np.arange(30), 12)
            buf.extend("wrist", frames(cam + 100 * e), t0 + WRIST_NS[cam])
            buf.extend("joints", joint_values(np.arange(500) + 1000 * e), t0 + JOINTS_NS)
            g = GRIPPER_NS if e == 0 else GRIPPER1_NS
            buf.extend("gripper", g / 1e9, t0 + g)
            buf.end_episode(task="pick" if e == 0 else "place", success=e == 0)
    return path


def make_imu_buffer(path):
    """Two episodes of 1 s: ``cam`` (8, 8, 3) uint8 PNG at 10 Hz without fps metadata (episode 1 drops
    samples 3 and 6: two gaps), ``imu`` a dict stream at 100 Hz whose ``covariance`` leaf is (3, 3) (which
    LeRobot cannot hold) beside ``gyro`` (3,) = the sample's index in its episode; ``cmd`` () at 20 Hz with
    fps metadata 20."""
    from trajstore.spaces import DictSpace

    streams = {"cam": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
               "imu": DictSpace({"gyro": BoxSpace(-1e6, 1e6, (3,), np.float64),
                                 "covariance": BoxSpace(-1e6, 1e6, (3, 3), np.float64)}),
               "cmd": BoxSpace(-1e6, 1e6, (), np.float64, metadata={"fps": 20})}
    with StreamBuffer.create(path, streams=streams, kind_kwargs={"image": {"format": "PNG"}}) as buf:
        for e, t0 in enumerate((0, T1)):
            cam = np.arange(10) if e == 0 else np.delete(np.arange(10), [3, 6])
            buf.extend("cam", np.broadcast_to(cam.astype(np.uint8)[:, None, None, None], (len(cam), 8, 8, 3)).copy(),
                       t0 + cam * 100_000_000)
            i = np.arange(100)
            buf.extend("imu", {"gyro": np.repeat(i[:, None], 3, 1).astype(np.float64),
                               "covariance": np.zeros((100, 3, 3))}, t0 + i * 10_000_000)
            buf.extend("cmd", np.arange(20.0), t0 + np.arange(20) * 50_000_000)
            buf.end_episode(task="t")
    return path


def run(*args):
    """``trajstore ARGS`` in-process (typer's CliRunner); the result has ``exit_code`` and ``output``."""
    from typer.testing import CliRunner

    from trajstore.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args])
