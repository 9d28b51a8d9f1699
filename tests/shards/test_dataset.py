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
    with pytest.raises(FormatError, match="is a sharded dataset: its shards are buffer folders in .*ShardedBuffer.load_from"):
        ReplayBuffer.load_from(ds.path)


def test_flush_false_with_a_key_in_a_shard_commits_at_once(tmp_path):
    # the key is checked and committed under the dataset's lock: no other shard can commit it meanwhile
    ds = make(tmp_path)
    with ds.writer("a") as a, ds.writer("b") as b:
        assert not record(a, 0, 0, episode_key="k", flush=False).duplicate
        with ReplayBuffer.load_from(ds.path / "shards" / "a") as reader:
            assert reader.has_episode_key("k")  # on disk already
        assert record(b, 1, 0, episode_key="k", flush=False).duplicate


def test_a_symlinked_shard_is_not_a_shard(tmp_path):
    ds = make(tmp_path)
    with ds.writer("real") as rb:
        record(rb, 0, 0, episode_key="k")
    (ds.path / "shards" / "alias").symlink_to(ds.path / "shards" / "real")
    assert ds.shards == ["real"]
    with ds.reader() as reader:
        assert reader.num_episodes == 1
    with pytest.raises(FormatError, match="symbolic link"):
        ds.writer("alias")


def test_a_shard_that_is_a_ring_or_of_another_space_is_refused_by_the_writer(tmp_path):
    from tests.replay_buffer.test_replay_buffer import make as make_buffer
    ds = make(tmp_path)
    space = fleet_space()
    ReplayBuffer.create(DictStorage, space, cache_path=ds.path / "shards" / "ring", capacity=10,
                        **dict_storage_kwargs_from_space(space)).close()
    with pytest.raises(FormatError, match="a ring"):
        ds.writer("ring")
    make_buffer(ds.path / "shards", name="other").close()
    with pytest.raises(FormatError, match="space is not the template's"):
        ds.writer("other")


def test_a_template_that_is_not_empty_missing_or_a_link_is_refused(tmp_path):
    import shutil
    ds = make(tmp_path)
    with ReplayBuffer.load_from(ds.path / "template", read_only=False) as template:
        template.extend(episode_steps(0, 0))
        template.end_episode()
    with pytest.raises(FormatError, match="template must be an empty, unbounded buffer"):
        ds.writer("a")
    shutil.rmtree(ds.path / "template")
    with pytest.raises(FormatError, match="template .*is missing or a symbolic link"):
        ds.writer("a")
    (ds.path / "template").symlink_to(tmp_path)
    with pytest.raises(FormatError, match="missing or a symbolic link"):
        ds.writer("a")
    assert list((ds.path / "shards").iterdir()) == []


def test_a_failed_shard_copy_leaves_nothing(tmp_path, monkeypatch):
    import shutil
    ds = make(tmp_path)
    real = shutil.copytree

    depth = [0]

    def full_disk(src, dst, *args, **kw):  # shutil recurses through the module's name: only the top call fails
        depth[0] += 1
        try:
            real(src, dst, *args, **kw)  # written, then the disk is full
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            raise OSError(28, "No space left on device")
        return dst

    monkeypatch.setattr(shutil, "copytree", full_disk)
    with pytest.raises(OSError, match="the new shard could not be made"):
        ds.writer("a")
    assert list((ds.path / "shards").iterdir()) == []
    monkeypatch.setattr(shutil, "copytree", real)
    with ds.writer("a") as rb:
        assert len(rb) == 0


