"""Writing one episode of a LeRobot export: its rows into the open data file, its frames into each
camera's open MP4 (or as PNG cells), its ``meta/episodes`` row and its statistics; and which data and
video file an episode goes to (files take episodes until they reach their size, then the next file
index, then the next chunk, as LeRobot fills them). Used by :mod:`~trajstore.interop.lerobot.export`.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from trajstore._fs import fsync_dir
from trajstore.interop.lerobot._export_features import Feature, index_features
from trajstore.interop.lerobot._export_parquet import data_column
from trajstore.interop.lerobot._export_stats import FrameStats, Stats, value_stats
from trajstore.interop.lerobot._export_video import ExportVideo
from trajstore.replay_buffer.episodes import Episode
from trajstore.spaces.tree import get

DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
#: Steps read from the buffer at a time (bounds the frames held in memory).
BLOCK_STEPS = 256


def _next_file(chunk: int, file: int, chunks_size: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file + 1 >= chunks_size else (chunk, file + 1)


class OpenFiles:
    """Where the next episode goes: the open data file and the open video file of each camera."""

    def __init__(self, root: Path, schema: Any, chunks_size: int, data_bytes: float, video_bytes: float):
        self.root, self.schema, self.chunks_size = root, schema, chunks_size
        self.data_bytes, self.video_bytes = data_bytes, video_bytes
        self.data_at = (0, 0)
        self.data_path: Path | None = None
        self.writer: Any = None
        self.videos: dict[str, tuple[tuple[int, int], ExportVideo]] = {}

    def data_writer(self) -> tuple[tuple[int, int], Any]:
        import pyarrow.parquet as pq

        if self.writer is not None and self.data_path.stat().st_size >= self.data_bytes:
            self.writer.close()
            self.writer = None
            self.data_at = _next_file(*self.data_at, self.chunks_size)
        if self.writer is None:
            c, f = self.data_at
            self.data_path = self.root / DATA_PATH.format(chunk_index=c, file_index=f)
            self.data_path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.data_path, self.schema)
        return self.data_at, self.writer

    def video(self, key: str, make: Any) -> tuple[tuple[int, int], ExportVideo]:
        at, video = self.videos.get(key, ((0, 0), None))
        if video is not None and video.size() >= self.video_bytes:
            video.close()
            at, video = _next_file(*at, self.chunks_size), None
        if video is None:
            video = make(self.root / VIDEO_PATH.format(video_key=key, chunk_index=at[0], file_index=at[1]))
            self.videos[key] = (at, video)
        return at, video

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        for _, video in self.videos.values():
            video.close()


def png_bytes(frame: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="PNG")
    return buf.getvalue()


def write_episode(rb: Any, ep: Episode, index: int, first: int, task_index: int, task: str,
                  features: list[Feature], fps: float, files: OpenFiles,
                  make_video: Callable[[Path, Feature], ExportVideo]) -> tuple[dict[str, Any], dict[str, Stats]]:
    """Write episode ``ep`` of ``rb`` as LeRobot episode ``index`` whose first row is global index ``first``.

    Returns its ``meta/episodes`` row (without the stats columns) and its statistics by feature key.
    """
    n = len(ep)
    values: dict[str, list] = {f.key: [] for f in features if not f.is_camera}
    images: dict[str, list] = {f.key: [] for f in features if f.dtype == "image"}
    frame_stats = {f.key: FrameStats() for f in features if f.is_camera}
    row: dict[str, Any] = {"episode_index": index, "tasks": [task], "length": n}
    for f in features:
        if f.dtype == "video":
            (c, fi), video = files.video(f.key, lambda p, f=f: make_video(p, f))
            start = video.frames
            row.update({f"videos/{f.key}/chunk_index": c, f"videos/{f.key}/file_index": fi,
                        f"videos/{f.key}/from_timestamp": start / fps, f"videos/{f.key}/to_timestamp": (start + n) / fps})
    for a in range(ep.start, ep.stop, BLOCK_STEPS):
        block = rb.get_at(slice(a, min(a + BLOCK_STEPS, ep.stop)))
        for f in features:
            v = get(block, f.path)
            if f.is_camera:
                v = f.frames(v)  # (n, H, W, 3): a CHW leaf transposed
                frame_stats[f.key].add(v)
                if f.dtype == "video":
                    files.videos[f.key][1].encode(v)
                else:
                    images[f.key] += [{"bytes": png_bytes(fr), "path": f"frame-{a - ep.start + i:06d}.png"}
                                      for i, fr in enumerate(v)]
            else:
                values[f.key].append(v)
    frame_index = np.arange(n, dtype=np.int64)
    columns = {"timestamp": (frame_index / fps).astype(np.float32), "frame_index": frame_index,
               "episode_index": np.full(n, index, np.int64), "index": np.arange(first, first + n, dtype=np.int64),
               "task_index": np.full(n, task_index, np.int64)}
    for key, parts in values.items():
        columns[key] = np.concatenate(parts) if parts else np.empty(0)
    columns.update(images)
    (c, fi), writer = files.data_writer()
    row.update({"data/chunk_index": c, "data/file_index": fi, "dataset_from_index": first,
                "dataset_to_index": first + n})
    import pyarrow as pa

    stored = [f for f in features + index_features() if f.dtype != "video"]  # the schema's order
    table = pa.Table.from_arrays([_column(f, columns[f.key]) for f in stored], schema=files.schema)
    writer.write_table(table, row_group_size=max(n, 1))
    ep_stats: dict[str, Stats] = {key: s.stats() for key, s in frame_stats.items()}
    for f in features + index_features():
        if f.has_stats and not f.is_camera:
            ep_stats[f.key] = value_stats(np.asarray(columns[f.key]).reshape(n, -1))
    return row, ep_stats


def _column(feature: Feature, values: Any) -> Any:
    if feature.dtype == "string":
        values = [str(s) for s in np.asarray(values).reshape(-1)]
    return data_column(feature, values)


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (before the rename that publishes it)."""
    for folder, _, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(folder)
