"""Many writers, one dataset: a folder of shards (:mod:`~trajstore.shards.layout`), each an ordinary buffer
folder with its own writer.

:class:`ShardedDataset` makes the folder and gives each writer process its shard (a ``ReplayBuffer``);
:class:`ShardedBuffer` (:mod:`~trajstore.shards.reader`) reads every shard as one read-only buffer with
global episode and step numbering. ``end_episode(episode_key=...)`` commits an episode once in the whole
dataset (:mod:`~trajstore.shards.keys`).
"""

from trajstore.shards.dataset import ShardedDataset
from trajstore.shards.layout import is_dataset
from trajstore.shards.reader import ShardedBuffer

__all__ = ["ShardedBuffer", "ShardedDataset", "is_dataset"]
