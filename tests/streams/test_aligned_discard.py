"""An aligned view holding the writer's open episode after discard_episode(): every read refuses for good
(the freed positions hold new samples); a view of closed episodes only reads on. Also the buffer's
consistent snapshot and its exit without close()."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from trajstore.spaces import BoxSpace
from trajstore.streams import StreamBuffer, ViewDiscardedError
from trajstore.streams.aligned_storage import check_holds

CAM = BoxSpace(0, 255, (4, 4, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"})
SPACES = {"a": BoxSpace(-1e12, 1e12, (), np.float64), "cam": CAM}


def value(t):
    return (np.asarray(t, np.int64) // 10**6).astype(np.float64)


def frames(t):
    return np.stack([np.full((4, 4, 3), (x // 10**8) % 251, np.uint8) for x in np.asarray(t, np.int64)])


def record(buf, t):
    buf.extend("a", value(t), t)
    buf.extend("cam", frames(t), t)


def two_episodes(tmp_path):
    """A writer with one closed episode (5 samples) and one open (5 samples), flushed."""
    buf = StreamBuffer.create(tmp_path / "s", SPACES)
    record(buf, np.arange(5) * 10**8)
    buf.end_episode()
    record(buf, 10**10 + np.arange(5) * 10**8)
    buf.flush()
    return buf


def discard_and_record_again(buf):
    assert buf.discard_episode() == 10
    record(buf, 5 * 10**10 + np.arange(5) * 10**8)  # the freed positions are reused
    buf.flush()


@pytest.mark.parametrize("streams", [["a"], ["a", "cam"]])  # a held low-dim stream; one read each time
def test_writer_view_refuses_reads_after_discard(tmp_path, streams):
    buf = two_episodes(tmp_path)
    view = buf.aligned(anchor="a", streams=streams)
    assert len(view) == 10 and view[7]["a"] == value(10**10 + 2 * 10**8)  # read before: the snapshot's value
    assert buf.discards == 0
    discard_and_record_again(buf)
    assert buf.discards == 1
    for _ in range(2):  # not retried, not healed by reading again
        for i in (7, 2):
            with pytest.raises(ViewDiscardedError, match=r"stream 'a'.*discarded an episode this view holds "
                                                         r"\(episode id 1\).*make a new view"):
                view[i]
    with pytest.raises(ViewDiscardedError):
        view.sample_windows(4, delta_timestamps={"a": [-0.1, 0.0]})
    fresh = buf.aligned(anchor="a", streams=streams)
    np.testing.assert_array_equal(fresh[:]["a"], value(fresh.anchor_times))
    buf.close()


def test_view_of_closed_episodes_reads_on_after_discard(tmp_path):
    buf = StreamBuffer.create(tmp_path / "s", SPACES)
    record(buf, np.arange(5) * 10**8)
    buf.end_episode()
    view = buf.aligned(anchor="a")
    record(buf, 10**10 + np.arange(5) * 10**8)
    discard_and_record_again(buf)
    np.testing.assert_array_equal(view[:]["a"], value(np.arange(5) * 10**8))
    np.testing.assert_array_equal(view[:]["cam"], frames(np.arange(5) * 10**8))
    buf.close()


def test_reader_view_refuses_reads_after_the_writer_discards(tmp_path):
    buf = two_episodes(tmp_path)
    reader = StreamBuffer.load_from(tmp_path / "s")
    view = reader.aligned(anchor="a")
    assert len(view) == 10
    discard_and_record_again(buf)
    for _ in range(2):
        for i in (7, 2):
            with pytest.raises(ViewDiscardedError, match=r"episode id 1"):
                view[i]
    reader.close()
    buf.close()


def test_dataloader_workers_refuse_reads_after_the_writer_discards(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset

    buf = two_episodes(tmp_path)
    reader = StreamBuffer.load_from(tmp_path / "s")
    view = reader.aligned(anchor="a", streams=["a"])
    ds = ReplayBufferDataset(view, delta_timestamps={"a": [0.0]})
    discard_and_record_again(buf)
    loader = DataLoader(ds, batch_size=10, num_workers=1, multiprocessing_context="fork")
    with pytest.raises(ViewDiscardedError, match=r"episode id 1"):
        list(loader)
    assert torch is not None
    reader.close()
    buf.close()


def test_snapshot_is_one_consistent_state(tmp_path):
    buf = two_episodes(tmp_path)
    buf.discard_episode()
    record(buf, 5 * 10**10 + np.arange(3) * 10**8)
    episodes, times, discards = buf.snapshot(["a", "cam"])
    assert discards == 1 and [e.id for e in episodes] == [0, 1] and not episodes[-1].done
    assert [(e.streams["a"].start, e.streams["a"].stop) for e in episodes] == [(0, 5), (5, 8)]
    np.testing.assert_array_equal(times["cam"][5:], 5 * 10**10 + np.arange(3) * 10**8)
    assert buf.committed_discards() == {"a": 1, "cam": 1}
    buf.close()


def test_check_holds_names_the_cause():
    with pytest.raises(ViewDiscardedError, match="discarded an episode"):
        check_holds("/x", "a", 5, 8, writer=True)
    with pytest.raises(ValueError, match=r"flush\(\) the writer"):
        check_holds("/x", "a", 5, 8)


def test_writer_dropped_at_exit_says_nothing_broken(tmp_path):
    script = textwrap.dedent(f"""
        import numpy as np
        from trajstore.spaces import BoxSpace
        from trajstore.streams import StreamBuffer
        buf = StreamBuffer.create({str(tmp_path / "s")!r}, {{"a": BoxSpace(0, 10, (), np.float64)}})
        buf.append("a", 1.0, 5)
        buf.discard_episode()
        buf.append("a", 2.0, 6)  # unflushed at exit, never closed
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Exception ignored" not in out.stderr and "KeyError" not in out.stderr, out.stderr
    assert "was not closed: 1 samples appended since the last flush() or end_episode() are lost (a: 1)" in out.stderr
