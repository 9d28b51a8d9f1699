"""Statistics of a sharded dataset: the shards' own (committed, or computed by each shard from its data)
merged leaf by leaf. Count, min, max, mean and std are those of the union of the shards' steps (to float64
rounding: moments merge by Chan et al.'s rule); quantiles come from the merged histograms, within their
``quantile_error`` (the widest bin width of the merge). No data I/O here.
"""

from __future__ import annotations

from typing import Any, Iterable

from trajstore.replay_buffer.leaf_stats import LeafAccumulator, has_stats
from trajstore.replay_buffer.stats_keeper import RangeStats
from trajstore.spaces import Space, tree


def merged_stats(space: Space, parts: Iterable[Any], total: int) -> RangeStats:
    """One :class:`RangeStats` over ``total`` steps from the ``RangeStats`` of each shard (``parts``).

    Raises:
        ValueError: a shard's statistics of another shape (a space that differs).
    """
    leaves = {tree.path_name(path): LeafAccumulator(leaf) for path, leaf in tree.leaves(space) if has_stats(leaf)}
    for ranged in parts:
        for name, acc in ranged.leaves.items():
            leaves[name].merge(acc)
    return RangeStats(space, 0, total, leaves)
