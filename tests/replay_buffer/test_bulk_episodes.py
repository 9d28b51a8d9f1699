"""Bulk imports with ``end_episode(flush=False)``: no wait, no fsync per episode; a kill -9 keeps the committed
episodes (steps, data, final observations) and loses exactly the later ones."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"observation": BoxSpace(-1e6, 1e6, (2,), np.float32), "action": BoxSpace(-1e6, 1e6, (), np.float32)})


def make(path, capacity=None):
    return ReplayBuffer.create(DictStorage, SPACE, cache_path=path, capacity=capacity,
                               **dict_storage_kwargs_from_space(SPACE))


def step(k):
    return {"observation": np.array([k, -k], np.float32), "action": np.float32(k)}


def final(e):
    return np.array([1000 + e, 0.5], np.float32)


def record(rb, first, count, steps_per_episode=1):
    """Episodes ``first .. first+count-1`` of ``steps_per_episode`` steps; step k of episode e holds 10*e + k."""
    for e in range(first, first + count):
        for k in range(steps_per_episode):
            rb.append(step(10 * e + k))
        rb.end_episode(flush=False, final_observation=final(e), e=e)


def test_flush_false_does_not_fsync_or_wait(tmp_path, monkeypatch):
    rb = make(tmp_path / "rb")
    record(rb, 0, 3)
    rb.flush()
    synced = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    waits = rb.write_stats.flush_wait_seconds
    record(rb, 3, 50)
    assert synced == []  # neither the step storage nor the final observations were synced
    assert rb.write_stats.flush_wait_seconds == waits  # never waited for the background thread
    monkeypatch.undo()
    rb.flush()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert [e.data["e"] for e in reader.episodes] == list(range(53))
        np.testing.assert_array_equal(reader[:]["action"], [10.0 * e for e in range(53)])
        for k in (0, 2, 3, 30, 52):
            np.testing.assert_array_equal(reader.final_observation(k), final(k))
    rb.close()


def test_the_writer_reads_episodes_closed_without_a_commit(tmp_path):
    rb = make(tmp_path / "rb")
    record(rb, 0, 5, steps_per_episode=3)
    assert [(e.start, e.stop) for e in rb.episodes] == [(3 * e, 3 * e + 3) for e in range(5)]
    np.testing.assert_array_equal(rb.final_observation(4), final(4))
    np.testing.assert_array_equal(rb[:]["action"], [10.0 * e + k for e in range(5) for k in range(3)])
    rb.close()


KILLED = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from test_bulk_episodes import make, record
capacity = None if sys.argv[2] == "none" else int(sys.argv[2])
rb = make(sys.argv[1], capacity)
record(rb, 0, 30, int(sys.argv[3]))
rb.flush()                             # episodes 0..29 committed
record(rb, 30, 8, int(sys.argv[3]))    # closed in memory, some steps and final observations written behind
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("capacity, steps", [("none", 1), ("none", 4), ("40", 1), ("40", 3)])
def test_kill_9_in_a_bulk_import_keeps_exactly_the_committed_episodes(tmp_path, capacity, steps):
    script = KILLED.format(tests=os.path.dirname(__file__))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "rb"), capacity, str(steps)],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        eps = [e.data["e"] for e in rb.episodes]
        if capacity == "none":
            assert eps == list(range(30))
        else:  # the newest committed ones the later steps did not overwrite (a ring drops up to capacity/8
            # steps more ahead of an overwrite; an episode goes when its first step goes)
            held = min(40, 30 * steps) - max(0, 38 * steps - 40 - max(0, 30 * steps - 40))
            assert eps == list(range(30 - len(eps), 30)) and len(eps) * steps >= held - 5 - steps, (eps, held)
            assert (capacity, steps) != ("40", 1) or eps == list(range(30))  # 38 steps: nothing overwritten
        for pos, e in enumerate(eps):
            np.testing.assert_array_equal(rb.final_observation(pos), final(e))
            np.testing.assert_array_equal(rb.get_episode(pos)["action"], [10.0 * e + k for k in range(steps)])
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:  # and it goes on
        record(rb, 100, 2, steps)
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [e.data["e"] for e in rb.episodes][-2:] == [100, 101]
        np.testing.assert_array_equal(rb.final_observation(-1), final(101))


def test_a_ring_never_names_a_final_observation_slot_a_later_episode_reused(tmp_path):
    rb = make(tmp_path / "rb", capacity=8)
    record(rb, 0, 8)
    rb.flush()
    record(rb, 8, 5)  # finals 8..12 reuse the slots of 0..4: the committed view must have dropped those first
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        for pos, e in enumerate(e.data["e"] for e in reader.episodes):
            np.testing.assert_array_equal(reader.final_observation(pos), final(e))
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert [e.data["e"] for e in reader.episodes] == list(range(5, 13))
        for pos, e in enumerate(range(5, 13)):
            np.testing.assert_array_equal(reader.final_observation(pos), final(e))
