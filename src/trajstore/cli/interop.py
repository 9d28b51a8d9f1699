"""``trajstore import FORMAT ...`` and ``trajstore export FORMAT ...``: other formats in and out.

Each command parses its arguments, calls one library function in ``trajstore.integrations`` and
prints its summary; errors are one line (``fail`` of :mod:`trajstore.cli.main`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

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
    from trajstore.errors import TrajstoreError
    from trajstore.integrations.lerobot import import_lerobot

    try:
        summary = import_lerobot(src, out, camera=camera.value, episodes=episode or None, progress=progress)
    except (TrajstoreError, ImportError, ValueError, OSError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)
