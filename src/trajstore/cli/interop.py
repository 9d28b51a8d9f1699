"""``trajstore import FORMAT ...`` and ``trajstore export FORMAT ...``: other formats in and out.

Each command parses its arguments, calls one library function in ``trajstore.interop`` and
prints its summary; errors are one line (``fail`` of :mod:`trajstore.cli._output`).
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from trajstore.cli._format_options import (EXPORT_KEY_HELP, Camera, export_episodes_option, import_episodes_option,
                                           key_option, parse_pairs)
from trajstore.cli._output import progress_option
from trajstore.errors import TrajstoreError

import_app = typer.Typer(help="Make a new buffer folder from a dataset in another format.", no_args_is_help=True)
export_app = typer.Typer(help="Write a buffer folder out in another format.", no_args_is_help=True)


ANCHOR_HELP = ("Stream buffer only: the stream whose samples are the exported steps (default: a regular grid "
               "at --fps).")
HOW_HELP = ("Stream buffer only: STREAM=previous|nearest|linear, how a stream's value at a step's time is chosen "
            "(repeat; default previous: the latest sample at or before it).")
STREAMS_HELP = ("Stream buffer only: a stream to export (repeat; default every stream), e.g. to leave out one "
                "whose leaves the format cannot hold.")
TOLERANCE_HELP = ("Stream buffer only: STREAM=SECONDS, a value farther than this from the step's time is flagged "
                  "in is_pad (repeat; default: flagged only before a stream's first sample).")


LEROBOT_IMPORT_KEY_HELP = ("FEATURE=LEAF: the leaf a LeRobot feature becomes, e.g. "
                           "observation.images.front=observation/front (repeat).")
POLICY_KEYS_HELP = ("Name features as LeRobot's policies expect: cameras observation.images.<name>, the one "
                    "low-dimensional observation vector observation.state, action; --key entries win.")
LICENSE_HELP = "License of the dataset card (README.md), a Hub license id (default apache-2.0, as LeRobot)."
TAG_HELP = "Hub tag of the dataset card, after LeRobot (repeat)."
OLD_EPISODE_HELP = "Deprecated: use --episodes."


def episodes_argument(episodes: Optional[str], episode: Optional[List[int]]) -> "list[int] | str | None":
    """What ``episodes=`` of the library gets: the ``--episodes`` selection text, or the ids of the older
    ``--episode N`` (repeat; still accepted, with a note on stderr), or None. Both given: BadParameter."""
    if episode and episodes is not None:
        raise typer.BadParameter("give --episodes or the older --episode, not both", param_hint="--episodes")
    if episode:
        print(f"note: --episode is deprecated; use --episodes {','.join(str(i) for i in episode)}",
              file=sys.stderr, flush=True)
        return list(episode)
    return episodes


def lerobot_key_map(key: Optional[List[str]], policy_keys: bool) -> "dict[str, str] | str | None":
    """``key_map=`` of ``export_lerobot``: the ``--key`` pairs, ``"policy"`` for ``--policy-keys`` alone,
    both: the pairs over the preset (``{..., "*": "policy"}``); None when neither is given."""
    pairs = parse_pairs(key, "--key")
    if policy_keys:
        return {**pairs, "*": "policy"} if pairs else "policy"
    return pairs or None



@import_app.command("lerobot")
def import_lerobot_command(
    src: Path = typer.Argument(..., help="LeRobot v3.0 dataset folder (meta/info.json, data/, videos/)."),
    out: Path = typer.Argument(..., help="New buffer folder (must not exist, or be empty)."),
    camera: Camera = typer.Option(Camera.jpeg, help="How to store camera frames (png: lossless)."),
    episodes: Optional[str] = import_episodes_option(),
    key: Optional[List[str]] = key_option(LEROBOT_IMPORT_KEY_HELP),
    episode: Optional[List[int]] = typer.Option(None, "--episode", "-e", hidden=True, help=OLD_EPISODE_HELP),
    progress: bool = progress_option(),
) -> None:
    """Import a LeRobot v3.0 dataset (video, image and numeric features; the task as episode data)."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.lerobot import import_lerobot

    chosen = episodes_argument(episodes, episode)
    key_map = parse_pairs(key, "--key") or None
    try:
        summary = import_lerobot(src, out, camera=camera.value, episodes=chosen, progress=progress,
                                 **({"key_map": key_map} if key_map else {}))
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
    episodes: Optional[str] = export_episodes_option(),
    episode: Optional[List[int]] = typer.Option(None, "--episode", hidden=True, help=OLD_EPISODE_HELP),
    key: Optional[List[str]] = key_option(EXPORT_KEY_HELP),
    policy_keys: bool = typer.Option(False, "--policy-keys", help=POLICY_KEYS_HELP),
    license: Optional[str] = typer.Option(None, "--license", help=LICENSE_HELP),
    tag: Optional[List[str]] = typer.Option(None, "--tag", help=TAG_HELP),
    fps: Optional[float] = typer.Option(None, help="Frame rate in Hz (default: the leaves' metadata fps; for a "
                                                   "stream buffer at --anchor, that stream's fps metadata, else its "
                                                   "measured rate)."),
    task: str = typer.Option("", help="Task text of episodes whose data has no 'task'."),
    robot_type: Optional[str] = typer.Option(None, help="robot_type of meta/info.json."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="Leaf not to export, e.g. "
                                                                        "imu/orientation_covariance (repeat)."),
    progress: bool = progress_option(),
    anchor: Optional[str] = typer.Option(None, help=ANCHOR_HELP),
    streams: Optional[List[str]] = typer.Option(None, "--streams", help=STREAMS_HELP),
    how: Optional[List[str]] = typer.Option(None, "--how", help=HOW_HELP),
    tolerance: Optional[List[str]] = typer.Option(None, "--tolerance", help=TOLERANCE_HELP),
) -> None:
    """Export a buffer as a LeRobot dataset (v3.0, as lerobot 0.4.4 writes it). A stream buffer is exported
    through its aligned view: one frame per --anchor sample, or a regular --fps grid."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.lerobot.export import export_lerobot

    options = dict(episodes=episodes_argument(episodes, episode), repo_id=repo_id,
                   camera="image" if images else "video", vcodec=vcodec.value, crf=crf, default_task=task,
                   robot_type=robot_type, exclude=exclude or (), progress=progress)
    # Passed only when given, so that the defaults stay the library's.
    card = dict(key_map=lerobot_key_map(key, policy_keys), license=license, tags=tuple(tag or ()))
    options.update({name: value for name, value in card.items() if value not in (None, ())})
    try:
        if _stream_source(src, {"--anchor": anchor, "--streams": streams, "--how": how, "--tolerance": tolerance}):
            result = _export_streams("lerobot", src, out, fps, anchor, streams, how, tolerance, options)
        else:
            result = export_lerobot(src, out, fps=fps, **options)
    except (TrajstoreError, ImportError, ValueError, TypeError, OSError) as exc:
        raise fail(exc)
    console.print(escape(result.line()), soft_wrap=True)


def _stream_source(src: Path, options: dict[str, object]) -> bool:
    """Whether ``src`` is a stream buffer; alignment ``options`` (``{"--anchor": value, ...}``) given for a
    replay buffer are refused."""
    from trajstore.ops.stream_info import is_stream_folder

    if is_stream_folder(src):
        return True
    given = [name for name, value in options.items() if value is not None and value != []]
    if given:
        raise ValueError(f"{src} is not a stream buffer (no streams.json): {', '.join(given)} align the streams "
                         "of one")
    return False


def _export_streams(fmt: str, src: Path, out: Path, fps: Optional[float], anchor: Optional[str],
                    streams: Optional[List[str]], how: Optional[List[str]], tolerance: Optional[List[str]],
                    options: dict) -> object:
    """Export the stream buffer ``src`` through its aligned view; print the notes; the exporter's summary."""
    from trajstore.cli._output import console
    from trajstore.ops.stream_export import export_stream_buffer, parse_how, parse_tolerance

    result, notes = export_stream_buffer(fmt, src, out, fps=fps, anchor=anchor, how=parse_how(how),
                                         tolerance=parse_tolerance(tolerance), streams=streams or None, **options)
    for note in notes:
        console.print(escape(f"note: {note}"), soft_wrap=True)
    return result


