"""StreamBuffer: round trips of timestamps and values per stream, episodes and their spans, reopening,
readers that refresh, discards, threads and pickling."""

import pickle
import threading

import numpy as np
import pytest

from tests.streams.helpers import batch, frame, ft, joints, spaces
from trajstore.errors import FormatError, ReadOnlyError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.storages import ImageStorage
from trajstore.streams import StreamBuffer, StreamEpisode, StreamSpan


def make(path, **routing):
    return StreamBuffer.create(path, streams=spaces(), **routing)


def record_episode(buf, n_cam=4, n_joints=20, n_ft=40, t0=0.0, first=0):
    """Camera 30 Hz (float seconds, one by one), joints 500 Hz (int ns batch), force 1 kHz (float batch)."""
    for i in range(n_cam):
        buf.append("wrist", frame(first + i), t0 + i / 30)
    buf.extend("joints", batch("joints", range(first, first + n_joints)),
               np.int64(round(t0 * 1e9)) + np.arange(n_joints, dtype=np.int64) * 2_000_000)
    if n_ft:
        buf.extend("ft", batch("ft", range(first, first + n_ft)), t0 + np.arange(n_ft) / 1000.0)


def test_round_trip_of_every_stream(tmp_path):
    with make(tmp_path / "b", kind_kwargs={"image": {"format": "PNG"}}) as buf:
        record_episode(buf)
        buf.end_episode(task="pick", success=True)
        record_episode(buf, n_cam=3, n_joints=5, n_ft=7, t0=10.0, first=100)
        buf.end_episode()
    # the camera went to image storage (PNG here), the rest to HDF5
    with ReplayBuffer.load_from(tmp_path / "b" / "streams" / "wrist") as sub:
        assert isinstance(sub.storage.parts()["value"], ImageStorage)
    buf = StreamBuffer.load_from(tmp_path / "b")
    assert list(buf.streams) == ["wrist", "joints", "ft"]
    assert buf.num_episodes == 2 and buf.read_only
    t, v = buf.read("wrist", episode=0)
    assert t.dtype == np.int64 and t.tolist() == [0, 33_333_333, 66_666_667, 100_000_000]
    np.testing.assert_array_equal(v, batch("wrist", range(4)))
    t, v = buf.read("joints", episode=1)
    assert t.tolist() == [10_000_000_000 + 2_000_000 * i for i in range(5)]
    np.testing.assert_array_equal(v, batch("joints", range(100, 105)))
    t, v = buf.read("ft", episode=-1)
    assert t.tolist() == [10_000_000_000 + 1_000_000 * i for i in range(7)]
    assert v["torque"].dtype == np.float64
    np.testing.assert_array_equal(v["force"], batch("ft", range(100, 107))["force"])
    np.testing.assert_array_equal(v["torque"], batch("ft", range(100, 107))["torque"])
    assert buf.timestamps("wrist").tolist() == [0, 33_333_333, 66_666_667, 100_000_000,
                                                10_000_000_000, 10_033_333_333, 10_066_666_667]
    assert buf.timestamps("joints", episode=1).tolist() == t[:5].tolist()[:0] + [
        10_000_000_000 + 2_000_000 * i for i in range(5)]
    assert [buf.stream_length(n) for n in buf.streams] == [7, 25, 47]
    buf.close()


def test_camera_jpeg_by_default(tmp_path):
    with make(tmp_path / "b") as buf:
        record_episode(buf)
        buf.end_episode()
        _, v = buf.read("wrist", 0)
        assert v.shape == (4, 24, 32, 3) and v.dtype == np.uint8
        assert np.abs(v.astype(int) - batch("wrist", range(4)).astype(int)).max() <= 3  # lossy, flat frames
        with ReplayBuffer.load_from(tmp_path / "b" / "streams" / "wrist") as sub:
            assert isinstance(sub.storage.parts()["value"], ImageStorage)


