"""A copy of a buffer opened from a URL (unpickled elsewhere, a Ray read task) reads the snapshot its
original read, even after a push replaced it with other data; gone past retention, it says so."""

from __future__ import annotations

import pickle
import shutil

import numpy as np
import pytest

from trajstore.errors import FormatError
from trajstore.remote import push
from trajstore.replay_buffer import ReplayBuffer

from tests.remote.conftest import make_buffer, record


def _replace_with_other_data(tmp_path, url, storage_options, **push_kwargs):
    """Push a folder of the same length but other steps (episodes recorded from other numbers)."""
    other = make_buffer(tmp_path / "other", episodes=0)
    record(other, 50, 2)
    other.close()
    push(tmp_path / "other", url, storage_options, **push_kwargs)


@pytest.fixture
def first(tmp_path, bucket_url, storage_options):
    with make_buffer(tmp_path / "rb", episodes=2) as rb:
        actions = rb[:]["action"].copy()
    push(tmp_path / "rb", bucket_url, storage_options)
    return actions


def test_an_unpickled_copy_reads_the_snapshot_of_its_original(tmp_path, bucket_url, storage_options, first):
    rb = ReplayBuffer.load_from(bucket_url, storage_options=storage_options)
    frame = rb[5]["observation"]["rgb"]
    _replace_with_other_data(tmp_path, bucket_url, storage_options)
    blob = pickle.dumps(rb)
    shutil.rmtree(rb._remote.path)  # as in a process on another machine: no mirror to reuse
    copy = pickle.loads(blob)
    try:
        # Before: the copy opened the URL's current manifest and read the other folder's steps.
        np.testing.assert_array_equal(copy[:]["action"], first)
        np.testing.assert_array_equal(copy[5]["observation"]["rgb"], frame)
    finally:
        copy.close()
        rb.close()
    with ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as now:
        assert not np.array_equal(now[:]["action"], first)  # the URL itself does read the new push


def test_a_copy_of_a_snapshot_past_retention_says_so(tmp_path, bucket_url, storage_options, first):
    rb = ReplayBuffer.load_from(bucket_url, storage_options=storage_options)
    _replace_with_other_data(tmp_path, bucket_url, storage_options, retain_seconds=0)
    record_more = ReplayBuffer.load_from(tmp_path / "other", read_only=False)
    record(record_more, 60, 1)
    record_more.close()
    push(tmp_path / "other", bucket_url, storage_options, retain_seconds=0)  # generation 1 out of retention
    blob = pickle.dumps(rb)
    shutil.rmtree(rb._remote.path)
    with pytest.raises(FormatError, match="generation 1.*no longer kept"):
        pickle.loads(blob)
    rb.close()


def test_ray_tasks_read_the_snapshot_the_driver_planned(local_ray, tmp_path, bucket_url, storage_options, first):
    ray_data = pytest.importorskip("trajstore.training.ray")
    ds = ray_data.read_trajstore(bucket_url, columns=["action"], storage_options=storage_options, min_task_rows=8,
                                 override_num_blocks=3)
    _replace_with_other_data(tmp_path, bucket_url, storage_options)  # same row count, other steps
    got = np.concatenate([b["action"] for b in ds.iter_batches(batch_size=None, batch_format="numpy")])
    # Tasks reopen the URL: before, each read the push current when it ran (here the other folder's steps).
    order = lambda a: a[np.lexsort(a.T[::-1])]  # noqa: E731  (Ray gives the blocks in any order)
    np.testing.assert_array_equal(order(got), order(first))
