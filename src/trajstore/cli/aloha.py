"""``trajstore import aloha DIR OUT``: a folder of ALOHA / ACT ``episode_N.hdf5`` files into a new buffer folder.

Parses the arguments, calls :func:`trajstore.interop.aloha.import_aloha`, prints its summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from trajstore.cli._format_options import IMPORT_KEY_HELP, Camera, import_episodes_option, key_option, parse_pairs
from trajstore.cli._output import progress_option
from trajstore.errors import TrajstoreError



def import_aloha_command(
    src: Path = typer.Argument(..., help="The folder of episode_N.hdf5 files (one episode each; other files "
                                         "are ignored, N of 10+ digits with a warning)."),
    out: Path = typer.Argument(..., help="The new buffer folder."),
    episodes: Optional[str] = import_episodes_option(),
    key: Optional[List[str]] = key_option(IMPORT_KEY_HELP),
    camera: Camera = typer.Option(Camera.jpeg, help="How to store camera frames (png: lossless)."),
    fps: float = typer.Option(50.0, help="Frames per second of the cameras (Hz); the files keep none "
                                         "(ALOHA records at 50)."),
    progress: bool = progress_option(),
) -> None:
    """Import ALOHA / ACT episodes: qpos, qvel, effort, action, base_action and the cameras (raw frames or
    the JPEG rows of compressed files; depth cameras as exact plain leaves); root attributes (sim, compress)
    become episode data."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.aloha import import_aloha

    key_map = parse_pairs(key)
    try:
        summary = import_aloha(src, out, episodes=episodes, key_map=key_map or None, camera=camera.value, fps=fps,
                               progress=progress)
    except (TrajstoreError, ImportError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)
