"""``end_episode(episode_key=)``: an episode is committed under a key at most once; a retry is dropped and
says so; ``load_from(left_open="discard")`` drops a dead writer's fragment so an episode is whole or absent."""

import subprocess
import sys

import numpy as np
import pytest

from tests.replay_buffer.test_replay_buffer import batch, make
from tests.storages.test_hdf5_crash import kill_and_collect
from trajstore.errors import InvalidValueError, ReadOnlyError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_keys import EpisodeEnd


def keys_of(rb):
    return [e.data.get("episode_key") for e in rb.episodes]


def test_a_key_is_committed_with_the_episode_and_read_back(tmp_path):
    with make(tmp_path) as rb:
        rb.extend(batch(3, 0))
        end = rb.end_episode(episode_key="robot3/2026-12-01T10:00:00/7", task="push")
        assert end == EpisodeEnd(id=0, key="robot3/2026-12-01T10:00:00/7", duplicate=False, steps=3)
        rb.extend(batch(2, 1))
        assert rb.end_episode() == EpisodeEnd(id=1, key=None, duplicate=False, steps=2)
        assert rb.has_episode_key("robot3/2026-12-01T10:00:00/7") and not rb.has_episode_key("other")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert rb.episode(0).data == {"task": "push", "episode_key": "robot3/2026-12-01T10:00:00/7"}
        assert keys_of(rb) == ["robot3/2026-12-01T10:00:00/7", None]
        assert rb.has_episode_key("robot3/2026-12-01T10:00:00/7")


def test_a_retried_key_discards_its_steps_and_says_so(tmp_path):
    with make(tmp_path) as rb:
        first = batch(4, 10)
        rb.extend(first)
        rb.end_episode(episode_key="k1", seed=1)
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:  # a retry after a restart
        rb.extend(batch(5, 11))
        end = rb.end_episode(episode_key="k1", seed=1)
        assert end == EpisodeEnd(id=None, key="k1", duplicate=True, steps=5)
        assert len(rb) == 4 and rb.num_episodes == 1
        np.testing.assert_array_equal(rb[0:4]["action"], first["action"])
        rb.extend(batch(2, 12))
        assert rb.end_episode(episode_key="k2") == EpisodeEnd(id=1, key="k2", duplicate=False, steps=2)
        # a retried end_episode call itself (nothing appended since) does nothing and says so
        assert rb.end_episode(episode_key="k2") == EpisodeEnd(id=None, key="k2", duplicate=True, steps=0)
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert keys_of(rb) == ["k1", "k2"] and len(rb) == 6


def test_keys_of_episodes_ended_without_flush_count_before_the_commit(tmp_path):
    with make(tmp_path) as rb:
        rb.extend(batch(2, 0))
        rb.end_episode(episode_key="a", flush=False)
        rb.extend(batch(3, 1))
        assert rb.end_episode(episode_key="a", flush=False).duplicate
        assert len(rb) == 2 and rb.has_episode_key("a")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert keys_of(rb) == ["a"] and len(rb) == 2


def test_a_ring_refuses_keys_before_anything_is_written(tmp_path):
    # a ring's appends overwrite committed episodes before a retry could be found a duplicate
    with make(tmp_path, capacity=6) as rb:
        rb.extend(batch(3, 0))
        with pytest.raises(ValueError, match="episode_key needs an unbounded buffer"):
            rb.end_episode(episode_key="e0")
        assert rb.num_episodes == 1 and not rb.episodes[0].done
        rb.end_episode()
        assert rb.episodes[0].done and rb.episodes[0].data == {}


@pytest.mark.parametrize("key, what", [(3, "must be a str"), ("", "1..1024 characters"),
                                       ("x" * 1025, "1..1024 characters"), ("a\nb", "line break"),
                                       ("a\x00b", "NUL"), (" \t ", "white space"), ("a\ud800", "lone surrogate")])
def test_a_bad_key_is_refused_before_anything_is_written(tmp_path, key, what):
    with make(tmp_path) as rb:
        rb.extend(batch(2, 0))
        with pytest.raises(InvalidValueError, match=what):
            rb.end_episode(episode_key=key)
        assert rb.num_episodes == 1 and not rb.episodes[0].done  # still open
        rb.end_episode(episode_key="fine")
        assert keys_of(rb) == ["fine"]


def test_a_reader_sees_keys_after_refresh_and_cannot_share_a_guard(tmp_path):
    with make(tmp_path) as rb, ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert not reader.has_episode_key("k")
        rb.extend(batch(2, 0))
        rb.end_episode(episode_key="k")
        reader.refresh()
        assert reader.has_episode_key("k")
        with pytest.raises(ReadOnlyError):
            reader.share_episode_keys(None)


def test_left_open_must_be_known(tmp_path):
    make(tmp_path).close()
    with pytest.raises(ValueError, match="left_open must be 'interrupted' or 'discard'"):
        ReplayBuffer.load_from(tmp_path / "rb", read_only=False, left_open="keep")


WRITER = """
import sys, time
from trajstore.replay_buffer import ReplayBuffer
from tests.replay_buffer.test_replay_buffer import batch

rb = ReplayBuffer.load_from(sys.argv[1], read_only=False)
rb.extend(batch(4, 100))
rb.end_episode(episode_key="whole")
rb.extend(batch(3, 101))
rb.flush()                 # 3 steps of the next episode are committed, its end never is
print("FLUSHED", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("left_open", ["interrupted", "discard"])
def test_a_killed_writers_fragment_is_kept_as_interrupted_or_discarded(tmp_path, left_open):
    make(tmp_path).close()
    path = tmp_path / "rb"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "FLUSHED", proc.stderr.read()
        kill_and_collect(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with ReplayBuffer.load_from(path, read_only=False, left_open=left_open) as rb:
        if left_open == "discard":
            assert len(rb) == 4 and keys_of(rb) == ["whole"]
        else:
            assert len(rb) == 7 and keys_of(rb) == ["whole", None] and rb.episodes[1].interrupted
        rb.extend(batch(2, 102))
        rb.end_episode(episode_key="next")
    with ReplayBuffer.load_from(path) as rb:
        assert keys_of(rb)[-1] == "next" and len(rb.episodes[-1]) == 2
