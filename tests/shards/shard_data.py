"""Sharded dataset folders built by hand for the reader's tests: plain buffer folders under
``<root>/shards/<name>/`` (what the dataset's writer makes), each step's values telling its shard,
episode and step, and the numpy union to compare reads with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.shards.layout import DATASET_FILE
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({
    "observation": DictSpace({"state": BoxSpace(-1e9, 1e9, (3,), np.float64),
                              "count": BoxSpace(0, 10**6, (), np.int32)}),
    "action": BoxSpace(-1e9, 1e9, (2,), np.float32),
    "reward": BoxSpace(-1e9, 1e9, (), np.float32),
    "terminated": BinarySpace(),
    "truncated": BinarySpace(),
})


def make_dataset(root: Path, template: bool = True, space=SPACE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / DATASET_FILE).write_text(json.dumps({"format": "trajstore.dataset", "version": 1}))
    (root / "shards").mkdir(exist_ok=True)
    if template:
        ReplayBuffer.create(DictStorage, space, cache_path=root / "template",
                            **dict_storage_kwargs_from_space(space)).close()
    return root


def steps(shard: int, episode: int, n: int, rng: np.random.Generator) -> dict:
    """``n`` steps whose ``state`` is ``(shard, episode, t)`` and whose other leaves are random."""
    t = np.arange(n)
    state = np.stack([np.full(n, shard), np.full(n, episode), t], axis=1).astype(np.float64)
    term = np.zeros(n, bool)
    term[-1] = True
    return {"observation": {"state": state, "count": (shard * 100000 + episode * 1000 + t).astype(np.int32)},
            "action": rng.normal(size=(n, 2)).astype(np.float32) * (shard + 1),
            "reward": rng.normal(size=n).astype(np.float32) + shard,
            "terminated": term, "truncated": np.zeros(n, bool)}


def final(shard: int, episode: int) -> dict:
    return {"state": np.array([shard, episode, -1.0]), "count": np.int32(-0 + 999)}


class Shard:
    """One shard's writer and what it wrote (``batches``: every step, in order)."""

    def __init__(self, root: Path, name: str, index: int, space=SPACE, seed: int = 0):
        self.name, self.index = name, index
        self.rb = ReplayBuffer.create(DictStorage, space, cache_path=root / "shards" / name,
                                      **dict_storage_kwargs_from_space(space))
        self.rng = np.random.default_rng(seed + 17 * index)
        self.batches: list[dict] = []
        self.lengths: list[int] = []
        self.episodes = 0

    def episode(self, n: int, *, with_final: bool = True, end: bool = True) -> None:
        batch = steps(self.index, self.episodes, n, self.rng)
        self.rb.extend(batch)
        self.batches.append(batch)
        self.lengths.append(n)
        if end:
            self.rb.end_episode(final(self.index, self.episodes) if with_final else None,
                                episode_key=f"{self.name}/{self.episodes}", n=n)
            self.episodes += 1
        else:
            self.rb.flush()

    def close(self) -> None:
        self.rb.close()


def concat(batches: list[dict]) -> dict:
    """The leaves of ``batches`` concatenated, nested like them."""
    first = batches[0]
    if isinstance(first, dict):
        return {k: concat([b[k] for b in batches]) for k in first}
    return np.concatenate(batches)


def union(shards: list[Shard]) -> dict:
    return concat([b for s in shards for b in s.batches])


def assert_tree_equal(a, b) -> None:
    if isinstance(b, dict):
        assert set(a) == set(b)
        for k in b:
            assert_tree_equal(a[k], b[k])
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def take(tree, index):
    if isinstance(tree, dict):
        return {k: take(v, index) for k, v in tree.items()}
    return tree[index]
