"""ShardedBuffer: refresh (new episodes, new shards), empty datasets, damaged shards and shards that do not fit."""

import json
import pickle

import numpy as np
import pytest

from tests.shards.shard_data import SPACE, Shard, assert_tree_equal, make_dataset, take, union
from trajstore.errors import FormatError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.shards import ShardedBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def test_refresh_sees_a_new_episode_in_shard_0_and_a_new_shard(tmp_path):
    root = make_dataset(tmp_path / "ds")
    a, c = Shard(root, "a", 0), Shard(root, "c", 2)
    a.episode(4)
    c.episode(3)
    with ShardedBuffer.load_from(root) as r:
        assert len(r) == 7 and r.locate_episode(1) == ("c", 0)
        assert r.refresh() is False
        a.episode(5, end=False)  # an open episode, flushed: shown as open
        b = Shard(root, "b", 1)
        b.episode(2)
        assert len(r) == 7  # nothing moves before refresh
        assert r.refresh() is True
        assert r.shard_names == ("a", "b", "c") and len(r) == 4 + 5 + 2 + 3
        assert [(e.start, e.stop, e.done) for e in r.episodes] == [(0, 4, True), (4, 9, False), (9, 11, True),
                                                                  (11, 14, True)]
        assert r.locate_episode(3) == ("c", 0) and r.global_episode("c", 0) == 3  # numbering moved
        assert_tree_equal(r[:], union([a, b, c]))
        assert r.refresh() is False
        a.rb.end_episode(episode_key="a/late")
        assert r.refresh() is True and r.episode(1).done and r.find_episode("a/late") == 1
        np.testing.assert_allclose(r.stats("reward")["reward"].mean, union([a, b, c])["reward"].mean(), rtol=1e-6)
    for s in (a, b, c):
        s.close()


def test_a_pickled_reader_shows_the_steps_the_original_showed(tmp_path):
    root = make_dataset(tmp_path / "ds")
    a, c = Shard(root, "a", 0), Shard(root, "c", 2)
    a.episode(4)
    a.episode(3, end=False)
    c.episode(3)
    with ShardedBuffer.load_from(root) as r:
        want = r[:]
        blob = pickle.dumps(r)
    a.rb.extend(take(a.batches[-1], slice(0, 2)))  # the open episode grows, then ends
    a.rb.end_episode()
    a.episode(2)
    Shard(root, "b", 1).episode(5)  # and a new shard appears
    with pickle.loads(blob) as copy:
        assert copy.shard_names == ("a", "c") and len(copy) == 10
        assert_tree_equal(copy[:], want)
        assert [(e.start, e.stop, e.done) for e in copy.episodes] == [(0, 4, True), (4, 7, False), (7, 10, True)]
        assert copy.refresh() is True and len(copy) == 4 + 5 + 2 + 5 + 3
    a.close()
    c.close()


def test_an_empty_dataset_and_one_with_an_empty_shard(tmp_path):
    root = make_dataset(tmp_path / "ds")
    with ShardedBuffer.load_from(root) as r:
        assert len(r) == 0 and list(r.episodes) == [] and r.shard_names == () and r.space == SPACE
        assert r.stats()["reward"].count == 0
        with pytest.raises(ValueError):
            r.sample(2)
    empty = Shard(root, "e", 0)
    empty.rb.flush()
    with ShardedBuffer.load_from(root) as r:
        assert len(r) == 0 and r.shard_names == ("e",) and r.num_episodes == 0 and r.count_anchors() == 0
        assert len(r[:]["reward"]) == 0
    empty.close()
    no_template = make_dataset(tmp_path / "bare", template=False)
    with pytest.raises(FormatError, match="space is unknown"):
        ShardedBuffer.load_from(no_template)


def test_damaged_and_half_made_shards(tmp_path):
    root = make_dataset(tmp_path / "ds")
    a = Shard(root, "a", 0)
    a.episode(3)
    a.close()
    (root / "shards" / "half").mkdir()  # no trajstore.json yet: not a shard
    (root / "shards" / ".tmp-x").mkdir()
    with ShardedBuffer.load_from(root) as r:
        assert r.shard_names == ("a",) and len(r) == 3
    b = Shard(root, "b", 1)
    b.episode(2)
    b.close()
    (root / "shards" / "b" / "trajstore.json").write_text("{ not json")
    with pytest.raises(FormatError, match=r"shard 'b' .*shards/b"):
        ShardedBuffer.load_from(root)
    with pytest.raises(FormatError, match="not a sharded trajstore dataset"):
        ShardedBuffer.load_from(root / "shards" / "a")
    (root / "trajstore-dataset.json").write_text(json.dumps({"format": "trajstore.dataset", "version": 9}))
    with pytest.raises(FormatError, match="version 9"):
        ShardedBuffer.load_from(root)


def test_a_shard_of_another_space_or_a_ring_is_refused_by_name(tmp_path):
    root = make_dataset(tmp_path / "ds")
    a = Shard(root, "a", 0)
    a.episode(3)
    other = DictSpace({"x": BoxSpace(0, 1, (2,), np.float32)})
    ReplayBuffer.create(DictStorage, other, cache_path=root / "shards" / "odd",
                        **dict_storage_kwargs_from_space(other)).close()
    with pytest.raises(ValueError, match=r"shard 'odd' .*another space"):
        ShardedBuffer.load_from(root)
    (root / "shards" / "odd").rename(tmp_path / "odd")
    with ShardedBuffer.load_from(root) as r:
        (tmp_path / "odd").rename(root / "shards" / "odd")
        with pytest.raises(ValueError, match=r"shard 'odd' .*another space"):
            r.refresh()
        assert r.shard_names == ("a",) and len(r) == 3  # nothing changed
    (root / "shards" / "odd").rename(tmp_path / "odd")
    ReplayBuffer.create(DictStorage, SPACE, cache_path=root / "shards" / "ring", capacity=8,
                        **dict_storage_kwargs_from_space(SPACE)).close()
    with pytest.raises(ValueError, match=r"shard 'ring' .*ring \(capacity=8\)"):
        ShardedBuffer.load_from(root)
    a.close()


def test_a_discarded_open_episode_being_read_raises_stale_and_refreshes(tmp_path):
    from trajstore.errors import StaleReadError

    root = make_dataset(tmp_path / "ds")
    a = Shard(root, "a", 0)
    a.episode(3)
    a.episode(4, end=False)
    with ShardedBuffer.load_from(root) as r:
        assert len(r) == 7
        a.rb.discard_episode()
        a.rb.extend(take(a.batches[0], slice(0, 2)))
        a.rb.flush()
        with pytest.raises(StaleReadError, match="shard 'a'"):
            r[5]
        assert len(r) == 5  # refreshed: the discarded steps are gone, the new ones shown
        np.testing.assert_array_equal(r[3:5]["observation"]["state"], a.batches[0]["observation"]["state"][:2])
    a.close()
