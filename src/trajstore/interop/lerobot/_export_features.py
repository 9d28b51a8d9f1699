"""Which LeRobot feature each leaf of a trajstore step space becomes (format v3.0, as lerobot 0.4.4
writes it: ``meta/info.json`` ``features`` and the parquet columns behind them). Pure planning, no I/O.

Rules (checked here, before anything is written):

- a camera leaf (``metadata["kind"] == "image"``, ``(H, W, 3)`` uint8, layout HWC or none, or
  ``(3, H, W)`` declared ``layout="CHW"``, written channel last as LeRobot stores frames) becomes a
  ``"video"`` feature (frames in MP4 files) or, with ``camera="image"``, an ``"image"`` feature (PNG
  bytes in the data parquet); names ``["height", "width", "channels"]``;
- a numeric or bool leaf of shape ``()`` or ``(1,)`` becomes a scalar column (info shape ``[1]``), one of
  shape ``(n,)`` a ``fixed_size_list<n>`` column; the leaf's dtype is kept (float32 stays float32, so
  values are exact), its names come from ``metadata["names"]`` when present (else ``null``);
- a text leaf becomes a ``"string"`` column (LeRobot computes no statistics for it);
- the feature key is the leaf path joined by ``"."`` (``observation/state`` -> ``observation.state``).

Anything else (a non-camera leaf of 2 or more dimensions, a camera of another shape or dtype, two
paths that give the same key, a leaf named like a column LeRobot adds) raises before any write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces.base import Space
from trajstore.spaces.tree import Path, leaves, path_name
from trajstore.storages.frames import FrameLayout

#: Columns LeRobot adds to every frame, in its order, with their dtypes.
INDEX_COLUMNS = {"timestamp": "float32", "frame_index": "int64", "episode_index": "int64",
                 "index": "int64", "task_index": "int64"}
#: Names LeRobot gives the axes of a camera feature.
CAMERA_NAMES = ["height", "width", "channels"]
#: Keys a leaf may not take: LeRobot's own columns, and ``task`` (the text it adds to each item).
RESERVED_KEYS = frozenset(INDEX_COLUMNS) | {"task"}
#: Numeric dtypes a column may have (``datasets.Value`` names; NumPy agrees on each).
VALUE_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                          "float16", "float32", "float64"})


@dataclass(frozen=True)
class Feature:
    """One LeRobot feature made from one leaf.

    Attributes:
        key: LeRobot feature key (``"observation.state"``).
        path: the leaf path in the step space.
        dtype: ``"video"``, ``"image"``, ``"string"`` or a NumPy dtype name (``"float32"``...).
        shape: info.json shape: ``(H, W, 3)`` for cameras, ``(1,)`` for scalars, ``(n,)`` for vectors.
        names: info.json names (``None`` when the leaf has none).
        scalar: the leaf's own shape is ``()`` (so values are squeezed from ``(N, 1)`` on read-back).
        layout: a camera leaf's layout: ``"CHW"`` leaves are transposed to ``shape`` by :meth:`frames`.
    """

    key: str
    path: Path
    dtype: str
    shape: tuple[int, ...]
    names: list[str] | None
    scalar: bool = False
    layout: FrameLayout = FrameLayout()

    def frames(self, values: np.ndarray) -> np.ndarray:
        """A camera leaf's frames ``(N, ...)`` (or one frame) as written: ``(N, H, W, 3)``."""
        return self.layout.to_stored(values)

    @property
    def is_camera(self) -> bool:
        return self.dtype in ("video", "image")

    @property
    def has_stats(self) -> bool:
        return self.dtype != "string"

    def info(self) -> dict[str, Any]:
        """The ``features[key]`` entry of info.json (video ``info`` is added by the writer)."""
        return {"dtype": self.dtype, "shape": list(self.shape), "names": self.names}


def _is_camera(space: Space) -> bool:
    return space.metadata.get("kind") == "image"


def _names(space: Space, name: str, length: int) -> list[str] | None:
    names = space.metadata.get("names")
    if names is None:
        return None
    names = list(names) if isinstance(names, (list, tuple)) else names
    if not (isinstance(names, list) and len(names) == length and all(isinstance(n, str) for n in names)):
        raise UnsupportedSpaceError(f"leaf {name!r}: metadata 'names' must be a list of {length} strings "
                                    f"(one per element), got {names!r}")
    return names


