"""``trajstore import robomimic SRC OUT`` and ``trajstore export robomimic BUFFER OUT_FILE``: robomimic /
LIBERO / MimicGen HDF5 files in and out. Each parses its options, calls
:func:`trajstore.interop.robomimic.import_robomimic` / :func:`~trajstore.interop.robomimic.export_robomimic`
and prints the summary line.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from trajstore.cli._format_options import (EXPORT_EPISODES_HELP, EXPORT_KEY_HELP, IMPORT_EPISODES_HELP,
                                           IMPORT_KEY_HELP, Camera, parse_pairs)
from trajstore.cli._output import progress_option
from trajstore.errors import TrajstoreError



def import_robomimic_command(
    src: Path = typer.Argument(..., help="robomimic-layout .hdf5 file (data/demo_N, mask/...)."),
    out: Path = typer.Argument(..., help="New buffer folder (must not exist, or be empty)."),
    mask: Optional[str] = typer.Option(None, help="Import only the demos of this filter key (mask/<MASK>, "
                                                  "e.g. train, valid, 20_percent)."),
    episodes: Optional[str] = typer.Option(None, "--episodes", help=IMPORT_EPISODES_HELP + " The index is the N of "
                                           "demo_N; the data is {demo, masks, attrs}."),
    key: Optional[List[str]] = typer.Option(None, "--key", help=IMPORT_KEY_HELP + " Source keys are paths in the "
                                            "demo: obs/agentview_image, actions, ..."),
    camera: Camera = typer.Option(Camera.jpeg, help="How to store camera frames (png: lossless)."),
    fps: Optional[float] = typer.Option(None, help="Step rate in Hz (default: env_args "
                                        "control_freq, else 20)."),
    model_file: bool = typer.Option(False, "--model-file", help="Keep each demo's model_file (MJCF XML) as "
                                                                "episode data."),
    progress: bool = progress_option(),
) -> None:
    """Import a robomimic / LIBERO / MimicGen HDF5 file: one episode per demo, next_obs of the last sample as
    the final observation, masks and env_args kept."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.robomimic import import_robomimic

    key_map = parse_pairs(key)
    try:
        summary = import_robomimic(src, out, mask=mask, episodes=episodes, key_map=key_map or None,
                                   camera=camera.value, fps=fps, model_file=model_file, progress=progress)
    except (TrajstoreError, ImportError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)


def export_robomimic_command(
    src: Path = typer.Argument(..., help="Buffer folder."),
    out: Path = typer.Argument(..., help="New .hdf5 file (must not exist)."),
    episodes: Optional[str] = typer.Option(None, "--episodes", help=EXPORT_EPISODES_HELP + " Episodes the ring cut "
                                           "(lost their first steps) are left out; naming one is an error."),
    key: Optional[List[str]] = typer.Option(None, "--key", help=EXPORT_KEY_HELP + " Keys are paths in the demo: "
                                            "observation/pixels=obs/agentview_image."),
    val_fraction: Optional[float] = typer.Option(None, min=0.0, max=1.0, help="Write mask/train and mask/valid, "
                                                 "this fraction of the episodes in valid."),
    seed: int = typer.Option(0, help="Seed of the --val-fraction split."),
    mask: Optional[List[str]] = typer.Option(None, "--mask", help="NAME=SELECTION: a filter key mask/NAME of the "
                                             "episodes a selection chooses, e.g. success='success == true' "
                                             "(repeat; ids must be exported episodes, a mask holding none is "
                                             "refused). Default without --val-fraction: the masks an import kept."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="Leaf not to export, e.g. a text leaf "
                                                "(repeat)."),
    progress: bool = progress_option(),
) -> None:
    """Export a buffer as a robomimic HDF5 file (data/demo_i with obs, next_obs, actions, rewards, dones;
    images gzip-compressed), which robomimic's SequenceDataset reads."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.robomimic import export_robomimic

    key_map = parse_pairs(key)
    masks = parse_pairs(mask, "--mask")
    try:
        result = export_robomimic(src, out, episodes=episodes, key_map=key_map or None, val_fraction=val_fraction,
                                  seed=seed, masks=masks or None, exclude=exclude or (),
                                  progress=progress)
    except (TrajstoreError, ImportError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(result.line(), soft_wrap=True, markup=False)
