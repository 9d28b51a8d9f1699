"""What a sharded dataset holds: its shards (steps, episodes, keyed episodes, an episode left open) and,
from its template, its leaves and their storages (:func:`~trajstore.ops.info.describe`)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from trajstore.ops.info import BufferInfo, describe
from trajstore.replay_buffer.data_columns import MISSING
from trajstore.replay_buffer.episode_keys import KEY_FIELD
from trajstore.shards import ShardedBuffer


@dataclass
class ShardInfo:
    name: str
    steps: int
    episodes: int
    keyed: int  # episodes with an episode_key
    open: bool  # its last episode is not ended (being recorded, or left by a killed writer)


@dataclass
class DatasetInfo:
    path: str
    shards: list[ShardInfo]
    template: BufferInfo  # the leaves and storage layout every shard has

    @property
    def steps(self) -> int:
        return sum(s.steps for s in self.shards)

    @property
    def episodes(self) -> int:
        return sum(s.episodes for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "steps": self.steps, "episodes": self.episodes,
                "shards": [asdict(s) for s in self.shards], "leaves": self.template.to_json()["leaves"]}


def describe_dataset(path: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> DatasetInfo:
    """Open the dataset at ``path`` (a folder, or the URL of a pushed one) read-only and summarise it; reads
    each shard's episode log, no step data.

    Raises:
        FormatError: not a dataset; the errors of ``ShardedBuffer.load_from``.
    """
    with ShardedBuffer.load_from(path, storage_options=storage_options) as reader:
        shards = []
        for name, rb in reader.shards.items():
            episodes = rb.episodes
            keys = episodes.data_values(KEY_FIELD)
            last = episodes[-1] if len(episodes) else None
            shards.append(ShardInfo(name, len(rb), len(episodes), sum(k is not MISSING for k in keys),
                                    last is not None and not (last.done or last.interrupted)))
        where = reader.cache_path
    template = describe(f"{str(where).rstrip('/')}/template", storage_options)
    return DatasetInfo(str(path), shards, template)