def _camera_feature(path: Path, space: Space, key: str, camera: str) -> Feature:
    name = path_name(path)
    layout = space.metadata.get("layout")
    declared = str(layout).upper() if layout is not None else "HWC"
    frame = FrameLayout(declared) if declared in ("HWC", "CHW") else None
    shape = frame.stored_shape(space.shape) if frame is not None and len(space.shape) == 3 else tuple(space.shape)
    if frame is None or len(shape) != 3 or shape[2] != 3 or space.dtype != np.uint8:
        raise UnsupportedSpaceError(f"leaf {name!r}: a camera exported to LeRobot must be (H, W, 3) uint8 RGB "
                                    f"with layout HWC (or (3, H, W) with layout CHW), got shape {tuple(space.shape)}, "
                                    f"dtype {space.dtype}, layout {layout!r}")
    return Feature(key, path, camera, shape, list(CAMERA_NAMES), layout=frame)


def _value_feature(path: Path, space: Space, key: str) -> Feature:
    name = path_name(path)
    if space.type_name == "text":
        return Feature(key, path, "string", (1,), _names(space, name, 1), scalar=True)
    dtype = np.dtype(space.dtype).name
    shape = tuple(space.shape)
    if dtype not in VALUE_DTYPES:
        raise UnsupportedSpaceError(f"leaf {name!r}: dtype {dtype} has no LeRobot column type "
                                    f"(expected one of {sorted(VALUE_DTYPES)})")
    if len(shape) > 1:
        raise UnsupportedSpaceError(f"leaf {name!r}: shape {shape} is not exported (LeRobot columns are scalars "
                                    "or vectors; only cameras, kind='image', may have more dimensions)")
    length = shape[0] if shape else 1
    return Feature(key, path, dtype, (length,), _names(space, name, length), scalar=not shape)


def plan_features(space: Space, *, camera: str = "video", keys: dict[Path, str] | None = None) -> list[Feature]:
    """The LeRobot features of every leaf of ``space``, in leaf order.

    Args:
        space: the step space of a buffer.
        camera: ``"video"`` or ``"image"``: how camera leaves are stored.
        keys: feature key by leaf path (:func:`~trajstore.interop.lerobot._key_maps.export_keys`); a leaf
            not in it gets its path joined by ``"."``.

    Raises:
        UnsupportedSpaceError: a leaf LeRobot cannot hold (see the module docstring), two leaves with the
            same feature key, or a leaf named like a LeRobot column; the message names the leaf.
        ValueError: ``camera`` is not ``"video"`` or ``"image"``.
    """
    if camera not in ("video", "image"):
        raise ValueError(f"camera must be 'video' or 'image', got {camera!r}")
    features: list[Feature] = []
    by_key: dict[str, Path] = {}
    for path, leaf in leaves(space):
        key = (keys or {}).get(path) or ".".join(path)
        if not path or any(not k for k in path):
            raise UnsupportedSpaceError(f"leaf {path_name(path)!r}: LeRobot features need a named leaf of a DictSpace")
        if key in RESERVED_KEYS:
            raise UnsupportedSpaceError(f"leaf {path_name(path)!r}: {key!r} is a column LeRobot adds itself; "
                                        "rename the leaf or give it another key (key_map)")
        if key in by_key:
            raise UnsupportedSpaceError(f"leaves {path_name(by_key[key])!r} and {path_name(path)!r} both become "
                                        f"LeRobot feature {key!r}; rename one or give it another key (key_map)")
        by_key[key] = path
        features.append(_camera_feature(path, leaf, key, camera) if _is_camera(leaf)
                        else _value_feature(path, leaf, key))
    return features


def index_features() -> list[Feature]:
    """The columns LeRobot adds (timestamp, frame_index, episode_index, index, task_index), shape ``[1]``."""
    return [Feature(k, (), dtype, (1,), None, scalar=True) for k, dtype in INDEX_COLUMNS.items()]


def common_fps(space: Space) -> float | None:
    """The frame rate (Hz) the leaves' ``metadata["fps"]`` agree on, or ``None`` when no leaf has one.

    Raises:
        UnsupportedSpaceError: two leaves give different rates (names both).
    """
    found: tuple[str, float] | None = None
    for path, leaf in leaves(space):
        fps = leaf.metadata.get("fps")
        if fps is None:
            continue
        if found is not None and float(fps) != found[1]:
            raise UnsupportedSpaceError(f"leaves {found[0]!r} ({found[1]:g} fps) and {path_name(path)!r} "
                                        f"({float(fps):g} fps) disagree; LeRobot has one fps per dataset: pass fps=")
        found = (path_name(path), float(fps))
    return found[1] if found else None
