"""A sharded dataset pushed to S3 (moto) and pulled back: every shard as it was, the dataset file last."""

import json

import numpy as np
import pytest

from tests.shards.test_exactly_once import episode_steps, fleet_space
from trajstore.errors import FormatError, StorageExistsError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.shards import ShardedDataset
from trajstore.shards.remote import is_remote_dataset, pull_dataset, push_dataset, remote_shard_names
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def make_fleet(path):
    space = fleet_space()
    ds = ShardedDataset.create(path, DictStorage, space, **dict_storage_kwargs_from_space(space))
    for w in range(3):
        with ds.writer(f"robot{w}") as rb:
            for e in range(2 + w):
                rb.extend(episode_steps(w, e))
                rb.end_episode(episode_key=f"robot{w}/{e}")
    return ds


def test_push_then_pull_a_dataset(tmp_path, bucket_url, storage_options):
    ds = make_fleet(tmp_path / "fleet")
    report = push_dataset(ds.path, bucket_url, storage_options)
    assert sorted(report.shards) == ["robot0", "robot1", "robot2"]
    assert report.steps == sum(len(episode_steps(w, e)["action"]) for w in range(3) for e in range(2 + w))
    assert "3 shards" in report.line()
    assert is_remote_dataset(bucket_url, storage_options)
    assert remote_shard_names(bucket_url, storage_options) == ["robot0", "robot1", "robot2"]
    with ReplayBuffer.load_from(f"{bucket_url}/shards/robot1", storage_options=storage_options) as rb:
        assert [e.data["episode_key"] for e in rb.episodes] == ["robot1/0", "robot1/1", "robot1/2"]
        np.testing.assert_array_equal(rb.get_episode(2)["observation"]["camera"],
                                      episode_steps(1, 2)["observation"]["camera"])
    out = tmp_path / "pulled"
    report = pull_dataset(bucket_url, out, storage_options)
    assert sorted(report.shards) == ["robot0", "robot1", "robot2"] and report.bytes > 0
    assert report.line().startswith(f"pulled dataset {bucket_url} into {out}: 3 shards")
    pulled = ShardedDataset.open(out)
    assert pulled.shards == ds.shards
    for name in ds.shards:
        with ReplayBuffer.load_from(ds.path / "shards" / name) as a, ReplayBuffer.load_from(out / "shards" / name) as b:
            np.testing.assert_array_equal(a[:]["action"], b[:]["action"])
            assert list(a.episodes) == list(b.episodes)
    with pulled.writer("robot0") as rb:  # a pulled dataset is writable, and keys still count
        rb.extend(episode_steps(0, 0))
        assert rb.end_episode(episode_key="robot2/3").duplicate
    with pytest.raises(StorageExistsError):
        pull_dataset(bucket_url, out, storage_options)


def test_a_second_push_sends_only_what_changed(tmp_path, bucket_url, storage_options):
    ds = make_fleet(tmp_path / "fleet")
    push_dataset(ds.path, bucket_url, storage_options)
    with ds.writer("robot3") as rb:
        rb.extend(episode_steps(3, 0))
        rb.end_episode(episode_key="robot3/0")
    again = push_dataset(ds.path, bucket_url, storage_options)
    assert [r.unchanged for r in again.shards.values()] == [True, True, True, False]
    assert remote_shard_names(bucket_url, storage_options)[-1] == "robot3"


def test_a_url_without_a_dataset_or_with_a_bad_file_is_refused(tmp_path, bucket_url, storage_options, s3):
    with pytest.raises(FormatError, match="holds no sharded trajstore dataset"):
        remote_shard_names(bucket_url, storage_options)
    root = bucket_url.removeprefix("s3://")
    s3.pipe_file(f"{root}/trajstore-dataset.json", json.dumps({"format": "trajstore.dataset", "version": 1,
                                                              "shards": ["../etc"]}).encode())
    with pytest.raises(FormatError, match="shard name"):
        remote_shard_names(bucket_url, storage_options)
    s3.pipe_file(f"{root}/trajstore-dataset.json", json.dumps({"format": "trajstore.dataset", "version": 1,
                                                              "shards": ["a", "b", "a"]}).encode())
    with pytest.raises(FormatError, match="a shard is listed twice"):
        remote_shard_names(bucket_url, storage_options)
    s3.pipe_file(f"{root}/trajstore-dataset.json", b"{not json")
    with pytest.raises(FormatError):
        pull_dataset(bucket_url, tmp_path / "out", storage_options)
    assert not (tmp_path / "out").exists()
    with pytest.raises(FormatError, match="not a sharded trajstore dataset"):
        push_dataset(tmp_path, bucket_url, storage_options)