def test_read_samples_any_order_with_repeats(tmp_path):
    with make(tmp_path / "b", kind_kwargs={"image": {"format": "PNG"}}) as buf:
        record_episode(buf)
        buf.end_episode()
        record_episode(buf, first=50, t0=5.0)
        got = buf.read_samples("wrist", np.array([5, 0, 5, -1]))
        np.testing.assert_array_equal(got, np.stack([frame(51), frame(0), frame(51), frame(53)]))
        got = buf.read_samples("ft", [39, 40])
        np.testing.assert_array_equal(got["force"], np.stack([ft(39)["force"], ft(50)["force"]]))
        with pytest.raises(IndexError, match="'joints'.*40"):
            buf.read_samples("joints", [0, 40])
        with pytest.raises(TypeError):
            buf.read_samples("joints", [0.5])


def test_episode_spans(tmp_path):
    with make(tmp_path / "b") as buf:
        record_episode(buf)
        buf.end_episode(task="a")
        buf.extend("joints", batch("joints", range(3)), [20.0, 20.001, 20.001])  # equal times allowed
        buf.end_episode(interrupted=True)
        buf.append("ft", ft(0), 30)  # int: nanoseconds
        eps = buf.episodes
        assert [e.id for e in eps] == [0, 1, 2] and all(isinstance(e, StreamEpisode) for e in eps)
        assert [(e.done, e.interrupted) for e in eps] == [(True, False), (False, True), (False, False)]
        assert eps[0].data == {"task": "a"} and eps[1].data == {} and buf.num_episodes == 3
        assert eps[0].streams["wrist"] == StreamSpan(0, 4, 0, 100_000_000)
        assert eps[0].streams["ft"] == StreamSpan(0, 40, 0, 39_000_000)
        assert eps[0].first_ns == 0 and eps[0].last_ns == 100_000_000
        assert eps[1].streams["wrist"] == StreamSpan(4, 4, None, None) and eps[1].streams["wrist"].count == 0
        assert repr(eps[0].streams["wrist"]) == ("StreamSpan(start=0, stop=4, count=4, first_ns=0, "
                                                 "last_ns=100000000)")
        assert eps[1].streams["joints"] == StreamSpan(20, 23, 20_000_000_000, 20_001_000_000)
        assert eps[1].first_ns == 20_000_000_000 and eps[1].last_ns == 20_001_000_000
        assert eps[2].streams["ft"] == StreamSpan(40, 41, 30, 30) and buf.episode(-1) == eps[2]
        t, v = buf.read("wrist", episode=1)
        assert t.shape == (0,) and v.shape == (0, 24, 32, 3)
        with pytest.raises(IndexError, match="3 episodes"):
            buf.episode(3)


def test_timestamps_restart_in_a_new_episode(tmp_path):
    with make(tmp_path / "b") as buf:
        buf.append("joints", joints(0), 5.0)
        buf.end_episode()
        buf.append("joints", joints(1), 1.0)  # earlier than the last episode's: a new clock is fine
        assert buf.timestamps("joints").tolist() == [5_000_000_000, 1_000_000_000]


def test_reopen_writer_ends_the_open_episode_as_interrupted(tmp_path):
    buf = make(tmp_path / "b")
    record_episode(buf)
    buf.end_episode(task="a")
    record_episode(buf, n_cam=2, n_joints=3, n_ft=0, t0=1.0, first=10)
    buf.close()  # no end_episode: left open
    with StreamBuffer.load_from(tmp_path / "b") as reader:
        assert [(e.done, e.interrupted) for e in reader.episodes] == [(True, False), (False, False)]
    with StreamBuffer.load_from(tmp_path / "b", read_only=False) as buf:
        eps = buf.episodes
        assert [(e.id, e.done, e.interrupted) for e in eps] == [(0, True, False), (1, False, True)]
        assert [eps[1].streams[n].count for n in buf.streams] == [2, 3, 0]
        buf.append("joints", joints(99), 0.0)  # the next episode starts fresh
        buf.end_episode(task="b")
        assert buf.episode(-1).id == 2 and buf.episode(-1).data == {"task": "b"}
    with StreamBuffer.load_from(tmp_path / "b") as reader:
        np.testing.assert_array_equal(reader.read("joints", 1)[1], batch("joints", range(10, 13)))
        np.testing.assert_array_equal(reader.read("joints", 2)[1], batch("joints", [99]))


