"""Sharded datasets: many writers (collector processes, robots), one dataset.

:class:`ShardedDataset` makes the folder and gives each writer its shard (a ``ReplayBuffer``);
``ShardedBuffer`` reads every shard as one read-only buffer with global episode and step numbering.
``end_episode(episode_key=...)`` commits an episode once in the whole dataset (:mod:`trajstore.shards.keys`).
"""

from typing import Any

from trajstore.shards.dataset import ShardedDataset
from trajstore.shards.layout import is_dataset

__all__ = ["ShardedBuffer", "ShardedDataset", "is_dataset"]


def __getattr__(name: str) -> Any:
    if name == "ShardedBuffer":  # the reader imports the training API; loaded when asked for
        from trajstore.shards.reader import ShardedBuffer

        return ShardedBuffer
    raise AttributeError(f"module 'trajstore.shards' has no attribute {name!r}")
