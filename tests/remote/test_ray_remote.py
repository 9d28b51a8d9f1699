"""Ray Data reads a published buffer straight from the S3 endpoint: the same rows as a local read."""

import numpy as np
import pytest

from tests.remote.conftest import make_buffer
from trajstore.remote import push
from trajstore.replay_buffer import ReplayBuffer

pytest.importorskip("ray", reason="ray is not installed (pip install trajstore[ray]; CI installs it)")
from trajstore.training.ray import read_trajstore  # noqa: E402


def test_ray_data_from_a_bucket_counts_and_sums_equal_a_local_read(local_ray, tmp_path, bucket_url, storage_options):
    rb = make_buffer(tmp_path / "rb", episodes=4)
    rb.close()
    push(tmp_path / "rb", bucket_url, storage_options)
    columns = ["observation/rgb", "observation/joints", "reward"]
    ds = read_trajstore(bucket_url, columns=columns, storage_options=storage_options, min_task_rows=8,
                        override_num_blocks=3)
    with ReplayBuffer.load_from(tmp_path / "rb") as local:
        want = local[:]
    assert ds.count() == len(want["reward"]) == 48
    batches = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    got = {k: np.concatenate([b[k] for b in batches]) for k in columns}
    assert float(got["reward"].sum()) == float(want["reward"].sum())
    np.testing.assert_array_equal(np.sort(got["observation/joints"].sum(axis=1)),
                                  np.sort(want["observation"]["joints"].sum(axis=1)))
    # JPEG frames: the same bytes decoded the same way, so the pixel sums match exactly.
    assert int(got["observation/rgb"].astype(np.int64).sum()) == int(want["observation"]["rgb"].astype(np.int64).sum())

    windows = read_trajstore(bucket_url, columns=["reward"], window={"reward": [-1, 0]},
                             storage_options=storage_options, min_task_rows=8)
    rows = windows.take_all()
    assert len(rows) == 48 and all(r["reward"].shape == (2,) for r in rows)
