"""Rows of a buffer for a parallel reader, with no Ray in sight: what to read (:class:`RowRequest`,
checked once on the driver), how to cut the rows into balanced ranges along episode boundaries
(:func:`split_rows`), and how one range is read (:func:`read_rows`) as flat columns.

A *row* is a step, or the window anchored at a step (``window=`` offsets, as in
``rb.sample_windows(..., delta_indices=...)``). Rows are numbered like the torch dataset's items
and ``rb.count_anchors``: in step order over the selected episodes, every valid anchor once.
A column is a leaf named by its path joined by ``"/"`` (``observation/pixels``); windows add one
bool column ``is_pad/<name>`` per name of ``window`` that covers a requested leaf. Every row also
carries :data:`ROW_COLUMNS`, int64: ``index`` (the logical index of its step, or of its window's
anchor: ``rb[index]``), ``episode`` (``Episode.id``) and ``step`` (``index - Episode.start``), so rows
that a parallel reader delivers out of order can be put back in order and tied to their episode.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore.errors import StaleReadError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.window_plan import WindowPlan, WindowRequest
from trajstore.spaces import tree

#: The prefix of a window row's padding columns (``is_pad/action``), as the torch dataset's key.
IS_PAD = "is_pad"
#: The fewest rows a read task gets (unless the whole read is smaller). Each task opens the buffer
#: (about 10 ms) and costs Ray some scheduling; 512 camera rows take about 200 ms of JPEG decoding at
#: 128x128. In benchmarks/ray_read.py (4096 such steps, 1 CPU) tasks of 1024, 512 and 256 rows read
#: 3500, 3100 and 2700 steps/s, and 200 tasks of 20 rows (Ray's default of 200 blocks) 400.
MIN_TASK_ROWS = 512
#: The int64 columns every row carries (unless ``index_columns=False``): the step's logical index
#: (``rb[index]``; a window's anchor), its ``Episode.id`` and its step within the episode (from
#: ``Episode.start``, the oldest held step of a ring's partly overwritten episode).
ROW_COLUMNS = ("index", "episode", "step")
#: Bytes a value of no fixed dtype is counted as when sizing blocks (its length is unknown before reading).
TEXT_BYTES = 64


@dataclass(frozen=True)
class RowRequest:
    """A checked request for rows of one buffer folder, small enough to send to every read task.

    Attributes:
        path: the folder (absolute) or URL, as given to ``ReplayBuffer.load_from``.
        storage_options: passed to ``load_from`` when not ``None`` (fsspec options of a URL).
        columns: the leaf names read, in the space's leaf order.
        window: the buffer's checked :class:`~trajstore.replay_buffer.window_plan.WindowRequest`
            (``rb.window_request``): offsets (``None``: rows are steps), padding, episodes and the
            leaves read. Built once on the driver; every task reads with it, none rebuilds it.
        first_step: the oldest held step (global number) when the request was made.
        total: the number of rows; ``bytes_per_row``: their in-memory size, an estimate for text leaves.
        snapshot: for a buffer opened from a URL, ``(url, snapshot id)`` of the push the driver read
            (``rb.published_snapshot``): every task opens that one, even after a later push replaced
            it (:func:`trajstore.remote.mirror.read_snapshot`), so all rows come from one snapshot.
        index_columns: rows carry the :data:`ROW_COLUMNS`.
        shard_steps: for a sharded dataset (:class:`~trajstore.shards.ShardedBuffer`), ``{shard: steps}`` the
            driver saw: every task shows those steps, so all number the rows alike.
    """

    path: str
    storage_options: dict[str, Any] | None
    columns: tuple[str, ...]
    window: WindowRequest
    first_step: int
    total: int
    bytes_per_row: int
    snapshot: tuple[str, str] | None = None
    index_columns: bool = True
    shard_steps: dict[str, int] | None = None

    def open(self) -> ReplayBuffer:
        """The buffer, opened read-only (with ``storage_options`` only when they were given).

        Raises:
            FormatError: (a URL) the snapshot the driver read was replaced and is past the push's retention.
        """
        if self.shard_steps is not None:
            from trajstore.shards import ShardedBuffer

            return ShardedBuffer.load_from(self.path, storage_options=self.storage_options, steps=self.shard_steps)
        if self.snapshot is not None:
            from trajstore.remote.mirror import reopen_remote

            url, snapshot = self.snapshot
            return reopen_remote(url, self.storage_options, None, False, snapshot)
        if self.storage_options is None:
            return ReplayBuffer.load_from(self.path, read_only=True)
        return ReplayBuffer.load_from(self.path, read_only=True, storage_options=self.storage_options)


def make_request(rb: ReplayBuffer, path: str, *, storage_options: dict[str, Any] | None,
                 columns: Iterable[str] | None, episodes: Iterable[int] | str | None,
                 window: Mapping[str, Any] | None, pad: bool | None, index_columns: bool = True) -> RowRequest:
    """Check the arguments of ``read_trajstore`` against the open buffer ``rb`` and count its rows.

    Raises:
        TypeError: ``pad`` without ``window``; ``columns`` not names; ``episodes`` of the wrong type.
        UnknownLeafError: a column (or a name of ``window``) that is neither a leaf nor a subtree of
            the space (the message lists the keys there); a ``KeyError`` and a ``ValueError``.
        ValueError: ``window`` or ``episodes`` that the buffer refuses (see ``rb.sample_windows``,
            :mod:`~trajstore.replay_buffer.episode_query`); a space with a top-level key ``"is_pad"``
            (with ``window``) or one of :data:`ROW_COLUMNS` (with ``index_columns``; the message names
            it); an empty column name or list.
    """
    if window is None and pad is not None:
        raise TypeError("pad goes with window (the offsets of a window row)")
    top = set(getattr(rb.space, "spaces", {}) or {})
    if window is not None and IS_PAD in top:
        raise ValueError(f"the space has a key {IS_PAD!r}: window rows cannot add their padding columns")
    clash = [name for name in ROW_COLUMNS if name in top] if index_columns else []
    if clash:
        raise ValueError(f"the space has a top-level key {clash[0]!r}, the name of a column every row gets "
                         f"({', '.join(ROW_COLUMNS)}); pass index_columns=False to read without them")
    if isinstance(episodes, str):
        from trajstore.replay_buffer.episode_query import parse_selection

        episodes = parse_selection(episodes).select(rb.episodes)
    if columns is not None and (isinstance(columns, str) or not isinstance(columns, Iterable)):
        raise TypeError(f"columns must be a list of leaf names like 'observation/pixels', got {columns!r:.80}")
    columns = None if columns is None else list(columns)
    if columns is not None and not columns:
        raise ValueError("columns is empty: name at least one leaf")
    request = rb.window_request(None if window is None else dict(window), pad=True if pad is None else bool(pad),
                                episodes=episodes, leaves=columns)
    paths = tree.leaf_paths(rb.space)
    return RowRequest(path=path, storage_options=storage_options,
                      columns=tuple(tree.path_name(paths[i]) for i in request.leaves), window=request,
                      first_step=rb.total_steps - len(rb), total=int(rb.count_anchors(request)),
                      bytes_per_row=_bytes_per_row(rb.space, request.plan) + (24 if index_columns else 0),
                      snapshot=rb.published_snapshot, index_columns=bool(index_columns),
                      shard_steps=getattr(rb, "shard_steps", None))


def episode_starts(rb: ReplayBuffer, request: RowRequest) -> np.ndarray:
    """The row numbers (int64, increasing, from 0) where an episode's rows start, for :func:`split_rows`.

    Costs one pass over the row numbers (int64, 8 bytes a row); kept on the driver, never sent to tasks.
    """
    if request.total == 0:
        return np.zeros(0, np.int64)
    anchors = rb.anchors_at(np.arange(request.total, dtype=np.int64), request.window)
    firsts = np.asarray(sorted(e.start for e in rb.episodes), np.int64)
    owner = np.searchsorted(firsts, anchors, side="right")
    return np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]).astype(np.int64)


def split_rows(total: int, starts: np.ndarray, parallelism: int, min_rows: int = MIN_TASK_ROWS
               ) -> list[tuple[int, int]]:
    """Cut rows ``[0, total)`` into at most ``parallelism`` ranges ``[lo, hi)`` of about equal length,
    each of at least ``min_rows`` rows (one range when there are fewer rows than that). ``starts``:
    the rows where episodes start (:func:`episode_starts`).

    Each cut moves to the nearest episode start when one lies within a quarter of a range's length,
    so a range mostly holds whole episodes; an episode longer than that is cut inside. Empty ranges
    are dropped (no rows: no range).
    """
    n = max(1, min(int(parallelism), total // max(1, int(min_rows))))
    if total == 0:
        return []
    size = total / n
    cuts = {0, total}
    for k in range(1, n):
        ideal = round(k * size)
        j = int(np.searchsorted(starts, ideal))
        near = [int(starts[i]) for i in (j - 1, j) if 0 <= i < len(starts)]
        best = min(near, key=lambda s: abs(s - ideal), default=ideal)
        cuts.add(best if abs(best - ideal) <= size / 4 else ideal)
    edges = sorted(cuts)
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]


def rows_per_block(request: RowRequest, target_bytes: int) -> int:
    """How many rows make a block of about ``target_bytes`` (at least 1)."""
    return max(1, int(target_bytes) // max(1, request.bytes_per_row))


def read_rows(rb: ReplayBuffer, request: RowRequest, lo: int, hi: int) -> dict[str, np.ndarray]:
    """Rows ``[lo, hi)`` of ``request`` from ``rb`` as flat columns: ``{name: array (hi - lo, ...)}``.

    With ``request.index_columns`` the columns start with :data:`ROW_COLUMNS` (int64 ``(rows,)``).
    A step column has the leaf's shape and dtype; a windowed leaf's column is ``(rows, T, ...)``; an
    ``is_pad/<name>`` column is bool ``(rows, T)``. Only the requested leaves, at the requested
    offsets, are read and decoded (``rb.windows_at`` with the request's window plan).

    Raises:
        StaleReadError: the buffer no longer holds the rows the request numbered (a writer's ring
            moved past its oldest steps since the read was planned, or steps were discarded).
    """
    first = rb.total_steps - len(rb)
    count = rb.count_anchors(request.window)
    if first != request.first_step or count < hi:
        raise StaleReadError(f"{request.path}: the buffer changed while it was read (oldest step "
                             f"{request.first_step} -> {first}, rows {request.total} -> {count}); read it again")
    numbers = np.arange(lo, hi, dtype=np.int64)
    data, is_pad = rb.windows_at(numbers, request.window)
    values = tree.flatten(rb.space, data)
    paths = tree.leaf_paths(rb.space)
    read = {tree.path_name(paths[i]): values[i] for i in request.window.leaves}
    out = row_positions(rb, rb.anchors_at(numbers, request.window)) if request.index_columns else {}
    out.update((name, read[name]) for name in request.columns)
    for name, mask in is_pad.items():
        out[f"{IS_PAD}/{name}"] = mask
    return out


def row_positions(rb: ReplayBuffer, anchors: np.ndarray) -> dict[str, np.ndarray]:
    """The :data:`ROW_COLUMNS` of the steps at logical indices ``anchors`` (int64 ``(N,)``):
    ``{"index": anchors, "episode": Episode.id, "step": anchors - Episode.start}``, each int64 ``(N,)``.

    From the episode table's columns (no episode data parsed): held episodes cover the held steps
    one after the other, so their starts are the running sum of their held lengths.
    """
    table = rb.episodes.columns()
    lengths = np.asarray(table["steps"], np.int64)
    starts = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)[:-1]])
    owner = np.searchsorted(starts, anchors, side="right") - 1
    anchors = np.asarray(anchors, np.int64)
    return {"index": anchors, "episode": np.asarray(table["id"], np.int64)[owner],
            "step": anchors - starts[owner]}


def _bytes_per_row(space: Any, plan: WindowPlan) -> int:
    spaces = tree.leaves(space)
    size = 0
    for group in plan.groups:
        steps = len(group.offsets)
        for i, windowed in zip(group.leaves, group.windowed):
            leaf = spaces[i][1]
            dtype = getattr(leaf, "dtype", None)
            shape = getattr(leaf, "shape", None) or ()
            one = TEXT_BYTES if dtype is None or np.dtype(dtype).kind == "O" else np.dtype(dtype).itemsize
            size += one * math.prod(shape) * (steps if windowed else 1)
    return size + sum(len(plan.groups[g].offsets) for g in plan.names.values())


def absolute(path_or_url: str | os.PathLike) -> str:
    """A local path made absolute (read tasks may run in another working directory); a URL as it is."""
    text = os.fspath(path_or_url)
    return text if "://" in text else os.path.abspath(text)
