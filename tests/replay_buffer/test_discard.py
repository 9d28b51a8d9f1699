"""discard_episode(): the open episode's steps are dropped and their slots reused; readers that saw
flushed ones never get a torn or foreign step."""

import numpy as np
import pytest

from tests.replay_buffer.test_episode_data import read_in_fresh_process
from tests.replay_buffer.test_replay_buffer import assert_equal, batch, make, step_space
from trajstore.errors import ReadOnlyError, StaleReadError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def make_writer(tmp_path, capacity):
    space = step_space()
    return ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", capacity=capacity, multiprocessing=True,
                               **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}}))


def cat(*batches):
    def join(vals):
        return {k: join([v[k] for v in vals]) for k in vals[0]} if isinstance(vals[0], dict) else np.concatenate(vals)
    return join(list(batches))


def test_unbounded_discard_rewinds_the_count_and_reuses_the_slots(tmp_path):
    rb = make(tmp_path)
    first, dropped, new = batch(4, 1), batch(5, 2), batch(3, 3)
    rb.extend(first)
    rb.end_episode(task="kept")
    rb.extend(dropped)
    rb.flush()  # some of the discarded steps were committed
    assert rb.discard_episode() == 5
    assert len(rb) == 4 and rb.total_steps == 4 and [e.stop for e in rb.episodes] == [4]
    assert rb.discard_episode() == 0  # nothing open any more
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:  # committed at once: a crash now keeps 4 steps
        assert len(reader) == 4 and reader.num_episodes == 1
    rb.extend(new)
    assert len(rb.storage) == 9  # the discarded slots were written again, the storage did not grow
    rb.end_episode(task="new")
    rb.close()
    assert read_in_fresh_process(tmp_path / "rb") == [[0, 0, 4, True, {"task": "kept"}],
                                                      [1, 4, 7, True, {"task": "new"}]]
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert_equal(rb[:], cat(first, new))


def test_ring_discard_reuses_the_slots_and_loses_what_it_overwrote(tmp_path):
    rb = make(tmp_path, capacity=6)
    first, dropped, new = batch(4, 4), batch(4, 5), batch(3, 6)
    rb.extend(first)
    rb.end_episode()
    rb.extend(dropped)  # overwrites steps 0 and 1 of the first episode
    rb.flush()
    assert rb.discard_episode() == 4
    assert len(rb) == 2 and rb.total_steps == 4
    assert [(e.id, e.start, e.stop, e.overwritten) for e in rb.episodes] == [(0, 0, 2, True)]
    assert_equal(rb[:], {k: (v[2:] if not isinstance(v, dict) else {kk: vv[2:] for kk, vv in v.items()})
                         for k, v in first.items()})
    rb.extend(new)
    rb.end_episode(task="new")
    assert [(e.id, e.start, e.stop) for e in rb.episodes] == [(0, 0, 2), (1, 2, 5)]
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert len(rb) == 5 and rb.total_steps == 7
        tail = {k: (v[2:] if not isinstance(v, dict) else {kk: vv[2:] for kk, vv in v.items()})
                for k, v in first.items()}
        assert_equal(rb[:], cat(tail, new))
        assert rb.episode(-1).data == {"task": "new"}


def test_a_discarded_episode_never_comes_back_after_a_crash(tmp_path):
    rb = make(tmp_path)
    rb.extend(batch(2, 7))
    rb.end_episode()
    rb.extend(batch(3, 8))
    rb.flush()
    rb.discard_episode()
    rb.extend(batch(1, 9))  # appended but never flushed: then the writer "dies"
    rb.storage.flush()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert len(reader) == 2 and [(e.start, e.stop, e.done) for e in reader.episodes] == [(0, 2, True)]
    rb.close()


@pytest.mark.parametrize("capacity", [None, 8])
def test_a_reader_that_saw_discarded_steps_gets_a_stale_read_not_foreign_data(tmp_path, capacity):
    writer = make_writer(tmp_path, capacity)
    first, dropped, new = batch(3, 10), batch(4, 11), batch(4, 12)
    writer.extend(first)
    writer.end_episode()
    writer.extend(dropped)
    writer.flush()
    reader = ReplayBuffer.load_from(tmp_path / "rb", multiprocessing=True)
    assert len(reader) == 7
    np.testing.assert_array_equal(reader[5]["action"], dropped["action"][2])
    writer.discard_episode()
    writer.extend(new)  # written into the slots of the discarded steps
    writer.flush()
    with pytest.raises(StaleReadError, match="index again"):
        reader[5]  # its view still says step 5 is a discarded one
    np.testing.assert_array_equal(reader[5]["action"], new["action"][2])  # the refreshed view
    np.testing.assert_array_equal(reader[1]["action"], first["action"][1])
    got = reader.sample(16, rng=np.random.default_rng(0))["action"]
    everything = np.concatenate([first["action"], new["action"]])
    assert all((everything == a).all(axis=1).any() for a in got)
    reader.close()
    writer.close()


def test_steps_before_the_open_episode_read_fine_across_a_discard(tmp_path):
    writer = make_writer(tmp_path, None)
    first = batch(3, 13)
    writer.extend(first)
    writer.end_episode()
    writer.extend(batch(2, 14))
    writer.flush()
    reader = ReplayBuffer.load_from(tmp_path / "rb", multiprocessing=True)
    writer.discard_episode()
    writer.extend(batch(2, 15))
    writer.flush()
    np.testing.assert_array_equal(reader[:3]["action"], first["action"])  # none of them was discarded
    reader.close()
    writer.close()


def test_discard_on_a_reader_is_refused(tmp_path):
    make(tmp_path).close()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        with pytest.raises(ReadOnlyError):
            reader.discard_episode()


@pytest.mark.parametrize("capacity", [None, 6])
def test_discard_with_video_frames(tmp_path, capacity):
    pytest.importorskip("av")
    from trajstore.storages import VideoStorage

    rb = make(tmp_path, capacity, kind_storage_cls={"image": VideoStorage}, kind_kwargs={})
    frames = lambda lo, n: np.stack([np.full((16, 16, 3), 20 * i, np.uint8) for i in range(lo, lo + n)])  # noqa: E731
    steps = lambda lo, n: {**batch(n, lo), "observation": {"pixels": frames(lo, n),  # noqa: E731
                                                          "state": np.zeros((n, 4), np.float32)}}
    rb.extend(steps(1, 3))
    rb.end_episode()
    rb.extend(steps(4, 2))
    rb.flush()  # a finished segment holds the frames about to be discarded
    rb.extend(steps(6, 1))  # and the pending one
    rb.discard_episode()
    rb.extend(steps(9, 3))
    rb.end_episode()
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        means = rb[:]["observation"]["pixels"].reshape(len(rb), -1).mean(axis=1)
        expected = 20 * np.array([1, 2, 3, 9, 10, 11])
        np.testing.assert_allclose(means, expected, atol=3)