def test_reader_sees_commits_and_refreshes(tmp_path):
    with make(tmp_path / "b") as buf:
        reader = StreamBuffer.load_from(tmp_path / "b")
        assert reader.num_episodes == 0 and reader.refresh() is False
        record_episode(buf)
        assert reader.stream_length("joints") == 0  # nothing committed yet
        buf.flush()
        assert reader.stream_length("joints") == 0 and reader.refresh() is True
        assert reader.num_episodes == 1 and not reader.episode(0).done
        assert reader.stream_length("joints") == 20
        buf.end_episode(task="x")
        buf.append("joints", joints(7), 3.0)  # not flushed: not seen
        assert reader.refresh() is True and reader.refresh() is False
        assert [e.data for e in reader.episodes] == [{"task": "x"}]
        np.testing.assert_array_equal(reader.read("ft", 0)[1]["force"], batch("ft", range(40))["force"])
        with pytest.raises(ReadOnlyError):
            reader.append("joints", joints(0), 0.0)
        reader.close()


def test_discard_episode(tmp_path):
    with make(tmp_path / "b") as buf:
        record_episode(buf)
        buf.end_episode()
        reader = StreamBuffer.load_from(tmp_path / "b")
        record_episode(buf, first=200, t0=2.0)
        buf.flush()
        assert reader.refresh() and reader.stream_length("ft") == 80
        assert buf.discard_episode() == 4 + 20 + 40 and buf.discard_episode() == 0
        assert buf.num_episodes == 1 and buf.stream_length("ft") == 40
        buf.extend("joints", batch("joints", range(300, 302)), [0.5, 0.6])  # before the discarded times: fine
        buf.end_episode(task="kept")
        assert reader.refresh()
        eps = reader.episodes
        assert [e.id for e in eps] == [0, 1] and eps[1].data == {"task": "kept"}
        assert [eps[1].streams[n].count for n in reader.streams] == [0, 2, 0]
        assert reader.timestamps("joints", 1).tolist() == [500_000_000, 600_000_000]
        np.testing.assert_array_equal(reader.read("joints", 1)[1], batch("joints", [300, 301]))
        reader.close()
    with StreamBuffer.load_from(tmp_path / "b") as again:
        assert again.stream_length("ft") == 40 and again.num_episodes == 2


def test_appends_from_threads(tmp_path):
    n = {"wrist": 30, "joints": 500, "ft": 1000}
    with make(tmp_path / "b", kind_kwargs={"image": {"format": "PNG"}}) as buf:
        def run(name, period_ns):
            for i in range(n[name]):
                buf.append(name, {"wrist": frame, "joints": joints, "ft": ft}[name](i), i * period_ns)

        threads = [threading.Thread(target=run, args=a) for a in
                   (("wrist", 33_333_333), ("joints", 2_000_000), ("ft", 1_000_000))]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        buf.end_episode()
        assert buf.write_stats("ft").blocks_written >= 1
    with StreamBuffer.load_from(tmp_path / "b") as buf:
        ep = buf.episode(0)
        assert {k: s.count for k, s in ep.streams.items()} == n
        assert buf.timestamps("ft").tolist() == [i * 1_000_000 for i in range(1000)]
        np.testing.assert_array_equal(buf.read("joints", 0)[1], batch("joints", range(500)))
        np.testing.assert_array_equal(buf.read("wrist", 0)[1], batch("wrist", range(30)))


def test_pickles_by_path(tmp_path):
    with make(tmp_path / "b") as buf:
        record_episode(buf)
        buf.end_episode(task="p")
        copy = pickle.loads(pickle.dumps(buf))
        assert copy.read_only and copy.cache_path == buf.cache_path
        assert copy.episode(0).data == {"task": "p"}
        np.testing.assert_array_equal(copy.read("joints", 0)[1], batch("joints", range(20)))
        copy.close()


