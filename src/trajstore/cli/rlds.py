"""``trajstore import rlds DIR OUT``: an RLDS / Open X-Embodiment dataset (TFDS directory) into a new buffer.

Parses the arguments, calls :func:`trajstore.interop.rlds.import_rlds`, prints its summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from trajstore.cli._format_options import IMPORT_KEY_HELP, Camera, import_episodes_option, key_option, parse_pairs
from trajstore.cli._output import progress_option
from trajstore.errors import TrajstoreError

__all__ = ["import_rlds_command"]



def import_rlds_command(
    src: Path = typer.Argument(..., help="The TFDS builder folder (.../<name>/<version>, with dataset_info.json), "
                                         "or its parent when it holds one version."),
    out: Path = typer.Argument(..., help="New buffer folder (must not exist, or be empty)."),
    split: str = typer.Option("train", "--split", help="The TFDS split to import."),
    episodes: Optional[str] = import_episodes_option(),
    key: Optional[List[str]] = key_option(IMPORT_KEY_HELP + " Source keys are step features, with or without 'steps/'."),
    camera: Camera = typer.Option(Camera.jpeg, help="How to store RGB camera frames (png: lossless)."),
    fps: Optional[float] = typer.Option(None, "--fps", help="Camera rate in Hz (RLDS keeps none; default 10)."),
    progress: bool = progress_option(),
) -> None:
    """Import an RLDS / Open X-Embodiment dataset without TensorFlow: steps/* as leaves, images as cameras,
    is_terminal as terminated, is_last and not is_terminal as truncated, language_instruction as the task,
    episode_metadata as episode data."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.rlds import import_rlds

    key_map = parse_pairs(key)
    try:
        summary = import_rlds(src, out, split=split, episodes=episodes, key_map=key_map or None,
                              camera=camera.value, fps=fps, progress=progress)
    except (TrajstoreError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)
