"""ShardedBuffer for training: the torch datasets over a DataLoader with 2 workers, and Ray Data."""

import multiprocessing as mp

import numpy as np
import pytest

from tests.shards.shard_data import Shard, make_dataset, union
from trajstore.shards import ShardedBuffer

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from trajstore.training.torch import ReplayBufferDataset  # noqa: E402


@pytest.fixture
def dataset(tmp_path):
    root = make_dataset(tmp_path / "ds")
    shards = [Shard(root, "a", 0), Shard(root, "b", 1), Shard(root, "c", 2)]
    for shard, lengths in zip(shards, ([4, 3], [5], [2, 6])):
        for n in lengths:
            shard.episode(n)
    shards[1].episode(3, end=False)  # an open episode in the middle shard
    for s in shards:
        s.close()
    return root, shards


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_steps_over_two_workers_read_the_union(dataset, context):
    root, shards = dataset
    u = union(shards)
    ds = ReplayBufferDataset(str(root))  # the folder of a dataset opens as one buffer
    assert isinstance(ds.buffer, ShardedBuffer) and len(ds) == 23
    loader = DataLoader(ds, batch_size=5, num_workers=2, multiprocessing_context=mp.get_context(context))
    got = np.concatenate([b["observation"]["state"].numpy() for b in loader])
    np.testing.assert_array_equal(got, u["observation"]["state"])
    ds.buffer.close()


def test_windows_over_two_workers_equal_the_readers_windows(dataset):
    root, _ = dataset
    delta = {"observation/state": [-1, 0], "action": [0, 1, 2]}
    with ShardedBuffer.load_from(root) as r:
        ds = ReplayBufferDataset(r, delta_indices=delta)
        assert len(ds) == r.count_anchors(delta) == 23
        want, want_pad = r.windows_at(np.arange(len(ds)), r.window_request(delta))
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=mp.get_context("fork"))
        batches = list(loader)
        state = np.concatenate([b["observation"]["state"].numpy() for b in batches])
        pad = np.concatenate([b["is_pad"]["action"].numpy() for b in batches])
        np.testing.assert_array_equal(state, want["observation"]["state"])
        np.testing.assert_array_equal(pad, want_pad["action"])
        # every window stays inside one episode of one shard
        assert (state[:, 0, :2] == state[:, 1, :2]).all()


def test_ray_rows_equal_the_readers_steps(dataset, local_ray):
    from trajstore.training.ray import read_trajstore

    root, shards = dataset
    u = union(shards)
    ds = read_trajstore(str(root), override_num_blocks=2, min_task_rows=4)
    assert ds.count() == 23
    rows = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    got = {k: np.concatenate([b[k] for b in rows]) for k in rows[0]}
    order = np.argsort(got["index"])
    np.testing.assert_array_equal(got["index"][order], np.arange(23))
    np.testing.assert_array_equal(got["observation/state"][order], u["observation"]["state"])
    np.testing.assert_array_equal(got["episode"][order], np.repeat(np.arange(6), [4, 3, 5, 3, 2, 6]))
