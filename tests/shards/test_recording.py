"""Recording a subprocess vector env into a sharded dataset: each worker process writes its own shard, and
what each shard holds is what that sub-env did (its actions, its episode boundaries)."""

import gymnasium
import numpy as np
import pytest

from trajstore.errors import FormatError
from trajstore.recording import RecordVectorEpisodes, recorded_space
from trajstore.replay_buffer import ReplayBuffer
from trajstore.shards import ShardedDataset
from trajstore.shards.recording import record_in_shards
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space


def cartpole():
    return gymnasium.make("CartPole-v1")


def make_dataset(path):
    space = recorded_space(cartpole())
    return ShardedDataset.create(path, DictStorage, space, **dict_storage_kwargs_from_space(space))


def test_each_async_worker_writes_its_own_shard(tmp_path):
    ds = make_dataset(tmp_path / "collect")
    n_envs, steps = 3, 120
    envs = gymnasium.vector.AsyncVectorEnv(record_in_shards(ds.path, [cartpole] * n_envs), context="spawn")
    rng = np.random.default_rng(0)
    sent = [[] for _ in range(n_envs)]  # actions each sub-env stepped with (not the autoreset steps)
    resetting = np.zeros(n_envs, bool)
    envs.reset(seed=10)
    for _ in range(steps):
        actions = rng.integers(0, 2, n_envs)
        _, _, term, trunc, _ = envs.step(actions)
        for i in range(n_envs):
            if not resetting[i]:
                sent[i].append(int(actions[i]))
        resetting = term | trunc  # NEXT_STEP autoreset: the next step of these only resets them
    envs.close()
    assert ds.shards == [f"env{i}" for i in range(n_envs)]
    for i in range(n_envs):
        with ReplayBuffer.load_from(ds.path / "shards" / f"env{i}") as rb:
            assert rb[:]["action"].tolist() == sent[i]
            episodes = list(rb.episodes)
            assert episodes[0].data["seed"] == 10 + i
            assert all(e.done for e in episodes[:-1])
            assert episodes[-1].done or episodes[-1].data.get("interrupted_by") == "close"
            assert sum(len(e) for e in episodes) == len(rb) == len(sent[i])


def test_a_vector_recorder_in_one_process_writes_one_shard_with_keys(tmp_path):
    ds = make_dataset(tmp_path / "collect")
    envs = gymnasium.vector.SyncVectorEnv([cartpole] * 2)
    with ds.writer("collector0") as rb:
        rec = RecordVectorEpisodes(envs, rb)
        rec.reset(seed=0)
        for _ in range(60):
            rec.step(np.zeros(2, np.int64))
        rec.close()
        assert rb.num_episodes >= 2 and all(e.data["env_index"] in (0, 1) for e in rb.episodes)
    assert ds.shards == ["collector0"]


def test_an_episode_key_set_as_episode_data_is_the_episodes_key(tmp_path):
    from trajstore.recording import RecordEpisodes
    ds = make_dataset(tmp_path / "collect")
    with ds.writer("robot0") as rb:
        env = RecordEpisodes(cartpole(), rb)
        for attempt in range(2):  # the second is a retry of the same job
            env.set_episode_data(episode_key="job/7", task="balance")
            env.reset(seed=1)
            done = False
            while not done:
                _, _, term, trunc, _ = env.step(0)
                done = term or trunc
        env.close()
        assert rb.num_episodes == 1 and rb.episode(0).data["episode_key"] == "job/7"


def test_record_in_shards_refuses_what_is_not_a_dataset(tmp_path):
    with pytest.raises(FormatError, match="not a sharded trajstore dataset"):
        record_in_shards(tmp_path, [cartpole])
    ds = make_dataset(tmp_path / "collect")
    with pytest.raises(ValueError, match="shard name"):
        record_in_shards(ds.path, [cartpole], prefix="../x")
