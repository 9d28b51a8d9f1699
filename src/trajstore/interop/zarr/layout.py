"""Reading and checking a zarr group in Diffusion Policy's ``ReplayBuffer`` layout, and naming its arrays.

The layout (real-stanford/diffusion_policy, ``diffusion_policy/common/replay_buffer.py``)::

    <group>/data/<key>            one array per key, step axis first, all of length episode_ends[-1]
    <group>/meta/episode_ends     int64 (E,), cumulative end index of each episode (exclusive)

What trajstore adds in attributes (any reader that does not know them ignores them):

    data/<key>.attrs["trajstore_path"]     the leaf's nested name, e.g. "observation/pixels"
    data/<key>.attrs["trajstore_space"]    the leaf's space as JSON (dtype, shape, bounds, metadata)
    <group>.attrs["trajstore_keys"]        the data keys in the step space's leaf order
    <group>.attrs["trajstore_episode_data"]  one {"data": {...}, "interrupted": bool} per episode

Those attributes are read as data and type-checked (:mod:`trajstore.interop.zarr._attrs`), never
passed on as keywords. A hostile group is refused before anything is allocated: a symlink out of its
folder, ``meta/episode_ends`` declaring more episodes than the data has steps, an array of more than
:data:`MAX_STEP_BYTES` per step; unreadable metadata and chunks are FormatErrors naming the array.

This module only reads and checks (no trajstore buffer, no writing); see
:mod:`trajstore.interop.zarr` for the import and export built on it.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from trajstore._fs import check_tree_inside
from trajstore.errors import FormatError
from trajstore.interop.zarr._attrs import (ATTR_EPISODE_DATA, ATTR_KEYS, ATTR_LAYOUT, ATTR_PATH,  # noqa: F401
                                           ATTR_SPACE, channel_first_attr, episode_data, key_order,
                                           leaf_path_attr, read_attrs)  # (export.py)
from trajstore.spaces import BinarySpace, BoxSpace, Space, space_from_json, tree
from trajstore.storages.frames import FrameLayout

CHW, HWC = "CHW", "HWC"

#: Most bytes one step of one array may hold once decoded (256 MiB: a 4K RGB uint8 frame is 25 MB).
#: A block of at least one step of every array is read at once, so a declared shape is checked first.
MAX_STEP_BYTES = 256 << 20

#: Frames per second given to imported camera leaves when neither ``fps=`` nor the array's
#: attributes say: Diffusion Policy's PushT (``control_hz``) and real-world UR5 setups run at 10 Hz.
DEFAULT_FPS = 10


@dataclass(frozen=True)
class SourceArray:
    """One ``data/<key>`` array and the leaf it becomes.

    Attributes:
        key: the array's name under ``data/`` (``"img"``; ``"a/b"`` for an array in a sub-group).
        array: the zarr array, ``(N, ...)``.
        path: the leaf's nested path in the step space.
        space: the leaf's space (shape without the step axis).
        float_frames: a float array named in ``image_keys``: values are checked to be whole numbers
            in 0..255 and stored as uint8 frames (the leaf's metadata keeps ``zarr_dtype``).
        channel_first: the array holds ``(N, H, W, C)`` frames of a ``(C, H, W)`` leaf (an export of a
            CHW camera, ``trajstore_layout = "CHW"``): blocks are transposed back.
    """

    key: str
    array: Any
    path: tuple[str, ...]
    space: Space
    float_frames: bool = False
    channel_first: bool = False

    @property
    def name(self) -> str:
        return f"data/{self.key}"

    def to_leaf(self, values: np.ndarray, start: int = 0) -> np.ndarray:
        """A block read from the array, ``(n, ...)`` from step ``start``, as values of :attr:`space`.

        Raises:
            FormatError: a float frame array holds a value that is not a whole number in 0..255.
        """
        if self.channel_first:
            values = FrameLayout(CHW).to_user(values)
        if not self.float_frames:
            return values
        bad = ~np.isfinite(values) | (values < 0) | (values > 255) | (values != np.round(values))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            index = (start + where[0], *where[1:])
            raise FormatError(f"{self.name}: image_keys names it, but value {values[where].item()!r} at index {index} "
                              "is not a whole number in 0..255 (leave it out of image_keys to keep it as a float leaf)")
        return values.astype(np.uint8)


@dataclass(frozen=True)
class SourceLayout:
    """A checked group: its arrays in leaf order, episode ends, and trajstore's episode data if kept."""

    arrays: tuple[SourceArray, ...]
    episode_ends: np.ndarray
    episode_data: tuple[dict[str, Any], ...] | None

    @property
    def steps(self) -> int:
        return int(self.episode_ends[-1]) if len(self.episode_ends) else 0


def open_group(src: str | os.PathLike, zarr_module: Any) -> Any:
    """The zarr group at ``src`` (a folder, or a ``.zip`` of one), read-only, format 2 or 3.

    Raises:
        FormatError: ``src`` does not exist or is not a zarr group, or a symlink in the folder leads
            outside it (nothing outside ``src`` is read).
    """
    src = Path(src)
    if not src.exists():
        raise FormatError(f"{src}: no such file or folder")
    check_tree_inside(src, f"zarr group {src}")  # zarr follows symlinks: none may lead out of the group
    try:
        store: Any = str(src)
        if src.is_file() and src.suffix == ".zip":
            store = zarr_module.storage.ZipStore(str(src), mode="r")
        return zarr_module.open_group(store, mode="r")
    except Exception as exc:  # zarr raises several types for "not a group"
        raise FormatError(f"{src}: not a zarr group ({type(exc).__name__}: {exc})") from None


def read_episode_ends(group: Any, src: Any, max_episodes: int | None = None) -> np.ndarray:
    """``meta/episode_ends`` as int64 ``(E,)``, checked: integer, positive, strictly increasing.

    Args:
        max_episodes: most episodes the data can hold (its steps: an episode has one at least); a longer
            declared shape is refused before it is read.

    Raises:
        FormatError: missing, not 1-D integer, longer than ``max_episodes``, unreadable, or not strictly
            increasing (names the first bad index).
    """
    try:
        meta = group["meta"]
        ends_array = meta["episode_ends"]
    except (KeyError, TypeError, IndexError):
        raise FormatError(f"{src}: meta/episode_ends is missing (Diffusion Policy's layout: data/<key> arrays "
                          "and meta/episode_ends)") from None
    except Exception as exc:  # a damaged .zarray / zarr.json
        raise FormatError(f"{src}: meta/episode_ends cannot be opened ({type(exc).__name__}: {exc})") from None
    shape, dtype = tuple(getattr(ends_array, "shape", ())), np.dtype(getattr(ends_array, "dtype", "V1"))
    if len(shape) != 1 or dtype.kind not in "iu":
        raise FormatError(f"{src}: meta/episode_ends must be a 1-D integer array, got shape {shape} {dtype}")
    if max_episodes is not None and shape[0] > max_episodes:
        raise FormatError(f"{src}: meta/episode_ends lists {shape[0]} episodes, more than the {max_episodes} "
                          "steps of the data/ arrays")
    ends = read_array(ends_array, slice(None), f"{src}: meta/episode_ends")
    ends = ends.astype(np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    bad = np.flatnonzero(ends <= starts)
    if bad.size:
        k = int(bad[0])
        raise FormatError(f"{src}: meta/episode_ends is not strictly increasing from 0: episode {k} ends at "
                          f"{ends[k]}, after {starts[k]} (an empty or negative episode)")
    return ends


def data_arrays(group: Any, src: Any) -> dict[str, Any]:
    """Every array under ``data/`` (sub-groups walked), by name relative to ``data/``.

    Raises:
        FormatError: no ``data`` group.
    """
    try:
        data = group["data"]
    except KeyError:
        raise FormatError(f"{src}: the data group is missing (Diffusion Policy's layout: data/<key> arrays "
                          "and meta/episode_ends)") from None
    except Exception as exc:  # a damaged .zgroup / zarr.json
        raise FormatError(f"{src}: the data group cannot be opened ({type(exc).__name__}: {exc})") from None
    out: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        try:
            members = list(node.members())
        except Exception as exc:  # a member's damaged metadata
            raise FormatError(f"{src}: data/{prefix} cannot be listed ({type(exc).__name__}: {exc})") from None
        for name, member in members:
            key = f"{prefix}{name}"
            if hasattr(member, "shape"):
                out[key] = member
            else:
                walk(member, f"{key}/")

    walk(data, "")
    return out


def read_array(array: Any, index: Any, name: str) -> np.ndarray:
    """``array[index]`` as NumPy, a chunk that cannot be read or decoded being a :class:`FormatError`
    naming ``name``."""
    try:
        return np.asarray(array[index])
    except Exception as exc:  # numcodecs / imagecodecs errors, a truncated chunk, a shape mismatch
        steps = f"{index.start or 0}..{index.stop - 1}" if isinstance(index, slice) and index.stop else "all steps"
        raise FormatError(f"{name}: cannot read steps {steps}: {type(exc).__name__}: {exc}") from None


def check_step_bytes(name: str, array: Any) -> None:
    """Refuse an array whose one step holds more than :data:`MAX_STEP_BYTES` once decoded.

    Raises:
        FormatError: names the array, its declared shape and dtype.
    """
    step = int(np.prod(array.shape[1:], dtype=object)) * np.dtype(array.dtype).itemsize
    if step > MAX_STEP_BYTES:
        raise FormatError(f"{name}: shape {tuple(array.shape)} {array.dtype} is {step} bytes per step; at most "
                          f"{MAX_STEP_BYTES} are imported")


def inferred_space(name: str, array: Any, *, image: bool, fps: float) -> tuple[Space, bool]:
    """The leaf space of an array without trajstore attributes, and whether it is float frames.

    ``(N, H, W, 3)`` uint8 arrays and arrays named in ``image_keys`` become camera leaves
    (``kind="image"``, ``layout="HWC"``, ``fps``); bool arrays ``BinarySpace``; other integers a
    ``BoxSpace`` on the dtype's range, floats one on ``[-inf, inf]``.

    Raises:
        FormatError: no step axis, a dtype trajstore cannot store, or ``image`` for an array that
            is not ``(N, H, W, 3)`` uint8 or float.
    """
    dtype, shape = np.dtype(array.dtype), tuple(array.shape[1:])
    if len(array.shape) == 0:
        raise FormatError(f"data/{name}: a 0-d array has no step axis")
    if dtype.kind not in "biuf":
        raise FormatError(f"data/{name}: dtype {dtype} cannot be stored (numbers and bools only)")
    frame_shape = len(shape) == 3 and shape[2] == 3
    if image or (frame_shape and dtype == np.uint8):
        if not frame_shape or dtype.kind not in "uf" or (dtype.kind == "u" and dtype != np.uint8):
            raise FormatError(f"data/{name}: image_keys names it, but camera frames must be (N, H, W, 3) uint8 "
                              f"(or float holding 0..255), got {tuple(array.shape)} {dtype}")
        meta = {"kind": "image", "layout": "HWC", "fps": fps}
        if dtype.kind == "f":
            meta["zarr_dtype"] = dtype.name
        return BoxSpace(0, 255, shape, np.uint8, metadata=meta), dtype.kind == "f"
    if frame_shape and dtype.kind == "f":
        warnings.warn(f"data/{name} {tuple(array.shape)} {dtype} looks like camera frames; it is kept as a float "
                      "leaf (name it in image_keys to store whole-number 0..255 values as uint8 frames)", stacklevel=3)
    if dtype.kind == "b":
        return BinarySpace(shape), False
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return BoxSpace(info.min, info.max, shape, dtype), False
    return BoxSpace(-np.inf, np.inf, shape, dtype), False


def _attr_space(name: str, array: Any, attrs: Mapping[str, Any]) -> tuple[Space | None, bool]:
    """The leaf space kept by an export, checked against the array (``None`` when there is none), and
    whether the array holds that leaf's frames channel last for a channel-first leaf."""
    if ATTR_SPACE not in attrs:
        return None, False
    kept = attrs[ATTR_SPACE]
    channel_first = channel_first_attr(attrs, f"data/{name}")
    layout = FrameLayout(CHW if channel_first else HWC)
    held = list(layout.user_shape(array.shape[1:])) if channel_first and len(array.shape) == 4 else None
    declared = kept.get("shape") if isinstance(kept, dict) else None
    if channel_first and held is None:
        raise FormatError(f"data/{name}: attribute {ATTR_LAYOUT} says 'CHW', but the array {tuple(array.shape)} "
                          "is not a batch of frames (N, H, W, C)")
    held = held or list(array.shape[1:])
    if declared is not None and declared != held:  # before the space allocates its bounds
        raise FormatError(f"data/{name}: attribute {ATTR_SPACE} says shape {declared!r:.100} per step, the array "
                          f"is {tuple(array.shape)}")
    try:
        space = space_from_json(kept)
        json.dumps(space.to_json(), allow_nan=False)  # what the buffer will write: NaN bounds are not JSON
    except (FormatError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise FormatError(f"data/{name}: attribute {ATTR_SPACE} is not a trajstore space ({exc})") from None
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    zarr_dtype = space.metadata.get("zarr_dtype")
    expected_dtype = np.dtype(zarr_dtype) if zarr_dtype else dtype
    if shape is None or tuple(held) != tuple(shape) or np.dtype(array.dtype) != expected_dtype:
        raise FormatError(f"data/{name}: attribute {ATTR_SPACE} says {shape} {expected_dtype} per step, the array "
                          f"is {tuple(array.shape)} {array.dtype}" + (" (channel last)" if channel_first else ""))
    return space, channel_first


def read_layout(group: Any, src: Any, *, image_keys: Iterable[str] = (), fps: float | None = None,
                key_map: Mapping[str, str] | None = None) -> SourceLayout:
    """Check ``group`` and decide each array's leaf; nothing is read but metadata and episode ends.

    An array's leaf path is ``key_map[key]`` if given, else its ``trajstore_path`` attribute, else
    its key (``"img"`` stays a top-level leaf ``img``). Its space is the ``trajstore_space``
    attribute if present (``fps``, when given, replaces its camera metadata's fps), else
    :func:`inferred_space`. A leaf named otherwise than its key by ``key_map`` or by a sub-group
    keeps the key in its metadata (``zarr_key``), where an export finds it again.

    Raises:
        FormatError: the layout is broken (see :func:`read_episode_ends`, :func:`data_arrays`), an
            array's length differs from ``episode_ends[-1]`` (names the array), two arrays map to the
            same leaf or one leaf lies inside another, ``data/`` holds no array, a trajstore attribute
            is malformed (see :mod:`trajstore.interop.zarr._attrs`).
        KeyError: ``image_keys`` or ``key_map`` names an array that ``data/`` does not hold.
    """
    arrays = data_arrays(group, src)
    if not arrays:
        raise FormatError(f"{src}: data/ holds no arrays: nothing to import")
    # every episode has a step at least: the shortest array bounds how many episode_ends may declare
    ends = read_episode_ends(group, src, max_episodes=min((int(a.shape[0]) for a in arrays.values() if a.shape),
                                                          default=0))
    steps = int(ends[-1]) if len(ends) else 0
    image_keys, key_map = set(image_keys), dict(key_map or {})
    for what, names in (("image_keys", image_keys), ("key_map", set(key_map))):
        unknown = sorted(names - set(arrays))
        if unknown:
            raise KeyError(f"{src}: {what} names {unknown}, not arrays of data/ (it holds {sorted(arrays)})")
    attrs = read_attrs(group, str(src))
    order = key_order(attrs, src)
    out: list[SourceArray] = []
    for key in sorted(arrays, key=lambda k: (order.get(k, len(order)), k)):
        array = arrays[key]
        if len(array.shape) == 0 or array.shape[0] != steps:
            raise FormatError(f"{src}: data/{key} has {array.shape[0] if array.shape else 'no'} steps, "
                              f"meta/episode_ends says {steps}")
        check_step_bytes(f"{src}: data/{key}", array)
        array_attrs = read_attrs(array, f"{src}: data/{key}")
        path = _leaf_path(key_map.get(key) or leaf_path_attr(array_attrs, f"{src}: data/{key}") or key, key, src)
        (space, channel_first), float_frames = _attr_space(key, array, array_attrs), False
        if space is not None and key in image_keys and space.metadata.get("kind") != "image":
            space, channel_first = None, False  # the user says it is a camera: infer it as one
        inferred = space is None
        if inferred:
            space, float_frames = inferred_space(key, array, image=key in image_keys, fps=fps or DEFAULT_FPS)
        else:
            float_frames = bool(space.metadata.get("zarr_dtype")) and np.dtype(array.dtype).kind == "f"
            if fps is not None and space.metadata.get("kind") == "image":
                space = space.with_metadata({"fps": fps})
        if (inferred or key in key_map) and tree.path_name(path) != key:
            space = space.with_metadata({"zarr_key": key})  # an export names the array as it was
        out.append(SourceArray(key, array, path, space, float_frames, channel_first))
    _check_paths(out, src)
    return SourceLayout(tuple(out), ends, episode_data(attrs, len(ends), src))


def _leaf_path(name: str, key: str, src: Any) -> tuple[str, ...]:
    try:
        return tree.parse_name(name)
    except (ValueError, TypeError) as exc:
        raise FormatError(f"{src}: data/{key} maps to leaf {name!r:.200}, not a valid name ({exc})") from None


def _check_paths(arrays: list[SourceArray], src: Any) -> None:
    seen: dict[tuple[str, ...], str] = {}
    for a in arrays:
        if not a.path or any(p in ("", ".", "..") for p in a.path):
            raise FormatError(f"{src}: data/{a.key} maps to leaf {tree.path_name(a.path)!r}, not a valid name")
        for other_path, other in seen.items():
            if other_path == a.path or tree.under(a.path, other_path) or tree.under(other_path, a.path):
                raise FormatError(f"{src}: data/{a.key} and data/{other} map to leaves {tree.path_name(a.path)!r} and "
                                  f"{tree.path_name(other_path)!r}, which clash (use key_map)")
        seen[a.path] = a.key