def test_stats_per_stream(tmp_path):
    with make(tmp_path / "b") as buf:
        record_episode(buf)
        buf.end_episode()
        stats = buf.stats()
        assert set(stats) == {"wrist", "joints", "ft"}
        assert set(stats["joints"]) == {"joints"} and set(stats["ft"]) == {"force", "torque"}
        ref = batch("joints", range(20))
        np.testing.assert_allclose(stats["joints"]["joints"].mean, ref.mean(0), rtol=1e-5)
        np.testing.assert_allclose(stats["ft"]["force"].max, batch("ft", range(40))["force"].max(0))


def test_folder_kinds_are_named(tmp_path):
    make(tmp_path / "b").close()
    with pytest.raises(FormatError, match="a stream buffer: open it with StreamBuffer.load_from"):
        ReplayBuffer.load_from(tmp_path / "b")
    from trajstore.spaces import BoxSpace
    from trajstore.storages import HDF5Storage
    ReplayBuffer.create(HDF5Storage, BoxSpace(0, 1, (2,)), cache_path=tmp_path / "rb").close()
    with pytest.raises(FormatError, match="ReplayBuffer.load_from"):
        StreamBuffer.load_from(tmp_path / "rb")


def _in_forked_child(buf, out):
    try:
        _, values = buf.read("joints", 0)
        try:
            buf.append("joints", joints(0), 9.0)
            refused = False
        except ReadOnlyError:
            refused = True
        out.put((buf.read_only, buf.num_episodes, buf.stream_length("joints"), values.tolist(), refused))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        out.put(repr(exc))


def test_forked_child_reads_what_was_committed(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with make(tmp_path / "b") as buf:
        record_episode(buf)
        buf.end_episode()
        buf.append("joints", joints(50), 1.0)  # not flushed: the child does not see it
        out = ctx.Queue()
        child = ctx.Process(target=_in_forked_child, args=(buf, out))
        child.start()
        got = out.get(timeout=60)
        child.join(60)
        assert got == (True, 1, 20, batch("joints", range(20)).tolist(), True)
        assert not buf.read_only and buf.stream_length("joints") == 21  # the parent writes on
        buf.end_episode()
        assert buf.num_episodes == 2


READER = """
import sys
from trajstore.streams import StreamBuffer
buf = StreamBuffer.load_from(sys.argv[1])
def show():
    print(buf.num_episodes, [buf.stream_length(n) for n in buf.streams],
          buf.read("joints", -1)[1][:, 0].tolist() if buf.num_episodes else [], flush=True)
show()
for line in sys.stdin:
    print(buf.refresh(), end=" ")
    show()
"""


def test_reader_process_refreshes(tmp_path):
    import subprocess
    import sys

    with make(tmp_path / "b") as buf:
        record_episode(buf, n_joints=3)
        buf.end_episode()
        proc = subprocess.Popen([sys.executable, "-c", READER, str(tmp_path / "b")], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().split(" ", 2)[:2] == ["1", "[4,"]
            buf.extend("joints", batch("joints", [40, 41]), [5.0, 5.1])
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "False 1 [4, 3, 40] [0.0, 0.125, 0.25]"  # nothing committed
            buf.flush()
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "True 2 [4, 5, 40] [5.0, 5.125]"
            proc.stdin.close()
            assert proc.wait(60) == 0, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_dropped_unclosed_warns_once_about_the_stream_buffer(tmp_path):
    import gc
    import warnings

    buf = make(tmp_path / "b")
    record_episode(buf, n_cam=2, n_joints=3, n_ft=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del buf
        gc.collect()
    messages = [str(w.message) for w in caught if "not closed" in str(w.message)]
    assert messages == [f"StreamBuffer at {tmp_path / 'b'} was not closed: 5 samples appended since the last flush() "
                        "or end_episode() are lost (wrist: 2, joints: 3); use `with StreamBuffer...` or call close()"]
