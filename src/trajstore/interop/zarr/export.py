"""Export a trajstore buffer as a zarr group in Diffusion Policy's layout (zarr format 2).

See :mod:`trajstore.interop.zarr` for the mapping; :func:`export_zarr` is re-exported there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._fs import staged_folder
from trajstore.errors import InvalidValueError, UnknownLeafError, UnsupportedSpaceError
from trajstore.interop.zarr.codecs import frame_compressor, reading_note, register_codecs
from trajstore._text import count as _count
from trajstore.interop.zarr.import_ import BLOCK_BYTES, _zarr
from trajstore.interop.zarr.layout import ATTR_EPISODE_DATA, ATTR_KEYS, ATTR_LAYOUT, ATTR_PATH, ATTR_SPACE
from trajstore.spaces import BinarySpace, BoxSpace, Space, tree
from trajstore.storages.frames import FrameLayout

#: Target bytes of one chunk of a non-frame array (steps along the first axis only, as Diffusion
#: Policy chunks; its own default targets 2 MB).
LOWDIM_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class ZarrExportSummary:
    """What :func:`export_zarr` wrote: ``out``, episodes, steps, ``{leaf name: zarr key}``, bytes on disk,
    and the numcodecs id of the frame codec (``None``: no compressed frames)."""

    out: Path
    episodes: int
    steps: int
    keys: dict[str, str]
    nbytes: int
    frame_codec: str | None = None

    def line(self) -> str:
        text = (f"exported {_count(self.episodes, 'episode')} ({_count(self.steps, 'step')}, "
                f"{_count(len(self.keys), 'array')}, {self.nbytes:,} bytes) to {self.out}")
        return text if self.frame_codec is None else f"{text}; {reading_note(self.frame_codec)}"


@dataclass(frozen=True)
class _LeafPlan:
    path: tuple[str, ...]
    space: Space
    key: str
    dtype: np.dtype  # written dtype: the leaf's, or the zarr_dtype an import kept
    frames: bool     # (H, W, 3) uint8 camera frames: one frame per chunk, frame codec
    layout: FrameLayout = FrameLayout()  # "CHW": a (3, H, W) leaf, written (H, W, 3)

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape per step: the leaf's, channel last for a CHW camera."""
        return self.layout.stored_shape(self.space.shape)  # type: ignore[attr-defined]


def default_key(path: tuple[str, ...]) -> str:
    """The zarr key of a leaf: its nested keys joined by ``"."`` (``observation/pixels`` -> ``observation.pixels``)."""
    return ".".join(path)


def _plan_leaves(space: Space, key_map: Mapping[str, str], exclude: set[str]) -> list[_LeafPlan]:
    names = {tree.path_name(p) for p, _ in tree.leaves(space)}
    unknown = sorted((set(key_map) | exclude) - names)
    if unknown:
        raise UnknownLeafError(f"key_map/exclude name {unknown}, not leaves of the buffer (leaves: {sorted(names)})")
    bad = [(tree.path_name(p), leaf) for p, leaf in tree.leaves(space)
           if tree.path_name(p) not in exclude and not isinstance(leaf, (BoxSpace, BinarySpace))]
    if bad:
        names_bad = [n for n, _ in bad]
        raise UnsupportedSpaceError(
            f"leaf {names_bad[0]!r}: {type(bad[0][1]).__name__} has no zarr array form in Diffusion Policy's layout "
            f"(numbers and bools only); leave {'it' if len(bad) == 1 else f'the {len(bad)} such leaves'} out with "
            f"exclude={names_bad} (on the command line " + " ".join(f"--exclude {n}" for n in names_bad) + ")")
    plans: list[_LeafPlan] = []
    owner: dict[str, str] = {}
    for path, leaf in tree.leaves(space):
        name = tree.path_name(path)
        if name in exclude:
            continue
        key = key_map.get(name) or leaf.metadata.get("zarr_key") or default_key(path)
        if not key or "/" in key or key in (".", "..") or key.startswith("__"):
            raise ValueError(f"leaf {name!r}: {key!r} cannot name a zarr array (no '/', not empty, '.', '..' or '__...')")
        if key in owner:
            raise ValueError(f"leaves {owner[key]!r} and {name!r} both map to the zarr key {key!r}; rename one with key_map")
        owner[key] = name
        zarr_dtype = leaf.metadata.get("zarr_dtype")
        dtype = np.dtype(zarr_dtype) if zarr_dtype else np.dtype(leaf.dtype)
        layout = FrameLayout.of_camera(leaf)
        shape = layout.stored_shape(leaf.shape)
        frames = (leaf.metadata.get("kind") == "image" and dtype == np.uint8 and len(shape) == 3 and shape[2] == 3)
        plans.append(_LeafPlan(path, leaf, key, dtype, frames, layout if frames else FrameLayout()))
    if not plans:
        raise ValueError("every leaf is excluded: nothing to export")
    return plans


