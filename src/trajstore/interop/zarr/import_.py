"""Import a zarr group in Diffusion Policy's layout into a new trajstore buffer folder.

See :mod:`trajstore.interop.zarr` for the mapping; :func:`import_zarr` is re-exported there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._fs import staged_folder
from trajstore.errors import InvalidValueError
from trajstore.interop.source_selection import SourceEpisode, select_source_episodes
from trajstore.interop.summary import ImportSummary
from trajstore.interop.zarr.codecs import register_codecs
from trajstore.interop.zarr.layout import SourceLayout, open_group, read_array, read_layout
from trajstore.spaces import DictSpace

#: Bytes of source data read (decoded) per block of steps: bounds the memory an import needs.
BLOCK_BYTES = 64 << 20


#: The summary :func:`import_zarr` returns (the name it had before imports shared one).
ZarrImportSummary = ImportSummary


def _zarr() -> Any:
    try:
        import zarr
    except ImportError:
        raise ImportError("zarr import/export needs zarr: pip install 'trajstore[zarr]'") from None
    return zarr


def nested_space(layout: SourceLayout) -> DictSpace:
    """The step space: each array's leaf space at its path, in the layout's order."""
    root: dict[str, Any] = {}
    for a in layout.arrays:
        node = root
        for key in a.path[:-1]:
            node = node.setdefault(key, {})
        node[a.path[-1]] = a.space

    def build(node: dict[str, Any]) -> DictSpace:
        return DictSpace({k: build(v) if isinstance(v, dict) else v for k, v in node.items()})

    return build(root)


def _block_steps(layout: SourceLayout) -> int:
    step_bytes = sum(int(np.prod(a.array.shape[1:], dtype=np.int64)) * np.dtype(a.array.dtype).itemsize
                     for a in layout.arrays)
    return max(1, BLOCK_BYTES // max(step_bytes, 1))


def _read_block(layout: SourceLayout, start: int, stop: int) -> dict[str, Any]:
    """Steps ``[start, stop)`` of every array, nested like the step space."""
    batch: dict[str, Any] = {}
    for a in layout.arrays:
        node = batch
        for key in a.path[:-1]:
            node = node.setdefault(key, {})
        node[a.path[-1]] = a.to_leaf(read_array(a.array, slice(start, stop), a.name), start)
    return batch


def import_zarr(src: str | os.PathLike, out: str | os.PathLike, *, image_keys: Iterable[str] | None = None,
                fps: float | None = None, key_map: Mapping[str, str] | None = None, camera: str = "jpeg",
                check_bounds: bool = True, episodes: Iterable[int] | str | None = None,
                progress: bool = False) -> ImportSummary:
    """Copy a zarr group in Diffusion Policy's ``ReplayBuffer`` layout into a new buffer folder ``out``.

    Every ``data/<key>`` array ``(N, ...)`` becomes a leaf; ``meta/episode_ends`` cuts the steps
    into episodes (``rb.episode(k)`` spans ``[ends[k-1], ends[k])``). Groups written by
    :func:`~trajstore.interop.zarr.export_zarr` come back as they were: nested leaf
    names, spaces (bounds, metadata) and episode data. Frames are decoded by the array's codec
    (JPEG 2000 / JPEG XL frames as Diffusion Policy writes them, Blosc, ...); zarr format 2 or 3,
    a folder or a ``.zip`` of one.

    Args:
        src: the zarr group (e.g. ``pusht_cchi_v7_replay.zarr``).
        out: a new (or empty) folder for the buffer; it appears only once the import succeeded.
        image_keys: arrays (keys under ``data/``) to store as camera frames. ``(N, H, W, 3)`` uint8
            arrays are cameras anyway. A float array named here must hold whole numbers in 0..255
            (checked while copying) and is stored as uint8 frames; its leaf metadata keeps
            ``zarr_dtype`` so that an export writes that dtype back. A float ``(N, H, W, 3)`` array
            not named here stays a float leaf (stored exactly, with a warning).
        fps: frames per second of the camera leaves (Hz); zarr keeps none. Default: the fps the
            export kept, else :data:`~trajstore.interop.zarr.layout.DEFAULT_FPS` (10 Hz, Diffusion
            Policy's PushT and real-world rate).
        key_map: ``{zarr key: leaf name}``, e.g. ``{"img": "observation/pixels", "state":
            "observation/state"}``; other arrays keep their kept name or their key.
        camera: how the buffer stores frames: ``"jpeg"`` (default, lossy), ``"png"`` (exact) or
            ``"video"`` (see ``trajstore record --camera``).
        check_bounds: passed to :meth:`ReplayBuffer.create`; ``False`` keeps NaN in float leaves.
        episodes: source episodes to import (their position ``k`` in ``meta/episode_ends``): indices, or a
            selection (``"0,3,5-9"``, or an expression over the episode data an export kept, ``"steps > 20"``;
            see :func:`~trajstore.interop.source_selection.select_source_episodes`); default all, in order.
        progress: show a progress bar (tqdm, in steps) on stderr.

    Raises:
        FormatError: the group is not in the layout (``meta/episode_ends`` missing, not strictly
            increasing or longer than the data, an array whose length is not ``episode_ends[-1]``, an
            array of more than :data:`~trajstore.interop.zarr.layout.MAX_STEP_BYTES` per step: the
            message names it), a trajstore attribute of the wrong type (``trajstore_keys`` not a list
            of strings, an episode's ``interrupted`` not a JSON bool, a data key that is a parameter of
            ``end_episode``: names the attribute and entry), a chunk that cannot be decoded (names the
            array), or a float frame value is not a whole number in 0..255. Raised before ``out`` is
            touched, except the chunks and frame values, found while copying (``out`` is then not made);
            a ``data/`` group without arrays.
        KeyError: ``image_keys`` or ``key_map`` name arrays the group does not have.
        StorageExistsError: ``out`` is a file or a non-empty folder.
        InvalidValueError: a value the buffer refuses (NaN with ``check_bounds=True``, a value outside the
            bounds ``trajstore_space`` keeps: names the group, the steps and the leaf).
        ValueError: an unknown ``camera``; ``episodes`` malformed, naming an episode the group does not
            have, or selecting none (InvalidValueError).
        ImportError: zarr, numcodecs or imagecodecs is missing (the ``zarr`` extra).
    """
    from tqdm import tqdm

    from trajstore._cameras import camera_routing
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    zarr = _zarr()
    register_codecs()
    routing = camera_routing(camera)
    group = open_group(src, zarr)
    layout = read_layout(group, src, image_keys=image_keys or (), fps=fps, key_map=key_map)
    space = nested_space(layout)
    block = _block_steps(layout)
    starts = np.concatenate([[0], layout.episode_ends[:-1]]).tolist()
    stops = layout.episode_ends.tolist()
    kept_data = layout.episode_data or [{"data": {}, "interrupted": False}] * len(stops)
    chosen = select_source_episodes([SourceEpisode(k, stops[k] - starts[k], kept_data[k]["data"])
                                     for k in range(len(stops))], episodes, source=str(src))
    steps = sum(stops[k] - starts[k] for k in chosen)
    with staged_folder(out) as tmp, tqdm(total=steps, unit="step", disable=not progress,
                                         desc=f"import {Path(src).name}") as bar:
        rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp, check_bounds=check_bounds,
                                 **dict_storage_kwargs_from_space(space, **routing))
        with rb:
            for k in chosen:
                start, stop = starts[k], stops[k]
                for a in range(start, stop, block):
                    b = min(a + block, stop)
                    try:
                        rb.extend(_read_block(layout, a, b))
                    except InvalidValueError as exc:
                        raise InvalidValueError(f"{src}: steps {a}..{b - 1}: {exc}") from None
                    bar.update(b - a)
                kept = kept_data[k]
                # read_layout refused data keys that are end_episode's own parameters
                rb.end_episode(interrupted=kept["interrupted"], **kept["data"])
    return ImportSummary(Path(out), len(chosen), steps,
                             {a.name: "/".join(a.path) for a in layout.arrays})

