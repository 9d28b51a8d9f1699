"""``ReplayBuffer.stats()``: normalisation statistics of the held steps, the committed ones or computed
from the data. The bookkeeping of the accumulator is in :mod:`~trajstore.replay_buffer.stats_keeper`,
the per-leaf maths in :mod:`~trajstore.replay_buffer.leaf_stats`.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np

from trajstore.errors import UnknownLeafError
from trajstore.replay_buffer.leaf_stats import has_stats
from trajstore.replay_buffer.metadata import read_meta
from trajstore.replay_buffer.reads import BufferReads
from trajstore.replay_buffer.stats_keeper import RangeStats, StatsKeeper
from trajstore.replay_buffer.view import MAX_READ_ATTEMPTS, FolderView, View
from trajstore.replay_buffer.writer import BufferWriter
from trajstore.spaces import Space, tree

#: Bytes of steps read at a time when statistics are computed from the data.
READ_CHUNK_BYTES = 64 << 20


class BufferStatistics:
    """The statistics of one buffer: a writer's accumulator, or a reader's committed copy (cached per view)."""

    def __init__(self, space: Space, keeper: StatsKeeper, reads: BufferReads):
        self.space, self.keeper, self.reads = space, keeper, reads
        self._cached: tuple[Any, RangeStats] | None = None  # a reader's: (view key, statistics)

    def of_writer(self, writer: BufferWriter) -> RangeStats:
        """Flush, then the live accumulator if it covers the held steps, else computed and committed."""
        writer.flush()
        live = self.keeper.live
        if live is not None and live.covers(writer.appended):
            return live.copy()
        computed = self.compute()
        self.keeper.replace(computed)
        writer.commit()
        return computed.copy()

    def of_reader(self, views: FolderView | None) -> RangeStats:
        """The statistics the writer committed for the reader's view, else computed from the data."""
        if views is None:
            return self.compute()
        key = (views.current().first_step, views.current().ring.appended, views.signature)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        ranged = None
        for _ in range(MAX_READ_ATTEMPTS):  # the writer may replace stats.json between our reads of the two files
            ranged = self.keeper.load(views.folder, read_meta(views.folder), views.current().ring)
            if ranged is not None or not views.refresh():
                break
            key = (views.current().first_step, views.current().ring.appended, views.signature)
        if ranged is None:
            ranged = self.compute()
        self._cached = (key, ranged)
        return ranged

    def compute(self) -> RangeStats:
        """Statistics of the held steps, read in chunks of about :data:`READ_CHUNK_BYTES`, all under one view
        (read again from the start if the writer reused any of their slots meanwhile)."""
        leaves = tree.leaves(self.space)
        step_bytes = sum(int(np.prod(getattr(leaf, "shape", ()), dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
                         for _, leaf in leaves)
        chunk = max(1, READ_CHUNK_BYTES // max(1, step_bytes))
        result: list[RangeStats] = []

        def start(view: View) -> None:
            result[:] = [RangeStats(self.space, view.first_step, view.first_step)]

        self.reads.each_chunk(chunk, lambda values, n: result[0].add(values, n, self.keeper.indices), start,
                              "computing statistics")
        return result[0]


def stat_names(space: Space, keys: str | Iterable[str] | None) -> list[str]:
    """The numeric leaf names that ``keys`` (leaf or sub-dict names; None: every numeric leaf) stand for.

    Raises:
        UnknownLeafError: a name that is not in the space.
        ValueError: a named leaf has no statistics (text, bool).
    """
    numeric = {tree.path_name(p): leaf for p, leaf in tree.leaves(space) if has_stats(leaf)}
    if keys is None:
        return list(numeric)
    out: list[str] = []
    for name in [keys] if isinstance(keys, str) else list(keys):
        path = tree.parse_name(name)
        try:
            sub = tree.subspace(space, path)
        except KeyError as exc:
            raise UnknownLeafError(exc.args[0] if exc.args else name) from None
        names = [tree.path_name((*path, *p)) for p, _ in tree.leaves(sub)]
        picked = [n for n in names if n in numeric]
        if not picked:
            raise ValueError(f"leaf {name!r} has no statistics (only numeric Box leaves have; "
                             f"text and bool leaves are skipped)")
        out += [n for n in picked if n not in out]
    return out


def stats_of(path: str | os.PathLike, keys: str | Iterable[str] | None = None, *,
             storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """``ReplayBuffer.stats(keys)`` of the buffer folder at ``path`` (or the URL of a pushed buffer, with
    fsspec ``storage_options``), opened read-only.

    Raises:
        FormatError: not a buffer folder; and the errors of ``ReplayBuffer.stats``.
    """
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    with ReplayBuffer.load_from(path, read_only=True, storage_options=storage_options) as rb:
        return rb.stats(keys)