class _ChunkAlignedWriter:
    """Writes blocks of steps into a zarr array in whole chunks (a partial chunk would be read,
    decompressed and rewritten at every block); the last partial chunk is written by :meth:`close`."""

    def __init__(self, array: Any, chunk_steps: int):
        self.array, self.chunk_steps = array, chunk_steps
        self.offset, self.pending, self.pending_steps = 0, [], 0

    def add(self, values: np.ndarray) -> None:
        self.pending.append(values)
        self.pending_steps += len(values)
        if self.pending_steps >= self.chunk_steps:
            whole = self.pending_steps - self.pending_steps % self.chunk_steps
            self._write(whole)

    def _write(self, n: int) -> None:
        block = self.pending[0] if len(self.pending) == 1 else np.concatenate(self.pending)
        self.array[self.offset:self.offset + n] = block[:n]
        self.offset += n
        rest = block[n:]
        self.pending, self.pending_steps = ([rest] if len(rest) else []), len(rest)

    def close(self) -> None:
        if self.pending_steps:
            self._write(self.pending_steps)


def _select_episodes(rb: Any, episodes: Iterable[int] | str | None) -> list[Any]:
    """The episodes to export, oldest first: the given ids or selection, or every held episode but one still
    being recorded and one the ring took the first steps of (``Episode.overwritten``, as the LeRobot
    export does: an id named explicitly is a ValueError, an expression leaves it out)."""
    held = rb.episodes
    closed = [e for e in held if e.done or e.interrupted]
    where = getattr(rb, "cache_path", None) or "buffer"
    if episodes is None:
        return [e for e in closed if not e.overwritten]
    if isinstance(episodes, str):
        from trajstore.replay_buffer.episode_query import parse_selection

        selection = parse_selection(episodes)
        try:
            wanted = selection.select(closed)
        except InvalidValueError as exc:
            raise InvalidValueError(f"{where}: {exc} (an episode still being recorded cannot be exported)") from None
        if selection.ranges is None:  # an expression: the whole episodes it selects
            lost = {e.id for e in closed if e.overwritten}
            wanted = [i for i in wanted if i not in lost]
        if not wanted:
            why = "; ".join(selection.missing_keys(closed))
            raise InvalidValueError(f"{selection.quoted} selects none of the {len(closed)} ended episodes of {where}"
                                    f"{' (' + why + ')' if why else ''}; nothing was written")
    else:
        wanted = [int(i) for i in episodes]
    by_id = {e.id: e for e in closed}
    missing = sorted(set(wanted) - set(by_id))
    if missing:
        raise ValueError(f"{where}: episodes {missing} are not ended episodes "
                         f"(held ids: {[e.id for e in held]}; an episode still being recorded cannot be exported)")
    lost = sorted(i for i in set(wanted) if by_id[i].overwritten)
    if lost:
        raise ValueError(f"{where}: episode id {lost[0] if len(lost) == 1 else lost} lost its first steps to the "
                         "ring; it cannot be exported whole")
    return [by_id[i] for i in sorted(set(wanted))]