class ZarrCompressor(str, Enum):
    jpeg2k = "jpeg2k"
    jpegxl = "jpegxl"
    raw = "raw"


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
    camera: Camera = typer.Option(Camera.jpeg, help="How the buffer stores frames."),
    check_bounds: bool = typer.Option(True, help="Refuse NaN in float leaves (--no-check-bounds keeps them)."),
    episodes: Optional[str] = import_episodes_option(),
    progress: bool = progress_option(),
) -> None:
    """Import a Diffusion Policy zarr replay buffer into a new trajstore buffer folder."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.zarr import import_zarr

    key_map = parse_pairs(key, "--key")
    try:
        summary = import_zarr(src, out, image_keys=image_key, fps=fps, key_map=key_map, camera=camera.value,
                              check_bounds=check_bounds, episodes=episodes, progress=progress)
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
    episodes: Optional[str] = export_episodes_option(),
    episode: Optional[List[int]] = typer.Option(None, "--episode", hidden=True, help=OLD_EPISODE_HELP),
    key: Optional[List[str]] = typer.Option(None, "--key", help="LEAF=ZARR_KEY, e.g. observation/pixels=img (repeat)."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", help="Leaf not to export (repeat)."),
    progress: bool = progress_option(),
    fps: Optional[float] = typer.Option(None, help="Stream buffer only: steps on a regular grid at this rate (Hz), "
                                                   "unless --anchor is given."),
    anchor: Optional[str] = typer.Option(None, help=ANCHOR_HELP),
    streams: Optional[List[str]] = typer.Option(None, "--streams", help=STREAMS_HELP),
    how: Optional[List[str]] = typer.Option(None, "--how", help=HOW_HELP),
    tolerance: Optional[List[str]] = typer.Option(None, "--tolerance", help=TOLERANCE_HELP),
) -> None:
    """Export a trajstore buffer folder as a Diffusion Policy zarr replay buffer. A stream buffer is exported
    through its aligned view (--anchor or --fps), with its timestamp (int64 ns) and is_pad.<stream> arrays.
    Plain zarr reads it; compressed frames need imagecodecs' codec registered where trajstore is not installed
    (the output line gives the call)."""
    from trajstore.cli._output import console, fail
    from trajstore.interop.zarr import export_zarr

    key_map = parse_pairs(key, "--key")
    options = dict(compressor=None if compressor is ZarrCompressor.raw else compressor.value, lossless=lossless,
                   episodes=episodes_argument(episodes, episode), key_map=key_map, exclude=exclude or (),
                   progress=progress)
    try:
        if _stream_source(src, {"--fps": fps, "--anchor": anchor, "--streams": streams, "--how": how,
                                "--tolerance": tolerance}):
            summary = _export_streams("zarr", src, out, fps, anchor, streams, how, tolerance, options)
        else:
            summary = export_zarr(src, out, **options)
    except KeyError as exc:
        raise fail(exc.args[0] if exc.args else exc)
    except (TrajstoreError, OSError, ValueError, ImportError) as exc:
        raise fail(exc)
    console.print(summary.line(), soft_wrap=True, markup=False)
