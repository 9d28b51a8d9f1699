"""``trajstore preview PATH --episode K --out FILE [--camera KEY] [--every N]``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from trajstore.cli._output import console, fail, progress_bar, progress_option
from trajstore.errors import TrajstoreError


def preview(path: Path = typer.Argument(..., help="Buffer folder."),
            episode: int = typer.Option(..., help="Episode id (see `trajstore episodes`)."),
            out: Path = typer.Option(..., help="Output file: .png (contact sheet of one camera) or .mp4 (every "
                                               "camera side by side, one frame per step)."),
            camera: Optional[str] = typer.Option(None, help="Camera leaf of a .png sheet, e.g. observation/pixels "
                                                            "(default: the first camera)."),
            every: int = typer.Option(1, min=1, help="Keep every N-th step in a .png sheet."),
            progress: bool = progress_option()) -> None:
    """Write a preview of one episode: a .png contact sheet (frames labelled with their step number)
    or an .mp4 video at the buffer's fps."""
    from trajstore.ops.preview import write_preview
    from trajstore.ops.stream_info import is_stream_folder

    if is_stream_folder(path):
        from trajstore.cli.streams import preview_refusal

        raise fail(preview_refusal(str(path)))
    try:
        with progress_bar(desc="decoding frames", unit="step", enabled=progress) as bar:
            result = write_preview(path, episode, out, camera=camera, every=every, progress=bar.update)
    except (TrajstoreError, OSError, ValueError, IndexError, ImportError) as exc:
        raise fail(exc)
    console.print(escape(result.line()), soft_wrap=True)