def export_zarr(buffer_or_path: Any, out: str | os.PathLike, *, compressor: str | None = "jpeg2k",
                lossless: bool = False, episodes: Iterable[int] | str | None = None,
                key_map: Mapping[str, str] | None = None, exclude: Iterable[str] = (),
                progress: bool = False) -> ZarrExportSummary:
    """Write episodes of a buffer to ``out`` as a zarr group (format 2) in Diffusion Policy's layout.

    ``data/<key>`` gets one array per leaf, ``(N, ...)`` over the exported steps, and
    ``meta/episode_ends`` int64 ``(E,)`` their cumulative ends; Diffusion Policy's
    ``ReplayBuffer.copy_from_path`` reads it (after its ``register_codecs()`` for frame codecs).

    Reading it in plain zarr (``zarr.open(out)["data/<camera key>"][i]``): non-frame arrays use Blosc,
    which numcodecs always has. Compressed frames are numcodecs ids ``imagecodecs_jpeg2k`` /
    ``imagecodecs_jpegxl``, imagecodecs' own: where trajstore is installed with its codec entry points
    (:data:`~trajstore.interop.zarr.codecs.NUMCODECS_ENTRY_POINTS`), numcodecs finds them by itself;
    anywhere else run ``import imagecodecs.numcodecs; imagecodecs.numcodecs.register_codecs()`` once
    before reading (Diffusion Policy's ``register_codecs()`` also does). Raw frames
    (``compressor=None``) need nothing. The summary's :meth:`~ZarrExportSummary.line` says so.
    Camera leaves (``kind="image"``, ``(H, W, 3)`` uint8, or ``(3, H, W)`` declared ``layout="CHW"``,
    written ``(N, H, W, 3)`` as Diffusion Policy reads frames, with the array attribute
    ``trajstore_layout = "CHW"`` so an import gives the leaf back channel first) are chunked one
    frame per chunk and compressed by ``compressor``; other leaves are chunked along steps only (about 1 MiB a chunk)
    with Blosc zstd + bit shuffle, lossless. Leaf names, spaces and episode data are kept in
    attributes so that :func:`~trajstore.interop.zarr.import_zarr` restores them.
    Final observations are not exported (the layout has no place for them).

    Args:
        buffer_or_path: a :class:`~trajstore.replay_buffer.ReplayBuffer` or the folder of one
            (opened read-only and closed again), or an aligned view of a stream buffer
            (``StreamBuffer.aligned(...)``): one step per anchor time, its streams and its own
            ``timestamp`` (int64 ns) and ``is_pad/<stream>`` (bool) leaves become arrays
            (``data/timestamp``, ``data/is_pad.<stream>``; ``exclude`` them to leave them out).
        out: a new (or empty) folder; it appears only once the export succeeded.
        compressor: frame codec: ``"jpeg2k"`` (default; lossy at 50 dB PSNR, Diffusion Policy's
            ``Jpeg2k(level=50)``), ``"jpegxl"`` (lossy: distance 0.3, Diffusion Policy's default)
            or None (raw, uncompressed frames).
        lossless: lossless frame coding (JPEG 2000 reversible, JPEG XL lossless): frames read back
            exactly, at larger size.
        episodes: ids of the episodes to export (``rb.select_episodes(...)``, ``rb.split_episodes``), or a
            selection as ``trajstore copy --episodes`` takes (ids ``"0,3,5-9"`` or an expression over episode
            data, ``"success == true"``); default every ended episode held (interrupted ones included, the
            open one and one whose first steps the ring overwrote, ``Episode.overwritten``, left out).
        key_map: ``{leaf name: zarr key}``, e.g. ``{"observation/pixels": "img", "observation/agent_pos":
            "state"}`` for Diffusion Policy's PushT keys; other leaves get the key they were imported
            from (metadata ``zarr_key``), else :func:`default_key`.
        exclude: leaf names not to export (e.g. a text leaf).
        progress: show a progress bar (tqdm, in steps) on stderr.

    Raises:
        UnsupportedSpaceError: a text leaf (names every such leaf and the ``exclude`` / ``--exclude`` that
            leaves them out).
        UnknownLeafError: (a ``KeyError``) ``key_map`` or ``exclude`` names a leaf the buffer does not have.
        ValueError: an unknown compressor, two leaves on one key, a key zarr cannot use, ``episodes``
            naming ids that are not ended episodes of the buffer or that lost their first steps to the ring, or a selection that is malformed or
            selects nothing (InvalidValueError).
        StorageExistsError: ``out`` is a file or a non-empty folder.
        ImportError: zarr, numcodecs or imagecodecs is missing (the ``zarr`` extra).
        All of these are raised before anything is written.
    """
    from trajstore.replay_buffer import ReplayBuffer

    zarr = _zarr()
    codec = frame_compressor(compressor, lossless=lossless)
    register_codecs()
    owned = isinstance(buffer_or_path, (str, os.PathLike))
    rb = ReplayBuffer.load_from(buffer_or_path) if owned else buffer_or_path
    try:
        plans = _plan_leaves(rb.space, dict(key_map or {}), set(exclude))
        chosen = _select_episodes(rb, episodes)
        lengths = np.array([len(e) for e in chosen], dtype=np.int64)
        with staged_folder(out) as tmp:
            _write_group(zarr, tmp, rb, plans, chosen, lengths, codec, progress and f"export {Path(out).name}")
    finally:
        if owned:
            rb.close()
    out = Path(out)
    nbytes = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    framed = codec is not None and any(p.frames for p in plans)
    return ZarrExportSummary(out, len(chosen), int(lengths.sum()),
                             {tree.path_name(p.path): p.key for p in plans}, nbytes,
                             codec.codec_id if framed else None)


