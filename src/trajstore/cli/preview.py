"""``trajstore preview PATH --episode K --out FILE [--camera KEY] [--frames K | --every N] [--no-plots]``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from trajstore.cli._output import console, fail, progress_bar, progress_option
from trajstore.errors import TrajstoreError


def preview(path: Path = typer.Argument(..., help="Buffer folder."),
            episode: int = typer.Option(..., help="Episode id (see `trajstore episodes`)."),
            out: Path = typer.Option(..., help="Output file: .png (contact sheet: one row of frames per camera, "
                                               "plots, episode data) or .mp4 (every camera side by side, one "
                                               "frame per step, plots with a cursor)."),
            camera: Optional[str] = typer.Option(None, help="Show only this camera leaf, e.g. observation/pixels "
                                                            "(default: every camera)."),
            frames: Optional[int] = typer.Option(None, help="Frames per camera of a .png sheet, evenly spaced "
                                                            "over the episode [default: 16]."),
            every: Optional[int] = typer.Option(None, help="Every N-th step in a .png sheet instead of --frames."),
            plots: bool = typer.Option(True, help="Plot the low-dim leaves (state, action, reward; needs "
                                                  "matplotlib: pip install 'trajstore[preview]')."),
            progress: bool = progress_option()) -> None:
    """Write a preview of one episode: a .png contact sheet (frames labelled with step and time, plots of
    the low-dim leaves, the episode data) or an .mp4 video at the buffer's fps with the plots beside it."""
    from trajstore.ops.preview import write_preview
    from trajstore.ops.stream_info import is_stream_folder

    if is_stream_folder(path):
        from trajstore.cli.streams import preview_refusal

        raise fail(preview_refusal(str(path)))
    if frames is not None and every is not None:
        raise fail("give --frames or --every, not both (--frames K: K frames evenly spaced; --every N: every "
                   "N-th step)")
    for name, value in (("--frames", frames), ("--every", every)):
        if value is not None and value < 1:
            raise fail(f"{name} must be a whole number >= 1, got {value}")
    if out.suffix.lower() == ".mp4" and (frames is not None or every is not None):
        raise fail("--frames and --every choose the frames of a .png sheet; an .mp4 preview shows every step")
    try:
        with progress_bar(desc="decoding frames", unit="step", enabled=progress) as bar:
            result = write_preview(path, episode, out, camera=camera, frames=frames, every=every, plots=plots,
                                   progress=bar.update)
    except (TrajstoreError, OSError, ValueError, IndexError, ImportError) as exc:
        raise fail(exc)
    console.print(escape(result.line()), soft_wrap=True)
