"""``trajstore import ...`` / ``trajstore export ...``: other datasets' formats. Each command parses,
calls one library function, prints."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from trajstore.errors import TrajstoreError

import_app = typer.Typer(help="Make a trajstore buffer from another dataset format.", no_args_is_help=True)
export_app = typer.Typer(help="Write a trajstore buffer in another dataset format.", no_args_is_help=True)


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
    from trajstore.cli.main import console, fail  # here, not at import: main imports this module
    from trajstore.integrations.lerobot_export import export_lerobot

    try:
        result = export_lerobot(src, out, episodes=episode or None, repo_id=repo_id, fps=fps,
                                camera="image" if images else "video", vcodec=vcodec.value, crf=crf,
                                default_task=task, robot_type=robot_type)
    except (TrajstoreError, ImportError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(escape(result.line()), soft_wrap=True)
