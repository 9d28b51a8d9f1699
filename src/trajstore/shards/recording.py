"""Recording into a sharded dataset from many processes: one shard per sub-env worker.

A subprocess vector env (``gymnasium.vector.AsyncVectorEnv``) runs each sub-env in its own process;
:func:`record_in_shards` turns its env factories into ones that, inside that process, open the
sub-env's shard (``env0``, ``env1``, ... by default) and record it with
:class:`~trajstore.recording.RecordEpisodes`::

    space = recorded_space(gymnasium.make("CartPole-v1"))
    ShardedDataset.create("collect", DictStorage, space, **dict_storage_kwargs_from_space(space))
    envs = gymnasium.vector.AsyncVectorEnv(record_in_shards("collect", [lambda: gymnasium.make("CartPole-v1")] * 4))

In one process, a :class:`~trajstore.recording.RecordVectorEpisodes` writes one shard:
``RecordVectorEpisodes(envs, ShardedDataset.open("collect").writer("collector0"))``. Either way,
``set_episode_data(episode_key=...)`` on a recorder gives the episode a key (``end_episode``'s keyword).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium

from trajstore.recording.episodes import RecordEpisodes
from trajstore.replay_buffer import ReplayBuffer
from trajstore.shards.dataset import ShardedDataset
from trajstore.shards.layout import check_shard_name


class _ClosesShard(gymnasium.Wrapper):
    """Closes the shard's writer after the recorder (which ends an open episode) and the env."""

    def __init__(self, env: RecordEpisodes, shard: ReplayBuffer):
        super().__init__(env)
        self._shard = shard

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._shard.close()


class ShardRecordingEnv:
    """A picklable env factory: ``env_fn()`` recorded into shard ``shard`` of the dataset at ``dataset``
    (opened for writing in the process that calls it). ``record_kwargs`` go to ``RecordEpisodes``
    (``render_key``, ``info_keys``, ``image_keys``, ``episode_data``; not ``capacity``/``routing``: the
    dataset's template fixes the layout)."""

    def __init__(self, dataset: str | os.PathLike, shard: str, env_fn: Callable[[], Any], **record_kwargs: Any):
        ShardedDataset.open(dataset)  # not a dataset: a FormatError here, not in a worker process
        self.dataset, self.shard = Path(dataset), check_shard_name(shard)
        self.env_fn, self.record_kwargs = env_fn, record_kwargs

    def __call__(self) -> gymnasium.Env:
        env = self.env_fn()
        shard = ShardedDataset.open(self.dataset).writer(self.shard)
        try:
            return _ClosesShard(RecordEpisodes(env, shard, **self.record_kwargs), shard)
        except BaseException:
            shard.close()
            env.close()
            raise


def record_in_shards(dataset: str | os.PathLike, env_fns: Sequence[Callable[[], Any]], *, prefix: str = "env",
                     **record_kwargs: Any) -> list[ShardRecordingEnv]:
    """Env factories for a vector env: ``env_fns[i]`` recorded into shard ``f"{prefix}{i}"`` of ``dataset``.

    Raises:
        FormatError: ``dataset`` is not a sharded dataset (``ShardedDataset.create`` makes one).
        ValueError: ``prefix`` makes a bad shard name.
    """
    return [ShardRecordingEnv(dataset, f"{prefix}{i}", fn, **record_kwargs) for i, fn in enumerate(env_fns)]
