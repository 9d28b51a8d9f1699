"""``ReplayBuffer.stats()``: normalisation statistics of the held steps, and computing them from
the data when none are committed. :class:`StatsMethods` is mixed into ``ReplayBuffer``; the
bookkeeping is in :mod:`~trajstore.replay_buffer.stats_keeper`, the per-leaf maths in
:mod:`~trajstore.replay_buffer.leaf_stats`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from trajstore.errors import StaleReadError
from trajstore.replay_buffer.leaf_stats import LeafStats, has_stats
from trajstore.replay_buffer.metadata import read_meta
from trajstore.replay_buffer.stats_keeper import RangeStats
from trajstore.spaces import tree
from trajstore.storages._selection import span

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

#: Bytes of steps read at a time when statistics are computed from the data.
READ_CHUNK_BYTES = 64 << 20
#: A reader of a live ring recomputes at most this many times when the writer drops steps meanwhile.
MAX_COMPUTE_ATTEMPTS = 8


class StatsMethods:
    """Statistics of a :class:`~trajstore.replay_buffer.ReplayBuffer` (see the module docstring)."""

    def stats(self: "ReplayBuffer", keys: str | Iterable[str] | None = None) -> dict[str, LeafStats]:
        """Per-leaf statistics over the steps held: name (``"observation/pixels"``) -> :class:`LeafStats`
        (``count, min, max, mean, std, q01, q10, q50, q90, q99``, float64; per channel, shape ``(C,)``,
        for image leaves, per element otherwise; quantiles within ``quantile_error`` of ``np.quantile``).

        Text and bool leaves have none and are skipped. A writer first flushes (so the statistics it
        returns are committed too); a reader gets those the writer committed for its view. When none
        cover the held steps (a ring dropped steps since they were accumulated, a folder written by
        an older trajstore), they are computed from the data: every held step is read (frames decoded),
        once per change of the view; a writer then commits them for its readers.

        Args:
            keys: leaf or sub-dict names (``"observation"`` takes its numeric leaves); None: every numeric leaf.

        Raises:
            KeyError: a name that is not in the space.
            ValueError: a named leaf has no statistics (text, bool).
            StaleReadError: a reader whose writer kept overwriting the steps being read.
        """
        self._check_open()
        names = _select(self, keys)
        ranged = self._writer_stats() if not self.read_only else self._reader_stats()
        return {name: ranged.leaves[name].result(name) for name in names}

    def _writer_stats(self: "ReplayBuffer") -> RangeStats:
        if self.cache_path is not None:
            self.flush()
        else:
            self._write_staged()
        live = self._stats.live
        if live is not None and live.covers(self._ring):
            return live.copy()
        computed = _compute(self)
        self._stats.replace(computed)
        self._write_meta()
        return computed.copy()

    def _reader_stats(self: "ReplayBuffer") -> RangeStats:
        key = (self._ring.first_step, self._ring.appended, self._meta_signature)
        cached = self.__dict__.get("_stats_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        ranged = None
        for _ in range(3):  # the writer may replace stats.json between our reads of the two files
            ranged = self._stats.load(self.cache_path, read_meta(self.cache_path), self._ring)
            if ranged is not None or not self.refresh():
                break
            key = (self._ring.first_step, self._ring.appended, self._meta_signature)
        if ranged is None:
            ranged = _compute(self)
        self.__dict__["_stats_cache"] = (key, ranged)
        return ranged


def _select(rb: "ReplayBuffer", keys: str | Iterable[str] | None) -> list[str]:
    numeric = {tree.path_name(p): leaf for p, leaf in tree.leaves(rb.space) if has_stats(leaf)}
    if keys is None:
        return list(numeric)
    out: list[str] = []
    for name in [keys] if isinstance(keys, str) else list(keys):
        path = tree.parse_name(name)
        sub = tree.subspace(rb.space, path)  # KeyError names the key
        names = [tree.path_name((*path, *p)) for p, _ in tree.leaves(sub)]
        picked = [n for n in names if n in numeric]
        if not picked:
            raise ValueError(f"leaf {name!r} has no statistics (only numeric Box leaves have; "
                             f"text and bool leaves are skipped)")
        out += [n for n in picked if n not in out]
    return out


def _compute(rb: "ReplayBuffer") -> RangeStats:
    """Statistics of the held steps, read from the storage in chunks of about READ_CHUNK_BYTES.

    A reader of a live buffer reads against one view; if the writer dropped any of its steps
    meanwhile (their slots may hold newer data), it refreshes and starts again.
    """
    leaves = tree.leaves(rb.space)
    step_bytes = sum(int(np.prod(getattr(leaf, "shape", ()), dtype=np.int64)) * np.dtype(leaf.dtype).itemsize
                     for _, leaf in leaves)
    chunk = max(1, READ_CHUNK_BYTES // max(1, step_bytes))
    for _ in range(MAX_COMPUTE_ATTEMPTS):
        view, discards = rb._ring, rb._episodes.discards
        ranged = RangeStats(rb.space, view.first_step, view.first_step)
        for start in range(0, view.count, chunk):
            stop = min(view.count, start + chunk)
            data = rb.storage.read(view.slots_of(span(start, stop)))
            ranged.add(tree.flatten(rb.space, data), stop - start, rb._stats.indices)
        if not rb._reads_race_a_writer() or not rb.refresh():
            return ranged
        now = rb._ring
        if now.first_step <= view.first_step and now.appended >= view.appended and rb._episodes.discards == discards:
            return ranged  # every step we read is still committed: none of their slots was reused
    raise StaleReadError(f"the writer of {rb.cache_path} kept dropping steps while statistics were computed")


def stats_of(path: str | os.PathLike, keys: str | Iterable[str] | None = None, *,
             storage_options: dict[str, Any] | None = None) -> dict[str, LeafStats]:
    """:meth:`StatsMethods.stats` of the buffer folder at ``path`` (or the URL of a pushed buffer, with
    fsspec ``storage_options``), opened read-only.

    Raises:
        FormatError: not a buffer folder; and the errors of :meth:`StatsMethods.stats`.
    """
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    with ReplayBuffer.load_from(path, read_only=True, storage_options=storage_options) as rb:
        return rb.stats(keys)
