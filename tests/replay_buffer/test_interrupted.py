"""A fragment left by a dead writer is never merged into the next episode: a writable reopen ends it
as interrupted. The writer is a real process killed with SIGKILL mid-episode."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.replay_buffer.test_replay_buffer import batch, make
from tests.storages.test_hdf5_crash import kill_and_collect
from trajstore.replay_buffer import ReplayBuffer
from trajstore.ops.info import describe

WRITER = """
import sys, time
import numpy as np
from trajstore.replay_buffer import ReplayBuffer
from trajstore.ops.info import describe
from tests.replay_buffer.test_replay_buffer import batch

rb = ReplayBuffer.load_from(sys.argv[1], read_only=False)
rb.extend(batch(4, 100))
rb.end_episode(task="first")
rb.extend(batch(3, 101))   # the episode that will be cut short
rb.flush()                 # these 3 steps are committed...
rb.extend(batch(2, 102))   # ...these 2 are not
print("FLUSHED", flush=True)
time.sleep(600)
"""

READ = """
import sys, json
from trajstore.replay_buffer import ReplayBuffer
from trajstore.ops.info import describe
with ReplayBuffer.load_from(sys.argv[1]) as rb:
    print(json.dumps([[e.id, e.start, e.stop, e.done, e.interrupted, e.data] for e in rb.episodes]))
"""


def episodes_seen_by_a_fresh_process(path):
    out = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("capacity", [None, 20])
def test_a_fragment_left_by_a_killed_writer_becomes_its_own_interrupted_episode(tmp_path, capacity):
    make(tmp_path, capacity).close()
    path = tmp_path / "rb"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "FLUSHED", proc.stderr.read()
        kill_and_collect(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    # A reader sees the committed fragment as the open episode; the unflushed steps are gone.
    assert episodes_seen_by_a_fresh_process(path) == [[0, 0, 4, True, False, {"task": "first"}],
                                                      [1, 4, 7, False, False, {}]]
    with ReplayBuffer.load_from(path, read_only=False) as rb:
        assert len(rb) == 7
        # Ended and committed by the open itself, before any new step.
        assert episodes_seen_by_a_fresh_process(path)[1] == [1, 4, 7, False, True, {}]
        new = batch(5, 103)
        rb.extend(new)
        rb.end_episode(task="after the crash")
    assert episodes_seen_by_a_fresh_process(path) == [[0, 0, 4, True, False, {"task": "first"}],
                                                      [1, 4, 7, False, True, {}],
                                                      [2, 7, 12, True, False, {"task": "after the crash"}]]
    with ReplayBuffer.load_from(path) as rb:
        np.testing.assert_array_equal(rb.get_episode(1)["action"], batch(3, 101)["action"])
        np.testing.assert_array_equal(rb.get_episode(2)["action"], new["action"])
        assert rb.sample_windows(8, 4, rng=np.random.default_rng(0))["action"].shape == (8, 4, 2)


def test_close_without_end_episode_leaves_an_interrupted_episode(tmp_path):
    with make(tmp_path) as rb:
        rb.extend(batch(3, 110))
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:
        rb.extend(batch(2, 111))
        rb.end_episode()
        assert [(e.start, e.stop, e.done, e.interrupted) for e in rb.episodes] == [(0, 3, False, True),
                                                                                  (3, 5, True, False)]
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:  # nothing open: nothing to end
        assert rb.num_episodes == 2
    info = describe(tmp_path / "rb")
    assert (info.episodes, info.complete_episodes, info.interrupted_episodes) == (2, 1, 1)


def test_a_ring_fragment_whose_start_was_overwritten_is_interrupted_and_overwritten(tmp_path):
    with make(tmp_path, capacity=4) as rb:
        rb.extend(batch(3, 120))
        rb.end_episode()
        rb.extend(batch(6, 121))  # longer than the ring; never ended
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:
        assert [(e.id, e.start, e.stop, e.overwritten, e.interrupted) for e in rb.episodes] == [(1, 0, 4, True, True)]
