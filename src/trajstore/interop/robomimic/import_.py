"""Import a robomimic / LIBERO / MimicGen HDF5 file into a new trajstore buffer folder: what
``trajstore import robomimic SRC OUT`` calls. The file's layout and the checks made on it are in
:mod:`~trajstore.interop.robomimic._source`; the key names in :mod:`~trajstore.interop.robomimic._keys`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._fs import check_new_folder, staged_folder
from trajstore.errors import FormatError, InvalidValueError
from trajstore.interop.robomimic._keys import (KEY_METADATA, NEXT_OBS, OBS, OBSERVATION, default_export_key,
                                               import_leaves)
from trajstore.interop.robomimic._source import RobomimicSource, SourceDemo, SourceKey, open_source
from trajstore.interop.source_selection import SourceEpisode, select_source_episodes
from trajstore.interop.summary import ImportSummary
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, Space

#: Step rate (Hz) when neither ``fps`` nor ``env_args`` (``env_kwargs.control_freq``) gives one: robosuite's
#: default ``control_freq``, that of robomimic's, LIBERO's and MimicGen's datasets.
DEFAULT_FPS = 20
#: Bytes of source data read per block of steps: bounds the memory an import needs.
BLOCK_BYTES = 64 << 20


def import_robomimic(src: str | os.PathLike, out: str | os.PathLike, *, mask: str | None = None,
                     episodes: Iterable[int] | str | None = None, key_map: Mapping[str, str] | None = None,
                     camera: str = "jpeg", fps: float | None = None, model_file: bool = False,
                     progress: bool = False) -> ImportSummary:
    """Copy the demos of a robomimic-layout HDF5 file (robomimic, LIBERO, MimicGen, RoboCasa) into a new
    unbounded buffer folder ``out``: ``data/demo_N`` becomes one episode, sample ``t`` one step.

    - **Step space**: ``{"observation": {<obs key>: ...}, "action", "reward", "done", "state"}`` from
      ``obs/<key>``, ``actions`` ``(A,)``, ``rewards`` ``()``, ``dones`` ``()`` (bool; a value other than 0/1
      is a FormatError), ``states`` ``(S,)``; any other per-sample dataset of the demo (LIBERO's
      ``robot_states``, MimicGen's ``datagen_info/...``) becomes a leaf at its own path. Dtypes are the
      file's (robosuite's low-dim data is float64). ``key_map`` renames; a leaf whose path an export would not
      turn back into its source key (renamed, or a nested ``obs/a/b``) keeps that key in its metadata
      (``{"robomimic_key": "obs/agentview_image"}``, beside a camera's ``kind``/``layout``/``fps``), which
      :func:`~trajstore.interop.robomimic.export_robomimic` writes it back to.
    - **Cameras**: ``obs`` keys of ``(N, H, W, 3)`` uint8 become camera leaves ``(H, W, 3)`` uint8 with
      metadata ``{"kind": "image", "layout": "HWC", "fps": fps}``, stored as ``camera`` says. Other image-like
      keys (depth ``*_depth`` float ``(H, W, 1)``, segmentation) stay exact numeric leaves in HDF5.
    - **Final observation**: ``next_obs`` of the last sample becomes ``end_episode(final_observation=...)``;
      the other ``next_obs`` rows are not kept (robomimic writes them as the next sample's ``obs``; that is
      not checked). A file without ``next_obs`` gives episodes without final observations.
    - **Episode data**: ``{"demo": "demo_N", "masks": [filter keys holding it]}``, plus ``"attrs"`` only when
      the demo has other small attributes (``{name: text, number or list of numbers}``; text up to 1 M
      characters, arrays up to 1024 values, finite floats; others left out; ``num_samples`` is the episode's
      length), plus ``"model_file"`` (the demo's MJCF XML, often 50-300 kB each, at most 16 M characters)
      only with ``model_file=True``.
    - **Root metadata**: the step space's ``DictSpace`` metadata ``{"robomimic": {"env_args": {...},
      "total": int}}`` (those the file has), from the ``data`` attributes.
    - Demos are imported by number (``demo_10`` after ``demo_9``).

    Args:
        src: the ``.hdf5`` file.
        out: a new (or empty) folder; it appears only once the import succeeded (built in a hidden sibling).
        mask: import only the demos of filter key ``mask/<mask>`` (``"train"``, ``"valid"``, ``"20_percent"``).
        episodes: demos to import, by the N of ``demo_N``: a list of N, or a selection text as ``trajstore copy
            --episodes`` takes (``"0-9"``, ``'demo == "demo_3"'``) over the episode data above; default all
            (of ``mask``).
        key_map: ``{source key: leaf path}``, e.g. ``{"obs/agentview_image": "observation/images/front"}``;
            a source key is a dataset's path in the demo. ``obs/`` keys must stay under ``observation/``.
        camera: ``"jpeg"`` (default, lossy), ``"png"`` (exact) or ``"video"``.
        fps: step rate in Hz for the camera metadata; default ``env_args["env_kwargs"]["control_freq"]``, else
            :data:`DEFAULT_FPS` (20 Hz).
        model_file: keep each demo's ``model_file`` attribute as episode data.
        progress: show a progress bar (tqdm, in samples) on stderr.

    Returns:
        An :class:`~trajstore.interop.summary.ImportSummary` (``leaves``: source key -> leaf path).

    Raises:
        FileNotFoundError: ``src`` does not exist.
        FormatError: the file is not in the layout, or is hostile (see
            :mod:`~trajstore.interop.robomimic._source`); a ``dones`` value other than 0/1 (found while
            copying; ``out`` is then not made).
        InvalidValueError: an unknown ``mask`` (lists those held), a bad selection, a ``key_map`` naming a key
            the demos lack, or a value the buffer refuses (NaN: names the demo and leaf).
        StorageExistsError: ``out`` is a file or a non-empty folder.
        ValueError: an unknown ``camera``, ``fps`` not a positive number.
        ImportError: h5py is missing.
        Everything but the values is checked before anything is written.
    """
    from tqdm import tqdm

    from trajstore._cameras import camera_routing
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    routing = camera_routing(camera)
    if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps < math.inf):
        raise ValueError(f"fps must be a positive number of Hz, got {fps!r}")
    out = Path(out)
    check_new_folder(out)
    with open_source(src, model_file=model_file) as (f, source):
        demos = _chosen(source, mask, episodes)
        leaves = import_leaves([k.key for k in source.keys], key_map, str(source.path))
        space = step_space(source, leaves, _fps(fps, source))
        with staged_folder(out) as staging, tqdm(total=sum(d.length for d in demos), unit="sample",
                                                 disable=not progress, desc=f"import {source.path.name}") as bar:
            with ReplayBuffer.create(DictStorage, space, cache_path=staging,
                                     **dict_storage_kwargs_from_space(space, **routing)) as rb:
                for demo in demos:
                    _copy_demo(f, source, demo, leaves, rb, bar)
    return ImportSummary(out, len(demos), sum(d.length for d in demos), dict(leaves))


def _chosen(source: RobomimicSource, mask: str | None, episodes: Iterable[int] | str | None) -> list[SourceDemo]:
    demos = list(source.demos)
    if mask is not None:
        if mask not in source.masks:
            raise InvalidValueError(f"{source.path}: no filter key mask/{mask} (it has: "
                                    f"{sorted(source.masks) or 'none'})")
        held = set(source.masks[mask])
        demos = [d for d in demos if d.name in held]
    by_index = {d.index: d for d in demos}
    chosen = select_source_episodes([SourceEpisode(d.index, d.length, d.data) for d in demos], episodes,
                                    source=f"{source.path}" + (f" (mask/{mask})" if mask else ""))
    return [by_index[i] for i in chosen]


def _fps(fps: float | None, source: RobomimicSource) -> float:
    if fps is not None:
        return fps
    kwargs = (source.env_args or {}).get("env_kwargs")
    rate = kwargs.get("control_freq") if isinstance(kwargs, dict) else None
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 < rate < math.inf:
        return rate
    return DEFAULT_FPS


def _leaf_space(k: SourceKey, fps: float) -> Space:
    if k.camera:
        rate = int(fps) if float(fps).is_integer() else float(fps)
        return BoxSpace(0, 255, k.shape, np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": rate})
    if k.key == "dones" or k.dtype.kind == "b":
        return BinarySpace(k.shape)
    if k.dtype.kind in "iu":
        info = np.iinfo(k.dtype)
        return BoxSpace(info.min, info.max, k.shape, k.dtype)
    return BoxSpace(-np.inf, np.inf, k.shape, k.dtype)


def step_space(source: RobomimicSource, leaves: Mapping[str, str], fps: float) -> DictSpace:
    """The step space of ``source``'s samples under the leaf paths ``leaves`` (source key -> leaf path), with
    the root metadata ``{"robomimic": {...}}``."""
    tree: dict[str, Any] = {}
    for k in sorted(source.keys, key=_rank):
        *parents, name = leaves[k.key].split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        space = _leaf_space(k, fps)
        if default_export_key(tuple(leaves[k.key].split("/"))) != k.key:  # renamed: an export names it as it was
            space = space.with_metadata({KEY_METADATA: k.key})
        node[name] = space
    kept = {"env_args": source.env_args, "total": source.total}

    def build(node: dict[str, Any], metadata: Any = None) -> DictSpace:
        return DictSpace({k: build(v) if isinstance(v, dict) else v for k, v in node.items()}, metadata)

    try:
        return build(tree, {"robomimic": {k: v for k, v in kept.items() if v is not None}})
    except (TypeError, ValueError) as exc:  # NaN or Infinity in env_args: JSON text, not JSON values
        raise FormatError(f"{source.path}: data attribute env_args cannot be kept: {exc}") from None


def _rank(k: SourceKey) -> tuple[int, str]:
    """Leaf order: observations, then actions, rewards, dones, states, then any other dataset."""
    known = ("actions", "rewards", "dones", "states")
    return (0 if k.key.startswith(OBS + "/") else 1 + known.index(k.key) if k.key in known else 5), k.key


def _nest(values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for leaf, value in values.items():
        *parents, name = leaf.split("/")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[name] = value
    return out


def _read(ds: Any, k: SourceKey, rows: slice | int, where: str) -> np.ndarray:
    values = ds[rows]
    if k.key == "dones" or (k.key == "rewards"):
        values = np.reshape(values, (-1,) if isinstance(rows, slice) else ())
    if k.key == "dones":
        bad = (values != 0) & (values != 1)
        if np.any(bad):
            raise FormatError(f"{where}: dones holds {values[bad][0].item()!r} (sample {int(np.flatnonzero(bad)[0])}); robomimic's dones are 0 or 1")
        values = values.astype(bool)
    return values


def _copy_demo(f: Any, source: RobomimicSource, demo: SourceDemo, leaves: Mapping[str, str], rb: Any,
               bar: Any) -> None:
    group = f["data"][demo.name]
    where = f"{source.path}: data/{demo.name}"
    sets = {k.key: group[k.key] for k in source.keys}
    step_bytes = sum(math.prod(k.shape) * k.dtype.itemsize for k in source.keys)
    block = max(1, BLOCK_BYTES // max(step_bytes, 1))
    for a in range(0, demo.length, block):
        b = min(a + block, demo.length)
        batch = _nest({leaves[k.key]: _read(sets[k.key], k, slice(a, b), where) for k in source.keys})
        try:
            rb.extend(batch)
        except InvalidValueError as exc:
            raise InvalidValueError(f"{where}: samples {a}..{b - 1}: {exc}") from None
        bar.update(b - a)
    final = None
    if source.has_next_obs:
        obs = [k for k in source.keys if k.key.startswith(OBS + "/")]
        last = {leaves[k.key][len(OBSERVATION) + 1:]: _read(group[f"{NEXT_OBS}/{k.key[len(OBS) + 1:]}"], k,
                                                              demo.length - 1, where) for k in obs}
        final = _nest(last)
    try:
        rb.end_episode(final_observation=final, flush=False, **demo.data)
    except InvalidValueError as exc:
        raise InvalidValueError(f"{where}: next_obs of the last sample: {exc}") from None
