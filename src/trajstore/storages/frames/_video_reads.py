"""Batch reads of the flushed frames of a :class:`~trajstore.storages.frames.video.VideoStorage`.

:func:`read_frames` takes the ``(segment file id, frame number)`` of each row of a read, any
order, repeats allowed, and fills the rows:

1. repeats are read once (sorted by segment, then frame number);
2. frames in the process's :class:`~trajstore.storages.frames._frame_cache.FrameCache` are
   copied from there;
3. the rest is decoded segment by segment, each in one forward pass
   (:func:`~trajstore.storages.frames._segment_reader.decode_frames`: every keyframe interval
   needed is decoded once), segments spread over a small thread pool (libav releases the GIL),
   and the decoded frames go to the cache.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from trajstore.storages.frames._frame_cache import FrameCache
from trajstore.storages.frames._reader_cache import ReaderCache
from trajstore.storages.frames._segment_reader import SegmentIndex, decode_frames


def read_frames(fid: np.ndarray, frame: np.ndarray, out: np.ndarray, rows: np.ndarray, *,
                tables: ReaderCache, local_file: Callable[[int], "os.PathLike[str]"], cache: FrameCache,
                pool: Callable[[], ThreadPoolExecutor | None]) -> None:
    """Fill ``out[rows[i]]`` with frame ``frame[i]`` of segment ``fid[i]``.

    Args:
        fid, frame: int64 ``(M,)``: where each row's frame is.
        out: uint8 ``(N, H, W, 3)``; rows: int ``(M,)`` into it.
        tables: the segment tables (by file id). local_file: a local path of a segment's whole
            file (for a remote source, fetched into its cache). cache: decoded frames.
        pool: the thread pool to spread segments over (called only when there are several), or None.

    Raises:
        FileNotFoundError: a segment was deleted (the caller refreshes its index and retries).
        FormatError: a damaged segment (names the file and the frame).
    """
    if len(fid) == 0:
        return
    order = np.lexsort((frame, fid))  # by segment, then frame number: one forward pass per file
    fid, frame, rows = fid[order], frame[order], np.asarray(rows)[order]
    first = np.ones(len(fid), bool)
    first[1:] = (fid[1:] != fid[:-1]) | (frame[1:] != frame[:-1])
    if not first.all():  # a repeated frame is read once, then copied
        lead = rows[first][np.cumsum(first) - 1]
        dup = ~first
        fid, frame, rows, dup_rows, dup_from = fid[first], frame[first], rows[first], rows[dup], lead[dup]
    else:
        dup_rows = dup_from = None
    h, w = out.shape[1:3]
    cut = np.flatnonzero(fid[1:] != fid[:-1]) + 1
    starts, ends = [0, *cut.tolist()], [*cut.tolist(), len(fid)]
    groups = []
    for a, b in zip(starts, ends):
        file_id, numbers, where = int(fid[a]), frame[a:b].tolist(), rows[a:b].tolist()
        missing = cache.take(file_id, numbers, out, where)
        if missing:
            groups.append((file_id, [numbers[i] for i in missing], [where[i] for i in missing]))

    def decode(group: tuple[int, list[int], list[int]]) -> None:
        file_id, numbers, where = group
        path = local_file(file_id)
        fd = os.open(path, os.O_RDONLY)  # held for the group: a remote cache may evict its copy meanwhile
        try:
            table = tables.get(file_id)
            decode_frames(table, fd, np.array(numbers, np.int64), out, np.array(where, np.int64), h, w)
        finally:
            os.close(fd)
        cache.put(file_id, numbers, out, where)

    executor = pool() if len(groups) > 1 else None
    if executor is None:
        for g in groups:
            decode(g)
    else:
        for _ in executor.map(decode, groups):
            pass
    if dup_rows is not None:
        out[dup_rows] = out[dup_from]


def open_table(path: "os.PathLike[str]", fps: float) -> SegmentIndex:
    """The frame table of the segment at ``path`` (see :class:`SegmentIndex`)."""
    return SegmentIndex.open(path, fps)
