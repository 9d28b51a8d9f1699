"""``trajstore import FORMAT ...`` and ``trajstore export FORMAT ...``: other formats in and out.

Each command parses its arguments, calls one library function in ``trajstore.integrations`` and
prints its summary; errors are one line (``fail`` of :mod:`trajstore.cli._output`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from trajstore.errors import TrajstoreError

import_app = typer.Typer(help="Make a new buffer folder from a dataset in another format.", no_args_is_help=True)
export_app = typer.Typer(help="Write a buffer folder out in another format.", no_args_is_help=True)


class Camera(str, Enum):
    jpeg = "jpeg"
    png = "png"
    video = "video"


@import_app.command("lerobot")
def import_lerobot_command(
    src: Path = typer.Argument(..., help="LeRobot v3.0 dataset folder (meta/info.json, data/, videos/)."),
    out: Path = typer.Argument(..., help="New buffer folder (must not exist, or be empty)."),
    camera: Camera = typer.Option(Camera.jpeg, help="How to store camera frames (png: lossless)."),
    episode: Optional[List[int]] = typer.Option(None, "--episode", "-e",
                                                help="LeRobot episode index to import (repeat it; default: all)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Import a LeRobot v3.0 dataset (video, image and numeric features; the task as episode data)."""
    from trajstore.cli._output import console, fail
    from trajstore.integrations.lerobot import import_lerobot

    try:
        summary = import_lerobot(src, out, camera=camera.value, episodes=episode or None, progress=progress)
    except (TrajstoreError, ImportError, ValueError, OSError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)


class VideoCodec(str, Enum):
    h264 = "h264"
    libsvtav1 = "libsvtav1"


@export_app.command("lerobot")
def export_lerobot_command(
    src: Path = typer.Argument(..., help="Buffer folder."),
    out: Path = typer.Argument(..., help="New LeRobot dataset folder (format v3.0)."),
    repo_id: Optional[str] = typer.Option(None, help="Dataset name for LeRobotDataset(repo_id, root=OUT) "
                                                     "(default local/<OUT name>)."),
    vcodec: VideoCodec = typer.Option(VideoCodec.h264, help="Video codec: h264 (libx264) or libsvtav1 (AV1, "
                                                            "LeRobot's default)."),
    crf: Optional[int] = typer.Option(None, min=0, max=63, help="Video quality, lower is better "
                                                                "(default 20 for h264, 30 for AV1)."),
    images: bool = typer.Option(False, "--images", help="Store cameras as PNG image features (exact) instead of video."),
    episode: Optional[List[int]] = typer.Option(None, help="Episode id to export (repeat the option); default: every "
                                                           "ended episode."),
    fps: Optional[float] = typer.Option(None, help="Frame rate in Hz (default: the leaves' metadata fps)."),
    task: str = typer.Option("", help="Task text of episodes whose data has no 'task'."),
    robot_type: Optional[str] = typer.Option(None, help="robot_type of meta/info.json."),
) -> None:
    """Export a buffer as a LeRobot dataset (v3.0, as lerobot 0.4.4 writes it)."""
    from trajstore.cli._output import console, fail
    from trajstore.integrations.lerobot_export import export_lerobot

    try:
        result = export_lerobot(src, out, episodes=episode or None, repo_id=repo_id, fps=fps,
                                camera="image" if images else "video", vcodec=vcodec.value, crf=crf,
                                default_task=task, robot_type=robot_type)
    except (TrajstoreError, ImportError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(escape(result.line()), soft_wrap=True)
