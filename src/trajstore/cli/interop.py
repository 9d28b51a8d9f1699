"""``trajstore import FORMAT SRC OUT`` and ``trajstore export FORMAT SRC OUT``: other formats in and out.

Each command parses its options, calls one library function and prints one summary line; an error
is one line naming the path and the problem (``fail`` in :mod:`trajstore.cli.main`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

import_app = typer.Typer(help="Import another format into a new trajstore buffer folder.", no_args_is_help=True)
export_app = typer.Typer(help="Export a trajstore buffer folder to another format.", no_args_is_help=True)


class ZarrCompressor(str, Enum):
    jpeg2k = "jpeg2k"
    jpegxl = "jpegxl"
    raw = "raw"


class ZarrCamera(str, Enum):
    jpeg = "jpeg"
    png = "png"
    video = "video"


def _pairs(values: Optional[List[str]], option: str) -> dict[str, str]:
    """``["a=b", ...]`` -> ``{"a": "b"}``."""
    out = {}
    for value in values or []:
        name, sep, target = value.partition("=")
        if not sep or not name or not target:
            raise typer.BadParameter(f"expected NAME=TARGET, got {value!r}", param_hint=option)
        out[name] = target
    return out


@import_app.command("zarr")
def import_zarr_command(
    src: Path = typer.Argument(..., help="Zarr group in Diffusion Policy's layout (data/<key>, meta/episode_ends), "
                                         "a folder or a .zip."),
    out: Path = typer.Argument(..., help="New buffer folder."),
    image_key: Optional[List[str]] = typer.Option(None, "--image-key", help="Array under data/ to store as camera "
                                                  "frames (repeat); (N, H, W, 3) uint8 arrays are cameras anyway."),
    fps: Optional[float] = typer.Option(None, min=0.001, help="Frames per second of camera leaves (default: kept by "
                                                                "a trajstore export, else 10)."),
    key: Optional[List[str]] = typer.Option(None, "--key", help="ZARR_KEY=LEAF, e.g. img=observation/pixels (repeat)."),
    camera: ZarrCamera = typer.Option(ZarrCamera.jpeg, help="How the buffer stores frames."),
    check_bounds: bool = typer.Option(True, help="Refuse NaN in float leaves (--no-check-bounds keeps them)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Import a Diffusion Policy zarr replay buffer into a new trajstore buffer folder."""
    from trajstore.cli.main import console, fail
    from trajstore.errors import TrajstoreError
    from trajstore.integrations.zarr_replay import import_zarr

    key_map = _pairs(key, "--key")
    try:
        summary = import_zarr(src, out, image_keys=image_key, fps=fps, key_map=key_map, camera=camera.value,
                              check_bounds=check_bounds, progress=progress)
    except KeyError as exc:
        raise fail(exc.args[0] if exc.args else exc)
    except (TrajstoreError, OSError, ValueError, ImportError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)


@export_app.command("zarr")
def export_zarr_command(
    src: Path = typer.Argument(..., help="Buffer folder."),
    out: Path = typer.Argument(..., help="New zarr folder (format 2, Diffusion Policy's layout)."),
    compressor: ZarrCompressor = typer.Option(ZarrCompressor.jpeg2k, help="Frame codec (raw: uncompressed)."),
    lossless: bool = typer.Option(False, help="Lossless frame coding (jpeg2k or jpegxl)."),
    episode: Optional[List[int]] = typer.Option(None, "--episode", help="Episode id to export (repeat; default all "
                                                                         "ended episodes)."),
    key: Optional[List[str]] = typer.Option(None, "--key", help="LEAF=ZARR_KEY, e.g. observation/pixels=img (repeat)."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="Leaf not to export (repeat)."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Export a trajstore buffer folder as a Diffusion Policy zarr replay buffer."""
    from trajstore.cli.main import console, fail
    from trajstore.errors import TrajstoreError
    from trajstore.integrations.zarr_replay import export_zarr

    key_map = _pairs(key, "--key")
    try:
        summary = export_zarr(src, out, compressor=None if compressor is ZarrCompressor.raw else compressor.value,
                              lossless=lossless, episodes=episode or None, key_map=key_map, exclude=exclude or (),
                              progress=progress)
    except KeyError as exc:
        raise fail(exc.args[0] if exc.args else exc)
    except (TrajstoreError, OSError, ValueError, ImportError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)