def test_a_killed_create_leaves_no_half_made_dataset(tmp_path):
    import subprocess
    import sys
    script = ("import os, sys\n"
              "from tests.shards.test_dataset import make\n"
              "import trajstore._fs as fs\n"
              "real = fs.write_json_atomic\n"
              "def die(*a, **k):\n"
              "    os._exit(9)  # killed before the dataset file is written\n"
              "import trajstore.shards.dataset as d\n"
              "d.write_json_atomic = die\n"
              "from pathlib import Path\n"
              "make(Path(sys.argv[1]))\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 9, out.stderr[-2000:]
    assert not (tmp_path / "fleet").exists()
    ds = make(tmp_path)  # created afresh (the dead run's hidden folder is cleared)
    assert ds.shards == [] and [p.name for p in tmp_path.iterdir()] == ["fleet"]


def test_a_stopped_holder_of_the_key_lock_times_out_with_a_clear_error(tmp_path, monkeypatch):
    import fcntl
    import os

    from trajstore.shards import keys
    ds = make(tmp_path)
    monkeypatch.setattr(keys, "LOCK_TIMEOUT", 0.3)
    fd = os.open(ds.path / "keys.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held, as by a writer stopped in its commit
    try:
        with ds.writer("a") as rb:
            rb.extend(episode_steps(0, 0))
            with pytest.raises(LockedError, match="keys.lock: another writer of the dataset has held the key lock"):
                rb.end_episode(episode_key="k")
            assert rb.num_episodes == 1 and not rb.episodes[0].done  # still open: nothing committed
            os.close(fd)
            fd = None
            assert not rb.end_episode(episode_key="k").duplicate
    finally:
        if fd is not None:
            os.close(fd)


def test_set_episode_data_refuses_a_bad_key_at_once(tmp_path):
    import gymnasium

    from trajstore.errors import InvalidValueError
    from trajstore.recording import RecordEpisodes
    env = RecordEpisodes(gymnasium.make("CartPole-v1"), tmp_path / "rb")
    with pytest.raises(InvalidValueError, match="episode_key must be a str"):
        env.set_episode_data(episode_key=5, task="x")
    env.set_episode_data(episode_key="job/1")
    env.reset(seed=0)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(0)
        done = term or trunc
    env.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert rb.episode(0).data["episode_key"] == "job/1" and "task" not in rb.episode(0).data


def test_has_episode_key_of_a_shard_writer_sees_the_other_shards(tmp_path):
    ds = make(tmp_path)
    with ds.writer("a") as a, ds.writer("b") as b:
        record(a, 0, 0, episode_key="job/1")
        assert b.has_episode_key("job/1") and a.has_episode_key("job/1") and not b.has_episode_key("job/2")


def test_a_recorder_says_when_its_episode_was_a_duplicate(tmp_path):
    import gymnasium

    from trajstore.recording import RecordEpisodes, recorded_space
    space = recorded_space(gymnasium.make("CartPole-v1"))
    ds = ShardedDataset.create(tmp_path / "c", DictStorage, space, **dict_storage_kwargs_from_space(space))
    ends = []
    with ds.writer("robot0") as rb:
        env = RecordEpisodes(gymnasium.make("CartPole-v1"), rb)
        assert env.last_episode_end is None
        for _ in range(2):
            env.set_episode_data(episode_key="job/7")
            env.reset(seed=1)
            done = False
            while not done:
                _, _, term, trunc, _ = env.step(0)
                done = term or trunc
            ends.append(env.last_episode_end)
        env.close()
    assert [e.duplicate for e in ends] == [False, True] and ends[0].id == 0 and ends[1].steps == ends[0].steps


def test_trajstore_info_of_a_dataset_lists_its_shards(tmp_path):
    import json as json_module

    from typer.testing import CliRunner

    from trajstore.cli.main import app
    ds = make(tmp_path)
    with ds.writer("a") as a, ds.writer("b") as b:
        record(a, 0, 0, episode_key="k0")
        record(a, 0, 1)
        b.extend(episode_steps(1, 0))
        b.flush()  # an episode not ended yet
        out = CliRunner().invoke(app, ["info", str(ds.path), "--json"])
        assert out.exit_code == 0, out.output
        info = json_module.loads(out.output)
        assert [(s["name"], s["steps"], s["episodes"], s["keyed"], s["open"]) for s in info["shards"]] == [
            ("a", len(episode_steps(0, 0)["action"]) + len(episode_steps(0, 1)["action"]), 2, 1, False),
            ("b", len(episode_steps(1, 0)["action"]), 1, 0, True)]
        assert [leaf["key"] for leaf in info["leaves"]] == ["observation/camera", "observation/state", "action"]
        out = CliRunner().invoke(app, ["info", str(ds.path)])
        assert out.exit_code == 0 and "sharded dataset, 2 shards" in out.output and "1 with an episode_key" in out.output
        out = CliRunner().invoke(app, ["episodes", str(ds.path)])
        assert out.exit_code != 0 and "lists them; commands take one shard's folder" in out.output


def test_copies_keep_keys_and_a_merge_of_copies_holds_each_key_once(tmp_path):
    from trajstore.ops.copy import copy_episodes as copy_buffer, merge_buffers
    ds = make(tmp_path)
    with ds.writer("a") as a:
        for e in range(3):
            record(a, 0, e, episode_key=f"k{e}")
    shard = ds.path / "shards" / "a"
    copy_buffer(shard, tmp_path / "copy1")
    copy_buffer(shard, tmp_path / "copy2")
    merge_buffers([tmp_path / "copy1", tmp_path / "copy2"], tmp_path / "merged")
    with ReplayBuffer.load_from(tmp_path / "merged") as merged, ReplayBuffer.load_from(shard) as src:
        assert [e.data["episode_key"] for e in merged.episodes] == ["k0", "k1", "k2"]
        np.testing.assert_array_equal(merged[:]["action"], src[:]["action"])
    with pytest.warns(UserWarning, match="episode keys are not kept in a ring copy"):
        copy_buffer(shard, tmp_path / "ring", capacity=100)
    with ReplayBuffer.load_from(tmp_path / "ring") as ring:
        assert ring.num_episodes == 3 and all("episode_key" not in e.data for e in ring.episodes)
