"""A Ray Data datasource over a buffer folder: :func:`read_trajstore` (needs the ``ray`` extra).

The driver opens the buffer once to check the request and number its rows; each read task opens
it again read-only, reads its range of rows in blocks of about Ray's target block size, and
closes it. Ranges are balanced by rows (steps or windows) and cut at episode starts where one
is near (:func:`~trajstore.training._ray_rows.split_rows`). Blocks reach the consumer in the order
tasks finish unless Ray's ``execution_options.preserve_order`` is set: each row's ``index`` column
restores step order.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, Mapping

from ray.data import Dataset, read_datasource
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from trajstore.training._ray_rows import (MIN_TASK_ROWS, RowRequest, absolute, episode_starts, make_request,
                                              read_rows, rows_per_block, split_rows)
from trajstore.shards.reader import open_read_only

__all__ = ["TrajstoreDatasource", "read_trajstore"]

#: Block size when Ray's data context gives none (bytes; Ray's own default target is 128 MiB).
DEFAULT_BLOCK_BYTES = 64 * 2**20


def read_trajstore(path_or_url: str | os.PathLike, *, columns: Iterable[str] | None = None,
                   episodes: Iterable[int] | str | None = None, window: Mapping[str, Any] | None = None,
                   pad: bool | None = None, storage_options: dict[str, Any] | None = None,
                   min_task_rows: int = MIN_TASK_ROWS, index_columns: bool = True, **read_args: Any) -> Dataset:
    """A ``ray.data.Dataset`` of the steps (or windows) of the buffer at ``path_or_url``.

    Args:
        path_or_url: a buffer folder, or a URL that ``ReplayBuffer.load_from`` opens (with the
            ``remote`` support); a local path is made absolute for the workers. A sharded dataset's
            folder reads every shard as one buffer (:class:`~trajstore.shards.ShardedBuffer`; every
            task shows the steps the driver saw).
        columns: leaf names (``"observation/pixels"``; a subtree name stands for its leaves) to
            read; default every leaf. Only these leaves are read and decoded.
        episodes: episode ids (``Episode.id``), a selection text (``"0,3,5-9"``,
            ``"success == true and not interrupted"``, see
            :mod:`~trajstore.replay_buffer.episode_query`), or ``None`` for every held episode (the
            open one and a ring's partly overwritten oldest one included, from their held steps).
        window: rows are windows instead of steps: offsets from the anchor step per leaf or subtree,
            as ``delta_indices`` of ``rb.sample_windows`` (``{"observation": [-1, 0], "action": range(16)}``).
        pad: with ``window``: ``True`` (default) makes every held step an anchor and pads at episode
            boundaries with the boundary step; ``False`` keeps only anchors whose offsets all lie in
            their episode.
        storage_options: fsspec options for a URL (endpoint, credentials), passed to
            ``ReplayBuffer.load_from`` only when given.
        min_task_rows: the fewest rows a read task reads (default 512; fewer rows in all: one task).
            Each task opens the buffer, so tasks of a handful of camera rows spend their time opening.
            The read makes ``override_num_blocks`` tasks if given (each of ``min_task_rows`` rows at
            least), else ``min(200, rows // min_task_rows)``; cuts move to episode starts where one is
            near. A task yields blocks of about Ray's ``target_max_block_size``.
        index_columns: add the int64 columns ``index``, ``episode`` and ``step`` to every row
            (default); False reads only the leaves (for a space with a top-level key of one of
            those names).
        **read_args: passed to ``ray.data.read_datasource`` (``override_num_blocks``, ``concurrency``,
            ``num_cpus``, ...).

    Returns:
        A dataset with one row per held step (or per valid anchor) of the selected episodes. **Row
        order is not guaranteed** under Ray's default execution options (blocks of parallel tasks
        arrive as they finish): set ``DataContext.get_current().execution_options.preserve_order =
        True`` before reading, or ``ds.sort("index")``, for step order (the numbering of
        ``rb.count_anchors``/``rb.windows_at`` and of ``ReplayBufferDataset``: the ``k``-th row in
        ``index`` order is item ``k``). Each row has int64 columns ``index`` (the logical index of
        its step, or of its window's anchor: ``rb[index]``), ``episode`` (its ``Episode.id``) and
        ``step`` (``index - Episode.start``: the step within the episode, counted from its oldest
        held step for a ring's partly overwritten episode). The other columns are the leaf names:
        a leaf of shape ``S`` gives a column of ``S``-shaped values of its dtype (camera frames:
        ``(H, W, 3)`` uint8 ndarrays); in a window row a named leaf is ``(T, *S)`` with ``T`` its
        number of offsets, and each name of ``window`` that covers a column adds a bool ``(T,)``
        column ``"is_pad/<name>"`` (True where the offset fell outside the episode). ``ds.count()``
        is known without reading. No selected row: an empty dataset.

    Raises:
        FormatError: not a buffer folder, or a damaged one (from ``load_from``).
        UnknownLeafError: a column (or a name of ``window``) that is not a leaf or subtree of the space
            (a ``KeyError`` and a ``ValueError``).
        TypeError, ValueError: ``window``, ``pad`` or ``episodes`` the buffer refuses (as
            ``rb.sample_windows`` would); a space with a top-level key ``index``, ``episode`` or
            ``step`` while ``index_columns`` (the message names it). Raised here, before any task runs.
        StaleReadError: (from a read task) a writer's ring moved past the rows being read since the
            dataset was made; make it again.
    """
    source = TrajstoreDatasource(path_or_url, columns=columns, episodes=episodes, window=window, pad=pad,
                                 storage_options=storage_options, min_task_rows=min_task_rows,
                                 index_columns=index_columns)
    if read_args.get("override_num_blocks") is None:
        # Ray would ask for 200 blocks and split each task's output to reach them: tiny blocks, each a
        # trip through the object store. Ask for the tasks we will make instead (Ray still splits
        # blocks larger than its target size).
        read_args["override_num_blocks"] = source.default_num_tasks()
    return read_datasource(source, **read_args)


class TrajstoreDatasource(Datasource):
    """The ``ray.data.Datasource`` behind :func:`read_trajstore` (same arguments; checked here)."""

    def __init__(self, path_or_url: str | os.PathLike, *, columns: Iterable[str] | None = None,
                 episodes: Iterable[int] | str | None = None, window: Mapping[str, Any] | None = None,
                 pad: bool | None = None, storage_options: dict[str, Any] | None = None,
                 min_task_rows: int = MIN_TASK_ROWS, index_columns: bool = True):
        super().__init__()
        if isinstance(min_task_rows, bool) or not isinstance(min_task_rows, int) or min_task_rows < 1:
            raise ValueError(f"min_task_rows must be an int >= 1, got {min_task_rows!r}")
        self.min_task_rows = min_task_rows
        path = absolute(path_or_url)
        kwargs = {} if storage_options is None else {"storage_options": storage_options}
        with open_read_only(path, **kwargs) as rb:  # a sharded dataset's folder opens as one buffer
            self.request: RowRequest = make_request(rb, path, storage_options=storage_options, columns=columns,
                                                    episodes=episodes, window=window, pad=pad,
                                                    index_columns=index_columns)
            self.episode_starts = episode_starts(rb, self.request)  # for planning only: tasks get the request

    def default_num_tasks(self) -> int:
        """Ray's default number of read blocks (``read_op_min_num_blocks``, 200), fewer when tasks would
        get under ``min_task_rows`` rows; at least 1."""
        from ray.data import DataContext

        most = DataContext.get_current().read_op_min_num_blocks
        return max(1, min(most, self.request.total // self.min_task_rows))

    def get_name(self) -> str:
        return "Trajstore"

    def estimate_inmemory_data_size(self) -> int:
        return self.request.total * self.request.bytes_per_row

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        request = self.request
        target = getattr(data_context, "target_max_block_size", None) or DEFAULT_BLOCK_BYTES
        block_rows = rows_per_block(request, target)
        tasks = []
        for lo, hi in split_rows(request.total, self.episode_starts, parallelism, self.min_task_rows):
            meta = BlockMetadata(num_rows=hi - lo, size_bytes=(hi - lo) * request.bytes_per_row,
                                 exec_stats=None, input_files=None)
            tasks.append(ReadTask(_Reader(request, lo, hi, block_rows), meta, per_task_row_limit=per_task_row_limit))
        return tasks


class _Reader:
    """One read task: rows ``[lo, hi)``, in blocks of ``block_rows`` rows (a picklable callable)."""

    def __init__(self, request: RowRequest, lo: int, hi: int, block_rows: int):
        self.request, self.lo, self.hi, self.block_rows = request, lo, hi, block_rows

    def __call__(self) -> Iterator[Any]:
        with self.request.open() as rb:
            for start in range(self.lo, self.hi, self.block_rows):
                stop = min(self.hi, start + self.block_rows)
                yield BlockAccessor.batch_to_block(read_rows(rb, self.request, start, stop))