def test_the_push_and_pull_commands_take_a_dataset(tmp_path, bucket_url, storage_options):
    from typer.testing import CliRunner

    from tests.remote.test_cli_urls import _options
    from trajstore.cli.main import app

    ds = make_fleet(tmp_path / "fleet")
    out = CliRunner().invoke(app, ["push", str(ds.path), bucket_url, "--no-progress", *_options(storage_options)])
    assert out.exit_code == 0, out.output
    assert f"pushed dataset {bucket_url}: 3 shards" in out.output
    out = CliRunner().invoke(app, ["pull", bucket_url, str(tmp_path / "back"), "--no-progress",
                                   *_options(storage_options)])
    assert out.exit_code == 0, out.output
    assert "3 shards" in out.output and ShardedDataset.open(tmp_path / "back").shards == ds.shards


def test_a_pushed_dataset_reads_from_its_url_as_from_the_folder(tmp_path, bucket_url, storage_options):
    from trajstore.shards import ShardedBuffer
    from trajstore.training.torch import ReplayBufferDataset

    ds = make_fleet(tmp_path / "fleet")
    push_dataset(ds.path, bucket_url, storage_options)
    with ShardedBuffer.load_from(ds.path) as local, \
            ShardedBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
        assert remote.shard_names == local.shard_names == ("robot0", "robot1", "robot2")
        assert len(remote) == len(local) and list(remote.episodes) == list(local.episodes)
        np.testing.assert_array_equal(remote[:]["observation"]["camera"], local[:]["observation"]["camera"])
        assert remote.find_episode("robot2/3") == local.find_episode("robot2/3") == local.num_episodes - 1
        rng = np.random.default_rng(0)
        windows = remote.sample_windows(8, 2, rng=rng)
        assert windows["action"].shape == (8, 2, 2)
    with ds.writer("robot3") as rb:  # a new shard, pushed: a refresh of the URL's reader sees it
        rb.extend(episode_steps(3, 0))
        rb.end_episode(episode_key="robot3/0")
    with ShardedBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
        push_dataset(ds.path, bucket_url, storage_options)
        assert remote.refresh() and remote.shard_names[-1] == "robot3"
        assert remote.find_episode("robot3/0") == remote.num_episodes - 1
    pytest.importorskip("torch")
    data = ReplayBufferDataset(bucket_url, storage_options=storage_options)
    assert len(data) == len(ShardedBuffer.load_from(ds.path))


def test_a_dataset_pushed_to_a_local_folder_reads_back_and_remote_push_takes_it(tmp_path):
    from trajstore.remote import pull, push
    from trajstore.shards import ShardedBuffer

    ds = make_fleet(tmp_path / "fleet")
    report = push(ds.path, str(tmp_path / "bucket"))  # trajstore.remote.push of a dataset folder
    assert sorted(report.shards) == ["robot0", "robot1", "robot2"]
    for where in (tmp_path / "bucket", (tmp_path / "bucket").as_uri()):
        with ShardedBuffer.load_from(where) as remote, ShardedBuffer.load_from(ds.path) as local:
            assert list(remote.episodes) == list(local.episodes)
            np.testing.assert_array_equal(remote[:]["action"], local[:]["action"])
    back = pull(str(tmp_path / "bucket"), tmp_path / "back")
    assert sorted(back.shards) == ["robot0", "robot1", "robot2"]
    assert ShardedDataset.open(tmp_path / "back").shards == ds.shards
