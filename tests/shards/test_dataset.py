"""``ShardedDataset``: the folder, shard writers made from the template, keys checked across shards, bad input."""

import json
import multiprocessing as mp

import numpy as np
import pytest

from tests.shards.test_exactly_once import episode_steps, fleet_space
from trajstore.errors import FormatError, LockedError, StorageExistsError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.shards import ShardedDataset, is_dataset
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def make(tmp_path, name="fleet"):
    space = fleet_space()
    return ShardedDataset.create(tmp_path / name, DictStorage, space, **dict_storage_kwargs_from_space(space))


def record(rb, worker, episode, **kw):
    rb.extend(episode_steps(worker, episode))
    return rb.end_episode(**kw)


def test_a_new_dataset_has_no_shards_and_makes_them_from_the_template(tmp_path):
    ds = make(tmp_path)
    assert is_dataset(ds.path) and ds.shards == [] and not is_dataset(tmp_path)
    with ds.writer("robot-2") as rb:
        assert rb.space == fleet_space() and rb.capacity is None and len(rb) == 0
        record(rb, 2, 0, task="pick")
    with ds.writer("robot-1") as rb:
        record(rb, 1, 0)
    assert ShardedDataset.open(ds.path).shards == ["robot-1", "robot-2"]
    with ReplayBuffer.load_from(ds.path / "shards" / "robot-2") as rb:
        np.testing.assert_array_equal(rb[:]["action"], episode_steps(2, 0)["action"])
        assert rb.episode(0).data == {"task": "pick"}
    with ReplayBuffer.load_from(ds.path / "template") as template:  # the template stays empty
        assert len(template) == 0
    with ds.writer("robot-2") as rb:  # reopened, not made again
        assert len(rb) == len(episode_steps(2, 0)["action"])


def test_a_key_is_committed_once_across_shards(tmp_path):
    ds = make(tmp_path)
    with ds.writer("a") as a, ds.writer("b") as b:
        assert not record(a, 0, 0, episode_key="job/1").duplicate
        end = record(b, 1, 0, episode_key="job/1")
        assert end.duplicate and end.steps == len(episode_steps(1, 0)["action"]) and len(b) == 0
        assert not record(b, 1, 1, episode_key="job/2").duplicate
        assert record(a, 0, 1, episode_key="job/2").duplicate
        assert not record(a, 0, 2, episode_key="job/3").duplicate
    assert ds.has_episode_key("job/3") and not ds.has_episode_key("job/4")
    with ReplayBuffer.load_from(ds.path / "shards" / "a") as a:
        assert [e.data["episode_key"] for e in a.episodes] == ["job/1", "job/3"]


def test_one_writer_per_shard(tmp_path):
    ds = make(tmp_path)
    with ds.writer("a"):
        with pytest.raises(LockedError):
            ShardedDataset.open(ds.path).writer("a")


def _make_shard(path, q):
    try:
        with ShardedDataset.open(path).writer("same") as rb:
            q.put(len(rb))
    except Exception as exc:  # LockedError: the other process holds it
        q.put(type(exc).__name__)


def test_two_processes_making_one_shard_get_one_folder(tmp_path):
    ds = make(tmp_path)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_make_shard, args=(ds.path, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    results = sorted(str(q.get(timeout=5)) for _ in procs)
    assert set(results) <= {"0", "LockedError"} and "0" in results, results
    assert ds.shards == ["same"]
    assert [p.name for p in (ds.path / "shards").iterdir()] == ["same"]  # no hidden copy left


@pytest.mark.parametrize("name", ["", ".hidden", "-x", "a/b", "..", "x" * 129, "é"])
def test_a_bad_shard_name_is_refused_before_anything_is_made(tmp_path, name):
    ds = make(tmp_path)
    with pytest.raises(ValueError, match="shard name"):
        ds.writer(name)
    assert list((ds.path / "shards").iterdir()) == []


def test_create_refuses_a_folder_in_use_and_a_bad_space_leaves_nothing(tmp_path):
    make(tmp_path)
    with pytest.raises(StorageExistsError):
        make(tmp_path)
    with pytest.raises(TypeError):
        ShardedDataset.create(tmp_path / "bad", DictStorage, "not a space")
    assert not (tmp_path / "bad").exists()


def test_open_refuses_what_is_not_a_dataset(tmp_path):
    with pytest.raises(FormatError, match="not a sharded trajstore dataset"):
        ShardedDataset.open(tmp_path)
    ds = make(tmp_path)
    (ds.path / "trajstore-dataset.json").write_text(json.dumps({"format": "trajstore.dataset", "version": 99}))
    with pytest.raises(FormatError, match="version 99"):
        ShardedDataset.open(ds.path)
    (ds.path / "trajstore-dataset.json").write_text("[1, 2")
    with pytest.raises(FormatError):
        ShardedDataset.open(ds.path)


def test_a_dataset_opened_as_a_buffer_says_what_to_use(tmp_path):
    ds = make(tmp_path)
    with pytest.raises(FormatError, match="is a sharded dataset: read it with ShardedBuffer.load_from"):
        ReplayBuffer.load_from(ds.path)
