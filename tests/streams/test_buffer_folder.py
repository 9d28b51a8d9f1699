"""The stream buffer folder: the episode log's torn tail, damaged or missing files, the writer lock, a
failed flush retried, closed buffers."""

import json
import shutil

import numpy as np
import pytest

from tests.streams.helpers import batch, joints, spaces
from trajstore.errors import FormatError, LockedError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.streams import StreamBuffer


def recorded(path, episodes=2):
    with StreamBuffer.create(path, streams=spaces()) as buf:
        for k in range(episodes):
            buf.extend("joints", batch("joints", range(10 * k, 10 * k + 5)), np.arange(5) * 0.002)
            buf.end_episode(k=k)


def test_torn_log_tail_is_ignored_then_overwritten(tmp_path):
    path = tmp_path / "b"
    recorded(path)
    with open(path / "episodes.log", "ab") as f:
        f.write(b'{"id":2,"interrupted":false,"da')  # a commit cut short
    with StreamBuffer.load_from(path) as reader:
        assert [e.data for e in reader.episodes] == [{"k": 0}, {"k": 1}]
    with StreamBuffer.load_from(path, read_only=False) as buf:
        buf.append("joints", joints(7), 1.0)
        buf.end_episode(k=2)
    lines = (path / "episodes.log").read_bytes().splitlines()
    assert len(lines) == 4 and json.loads(lines[-1])["data"] == {"k": 2}
    with StreamBuffer.load_from(path) as reader:
        assert [e.data for e in reader.episodes] == [{"k": 0}, {"k": 1}, {"k": 2}]
        np.testing.assert_array_equal(reader.read("joints", 2)[1], batch("joints", [7]))


def test_log_shorter_than_committed(tmp_path):
    path = tmp_path / "b"
    recorded(path)
    raw = (path / "episodes.log").read_bytes()
    (path / "episodes.log").write_bytes(raw[:-10])
    with pytest.raises(FormatError, match="episodes.log is shorter"):
        StreamBuffer.load_from(path)


def test_missing_stream_folder_is_named(tmp_path):
    path = tmp_path / "b"
    recorded(path)
    shutil.rmtree(path / "streams" / "ft")
    with pytest.raises(FormatError, match="stream 'ft'"):
        StreamBuffer.load_from(path)


def test_not_a_folder(tmp_path):
    with pytest.raises(FormatError, match="not a trajstore stream buffer folder"):
        StreamBuffer.load_from(tmp_path / "nothing")


def test_one_writer(tmp_path):
    path = tmp_path / "b"
    recorded(path)
    with StreamBuffer.load_from(path, read_only=False):
        with pytest.raises(LockedError):
            StreamBuffer.load_from(path, read_only=False)
        with StreamBuffer.load_from(path) as reader:  # readers are welcome
            assert reader.num_episodes == 2


def test_end_episode_after_a_failed_flush(tmp_path, monkeypatch):
    path = tmp_path / "b"
    with StreamBuffer.create(path, streams=spaces()) as buf:
        buf.extend("joints", batch("joints", range(3)), [0.0, 0.1, 0.2])
        buf.append("ft", {"force": np.ones(3, np.float32), "torque": np.zeros(3)}, 0.0)
        real = ReplayBuffer.flush
        calls = []

        def failing(self):
            calls.append(self.cache_path.name)
            if self.cache_path.name == "ft" and calls.count("ft") == 1:
                raise OSError(28, "No space left on device")
            return real(self)

        monkeypatch.setattr(ReplayBuffer, "flush", failing)
        with pytest.raises(OSError, match="No space"):
            buf.end_episode(task="t")
        assert buf.num_episodes == 1 and not buf.episode(0).done
        buf.end_episode(task="t")  # the samples ended by the failed call are committed with the rest
        ep = buf.episode(0)
        assert ep.done and ep.data == {"task": "t"} and buf.num_episodes == 1
        assert ep.streams["joints"].count == 3 and ep.streams["ft"].count == 1
    with StreamBuffer.load_from(path) as reader:
        assert [(e.streams["joints"].count, e.streams["ft"].count, e.done) for e in reader.episodes] == [(3, 1, True)]


def test_closed(tmp_path):
    buf = StreamBuffer.create(tmp_path / "b", streams=spaces())
    buf.close()
    buf.close()
    assert buf.closed
    for call in (lambda: buf.append("joints", joints(0), 0.0), lambda: buf.num_episodes,
                 lambda: buf.timestamps("joints"), buf.flush):
        with pytest.raises(ValueError, match="closed"):
            call()
