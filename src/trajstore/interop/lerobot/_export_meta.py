"""The ``meta/`` files of a LeRobot export, written once every episode is: ``meta/episodes`` (with the
episode data columns of :mod:`~trajstore.interop.lerobot._episode_data` after LeRobot's own),
``meta/tasks.parquet``, ``meta/info.json`` (with the ``"trajstore"`` entry of
:mod:`~trajstore.interop.lerobot._trajstore_meta` after LeRobot's keys), ``meta/stats.json``, then the
dataset card ``README.md`` (``trajstore.interop.lerobot._dataset_card.write_dataset_card``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from trajstore.interop.lerobot._export_episode import DATA_PATH, VIDEO_PATH
from trajstore.interop.lerobot._export_stats import aggregate, to_json
from trajstore.interop.lerobot._export_video import CODECS

CODEBASE_VERSION = "v3.0"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
CARD_MODULE = "trajstore.interop.lerobot._dataset_card"


@dataclass(frozen=True)
class MetaPlan:
    """What the meta files say beyond the episodes: the info.json settings and the card's."""

    fps: float
    vcodec: str
    pix_fmts: dict[str, str]
    robot_type: str | None
    chunks_size: int
    data_mb: float
    video_mb: float
    repo_id: str
    license: str | None = None
    tags: tuple[str, ...] = ()
    folder: str = ""  # the export folder's name: the card's LeRobotDataset(..., root=folder)


def write_meta(root: Path, features: Sequence[Any], video_keys: Sequence[str], rows: Sequence[dict[str, Any]],
               stats: Sequence[dict[str, Any]], tasks: Sequence[str], total: int, plan: MetaPlan,
               entry: dict[str, Any], data_columns: dict[str, Any]) -> dict[str, Any]:
    """Write the meta files and the card under ``root``; returns the info.json written."""
    import pyarrow.parquet as pq

    from trajstore.interop.lerobot import _export_parquet as tables

    episodes_path = root / EPISODES_PATH
    episodes_path.parent.mkdir(parents=True, exist_ok=True)
    table = tables.episodes_table(rows, features, video_keys, stats)
    for name, column in data_columns.items():
        table = table.append_column(name, column)
    pq.write_table(table, episodes_path)
    pq.write_table(tables.tasks_table(tasks), root / "meta/tasks.parquet")
    fps_value: float | int = int(plan.fps) if float(plan.fps).is_integer() else plan.fps
    info_features = {}
    for f in features:
        spec = f.info()
        if f.dtype == "video":
            spec["info"] = {"video.height": f.shape[0], "video.width": f.shape[1],
                            "video.codec": CODECS[plan.vcodec][1], "video.pix_fmt": plan.pix_fmts[f.key],
                            "video.is_depth_map": False, "video.fps": fps_value, "video.channels": 3,
                            "has_audio": False}
        info_features[f.key] = spec
    info = {"codebase_version": CODEBASE_VERSION, "robot_type": plan.robot_type, "total_episodes": len(rows),
            "total_frames": total, "total_tasks": len(tasks), "chunks_size": plan.chunks_size,
            "data_files_size_in_mb": plan.data_mb, "video_files_size_in_mb": plan.video_mb, "fps": fps_value,
            "splits": {"train": f"0:{len(rows)}"}, "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if video_keys else None, "features": info_features, "trajstore": entry}
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))
    dataset_stats = {f.key: to_json(aggregate([s[f.key] for s in stats])) for f in features if f.has_stats}
    (root / "meta/stats.json").write_text(json.dumps(dataset_stats, indent=4))
    write_card(root, info, plan)
    return info


def write_card(root: Path, info: dict[str, Any], plan: MetaPlan) -> None:
    """``README.md`` through the dataset card module; nothing when that module is not installed."""
    import importlib

    try:
        card = importlib.import_module(CARD_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != CARD_MODULE:
            raise
        return
    card.write_dataset_card(root, info, repo_id=plan.repo_id, license=plan.license, tags=tuple(plan.tags),
                            folder=plan.folder or None)
