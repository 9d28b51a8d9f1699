"""The registry of formats trajstore imports and exports: ``trajstore formats`` prints it, and every
``trajstore import FORMAT`` / ``export FORMAT`` command is one of its entries.

Each entry names the library function that does the work (imported only when called, so a format's
optional dependencies are needed only by its users), the pip extra those need, and what a round trip
through the format keeps and loses. Every importer takes ``episodes=`` (a selection, see
:mod:`~trajstore.interop.source_selection`), ``key_map=`` (source key -> leaf path) and ``progress=``;
every exporter ``episodes=`` (ids or a selection of the buffer's episodes), ``key_map=`` (leaf path ->
the format's key) and ``progress=``. Importers build the buffer in a hidden sibling folder
(:func:`trajstore._fs.staged_folder`) and check the source's declared sizes before reading it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["FORMATS", "Format", "exporter", "importer"]


@dataclass(frozen=True)
class Format:
    """One format.

    Attributes:
        name: the FORMAT of ``trajstore import FORMAT`` / ``export FORMAT``.
        title: what it is, for people.
        import_fn, export_fn: ``"module:function"``, or ``None`` when trajstore does not go that way.
        extra: the pip extra its dependencies come with (``pip install 'trajstore[<extra>]'``).
        keeps: what a round trip through it keeps.
        loses: what it cannot hold.
    """

    name: str
    title: str
    import_fn: str | None
    export_fn: str | None
    extra: str
    keeps: str
    loses: str


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("lerobot", "LeRobot dataset v3.0", "trajstore.interop.lerobot:import_lerobot",
           "trajstore.interop.lerobot.export:export_lerobot", "lerobot",
           "low-dim values exact in their dtype, cameras (PNG with --images: exact; video within codec loss), "
           "tasks, stats, a Hub dataset card; from trajstore's own exports also leaf paths, scalar () shapes, "
           "spaces and leaf metadata, episode data, interrupted flags, final observations",
           "ring capacity; metadata of non-leaf DictSpaces; from datasets LeRobot wrote: episode data other "
           "than the task"),
    Format("zarr", "Diffusion Policy zarr replay buffer", "trajstore.interop.zarr:import_zarr",
           "trajstore.interop.zarr:export_zarr", "zarr",
           "every leaf (frames JPEG 2000, lossless with --lossless), episode ends, episode data and interrupted "
           "flags (group attributes)",
           "final observations, text leaves, leaf metadata other than fps, episodes cut by a ring"),
    Format("rlds", "RLDS / Open X-Embodiment (TFDS dataset directory)", "trajstore.interop.rlds:import_rlds",
           None, "rlds",
           "every steps/* feature as a leaf (nested), RGB images as cameras, is_terminal as terminated, is_last and not is_terminal as truncated, "
           "language_instruction as the task (a per-step text leaf when it changes), episode_metadata as "
           "episode data, dataset name/version/split",
           "import only; is_first/is_last (the episode boundaries); no rate in RLDS (--fps, default 10 Hz)"),
    Format("robomimic", "robomimic / LIBERO / MimicGen HDF5", "trajstore.interop.robomimic:import_robomimic",
           "trajstore.interop.robomimic:export_robomimic", "",
           "obs, actions, rewards, dones, states and other per-sample datasets; next_obs of the last sample as "
           "the final observation; masks; env_args; demo attributes (model_file with --model-file)",
           "next_obs rows other than the last (rewritten as the next obs); other episode data; interrupted "
           "flags; episodes cut by a ring; leaf metadata other than camera fps; text leaves"),
    Format("aloha", "ALOHA / ACT episode_N.hdf5 folder", "trajstore.interop.aloha:import_aloha", None, "",
           "qpos, qvel, effort, action, base_action (dtype kept), cameras (raw: exact with --camera png; JPEG "
           "rows decoded in ACT's channel order), depth cameras as exact plain leaves, root attributes as "
           "episode data",
           "import only; compress_len (checked, not kept)"),
    Format("rosbag", "ROS 2 bags (sqlite3 or MCAP)", "trajstore.interop.rosbag:import_rosbag", None, "ros",
           "each topic a stream at its own rate and timestamps", "import only; message types not listed"),
)}


def _resolve(spec: str | None, name: str, way: str) -> Callable[..., Any]:
    if spec is None:
        raise ValueError(f"trajstore does not {way} {name!r}")
    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)


def _format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; known: {', '.join(sorted(FORMATS))}") from None


def importer(name: str) -> Callable[..., Any]:
    """The import function of format ``name``. Raises ValueError for an unknown format or one not imported."""
    return _resolve(_format(name).import_fn, name, "import")


def exporter(name: str) -> Callable[..., Any]:
    """The export function of format ``name``. Raises ValueError for an unknown format or one not exported."""
    return _resolve(_format(name).export_fn, name, "export")