def _write_group(zarr: Any, path: Path, rb: Any, plans: list[_LeafPlan], chosen: list[Any], lengths: np.ndarray,
                 codec: Any, progress: str | bool) -> None:
    from numcodecs import Blosc
    from tqdm import tqdm

    steps = int(lengths.sum())
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    lowdim = Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE)
    writers = []
    for p in plans:
        shape = p.shape
        step_bytes = int(np.prod(shape, dtype=np.int64)) * p.dtype.itemsize
        chunk = 1 if p.frames else max(1, min(steps or 1, LOWDIM_CHUNK_BYTES // max(step_bytes, 1)))
        array = root.create_array(f"data/{p.key}", shape=(steps, *shape), chunks=(chunk, *shape), dtype=p.dtype,
                                  compressors=(codec if p.frames else lowdim), fill_value=0)
        array.attrs.update({ATTR_PATH: tree.path_name(p.path), ATTR_SPACE: p.space.to_json(),
                            **({ATTR_LAYOUT: "CHW"} if p.layout.channel_first else {})})
        writers.append(_ChunkAlignedWriter(array, chunk))
    block = max(1, BLOCK_BYTES // max(sum(int(np.prod(p.space.shape, dtype=np.int64)) * p.dtype.itemsize
                                          for p in plans), 1))
    leaf_index = {path: i for i, (path, _) in enumerate(tree.leaves(rb.space))}
    with tqdm(total=steps, unit="step", disable=not progress, desc=progress or None) as bar:
        for ep in chosen:
            for a in range(ep.start, ep.stop, block):
                b = min(a + block, ep.stop)
                values = tree.flatten(rb.space, rb.get_at(slice(a, b)))
                for p, w in zip(plans, writers):
                    w.add(p.layout.to_stored(np.asarray(values[leaf_index[p.path]]).astype(p.dtype, copy=False)))
                bar.update(b - a)
    for w in writers:
        w.close()
    ends = root.create_array("meta/episode_ends", shape=(len(lengths),), chunks=(max(len(lengths), 1),),
                             dtype=np.int64, compressors=None, fill_value=0)
    ends[:] = np.cumsum(lengths)
    root.attrs.update({
        ATTR_KEYS: [p.key for p in plans],
        ATTR_EPISODE_DATA: [{"id": e.id, "data": e.data, "interrupted": e.interrupted, "overwritten": e.overwritten}
                            for e in chosen],
    })
