"""``end_episode(flush=False)``: the episode is closed at once and committed by the next flush."""

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"observation": BoxSpace(-10, 10, (2,), np.float32), "action": BoxSpace(-1, 1, (), np.float32)})


def steps(first, n):
    values = np.arange(first, first + n, dtype=np.float32)
    return {"observation": np.stack([values / 10, -values / 10], 1), "action": values / 100}


def test_episodes_closed_without_a_commit_are_committed_by_the_next_flush(tmp_path):
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(SPACE))
    for k in range(3):
        rb.extend(steps(10 * k, 4))
        rb.end_episode(flush=False, k=k)
    assert [(e.start, e.stop, e.done, e.data) for e in rb.episodes] == [(0, 4, True, {"k": 0}), (4, 8, True, {"k": 1}),
                                                                        (8, 12, True, {"k": 2})]
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert len(reader) == 0 and reader.num_episodes == 0  # nothing committed yet
        rb.flush()
        assert reader.refresh()
        assert [(e.id, len(e), e.data) for e in reader.episodes] == [(0, 4, {"k": 0}), (1, 4, {"k": 1}),
                                                                     (2, 4, {"k": 2})]
        np.testing.assert_array_equal(reader[:]["action"], np.concatenate([steps(10 * k, 4)["action"] for k in range(3)]))
    rb.close()


def test_a_writer_dropped_before_the_flush_leaves_the_last_commit(tmp_path):
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(SPACE))
    rb.extend(steps(0, 4))
    rb.end_episode(k=0)  # committed
    rb.extend(steps(10, 4))
    rb.end_episode(flush=False, k=1)  # closed in memory only: the writer then "dies"
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert [(e.id, len(e), e.data) for e in reader.episodes] == [(0, 4, {"k": 0})]
    rb.close()


def test_a_readers_view_moves_only_when_it_refreshes_or_raced_the_writer(tmp_path):
    """Reads check against the newest commit but keep the reader's view: len, episodes and indices keep
    their meaning until refresh() (or a StaleReadError, after which the view is the newest)."""
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(SPACE))
    rb.extend(steps(0, 4))
    rb.end_episode()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        rb.extend(steps(10, 3))
        rb.end_episode()  # a commit that reuses no slot the reader holds
        np.testing.assert_array_equal(reader[:]["action"], steps(0, 4)["action"])
        assert len(reader) == 4 and reader.num_episodes == 1 and reader.total_steps == 4
        assert reader.refresh() and len(reader) == 7 and reader.num_episodes == 2
        np.testing.assert_array_equal(reader[4:]["action"], steps(10, 3)["action"])
    rb.close()
