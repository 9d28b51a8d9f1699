"""``features.json`` (a TFDS ``FeaturesDict`` in JSON) -> the features of an RLDS episode, and each one's space.

The JSON form is TFDS's ``FeatureConnector.to_json`` (tensorflow_datasets 4.x): every node has a
``pythonClassName`` and one entry for its class: ``featuresDict.features`` (FeaturesDict), ``sequence.feature``
(Dataset: the ``steps`` of RLDS), ``tensor`` (Tensor, Scalar: ``dtype``, ``shape.dimensions`` as strings,
``encoding``), ``image`` (Image: ``dtype``, ``shape``, ``encodingFormat``), ``text`` (Text). In the records,
nested names are joined by ``/`` (``steps/observation/image``) and steps are concatenated into flat lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._fs import read_json
from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import BinarySpace, BoxSpace, Space, TextSpace

__all__ = ["FeatureSpec", "RldsFeatures", "leaf_space", "read_features"]

#: The largest ``features.json`` / ``dataset_info.json`` read (bytes).
MAX_JSON_BYTES = 16 << 20

_DTYPES = {"bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
           "float32", "float64"}
_IMAGE_DTYPES = {"uint8", "uint16"}


@dataclass(frozen=True)
class FeatureSpec:
    """One feature of an RLDS episode.

    Attributes:
        key: its key in the records (``"steps/observation/image"``, ``"episode_metadata/file_path"``).
        name: ``key`` without its ``steps/`` (or ``episode_metadata/``) part: ``"observation/image"``.
        kind: ``"tensor"`` (Tensor, Scalar), ``"image"`` (Image: encoded PNG/JPEG bytes) or ``"text"``.
        dtype: the decoded dtype (``"float32"``, ``"bool"``, ...; ``"str"`` for text).
        shape: the shape of one value (one step's for ``steps/`` features); ``()`` for a scalar.
        encoding: an image's ``encodingFormat`` (``"png"``, ``"jpeg"``) or None.
    """

    key: str
    name: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    encoding: str | None = None

    @property
    def size(self) -> int:
        """Numbers per value: ``prod(shape)`` (1 for a scalar)."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_camera(self) -> bool:
        """An RGB uint8 image: stored as a camera leaf."""
        return self.kind == "image" and self.dtype == "uint8" and len(self.shape) == 3 and self.shape[2] == 3


@dataclass(frozen=True)
class RldsFeatures:
    """The features of an RLDS dataset: ``steps`` (per step) and ``episode`` (per episode, the other
    top-level features, ``episode_metadata/*`` first of all)."""

    steps: tuple[FeatureSpec, ...]
    episode: tuple[FeatureSpec, ...]


def _class(node: Any, where: str) -> str:
    if not isinstance(node, dict) or not isinstance(node.get("pythonClassName"), str):
        raise FormatError(f"{where}: expected an object with a 'pythonClassName'")
    return node["pythonClassName"].rsplit(".", 1)[-1]


def _get(node: Any, where: str, *keys: str) -> Any:
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            raise FormatError(f"{where}: has no {'.'.join(keys)!r} entry")
        node = node[k]
    return node


def _shape(entry: Any, where: str) -> tuple[int, ...]:
    shape = entry.get("shape", {})
    dims = shape.get("dimensions", []) if isinstance(shape, dict) else None
    if not isinstance(dims, list):
        raise FormatError(f"{where}: expected shape.dimensions to be a list")
    out = []
    for d in dims:
        try:
            n = int(d)
        except (TypeError, ValueError):
            raise FormatError(f"{where}: a dimension {d!r:.40} that is not an integer") from None
        if n < 0:
            raise UnsupportedSpaceError(f"{where}: has a dynamic shape {dims}; trajstore leaves have fixed shapes")
        out.append(n)
    if len(out) > 8 or int(np.prod(out, dtype=np.float64)) > 1 << 31:
        raise FormatError(f"{where}: shape {out} is beyond the import's bounds (8 axes, 2**31 numbers)")
    return tuple(out)


def _leaf(node: dict, cls: str, key: str, name: str) -> FeatureSpec:
    where = f"features.json: {key!r}"
    if cls == "Text":
        return FeatureSpec(key, name, "text", "str", ())
    if cls == "Image":
        entry = _get(node, where, "image")
        dtype, shape = str(entry.get("dtype", "uint8")), _shape(entry, where)
        encoding = str(entry.get("encodingFormat") or "png").lower()
        if dtype not in _IMAGE_DTYPES or len(shape) != 3 or shape[2] not in (1, 3, 4) or encoding not in ("png",
                                                                                                     "jpeg"):
            raise UnsupportedSpaceError(f"{where}: an Image of dtype {dtype}, shape {shape}, {encoding}; "
                                        "trajstore imports uint8/uint16 (H, W, 1|3|4) PNG or JPEG images")
        return FeatureSpec(key, name, "image", dtype, shape, encoding)
    if cls in ("Tensor", "Scalar"):
        entry = _get(node, where, "tensor")
        dtype, shape = str(entry.get("dtype")), _shape(entry, where)
        if entry.get("encoding", "none") not in ("none", None):
            raise UnsupportedSpaceError(f"{where}: tensor encoding {entry.get('encoding')!r}; only 'none' is read")
        if dtype == "string" and shape == ():
            return FeatureSpec(key, name, "text", "str", ())
        if dtype not in _DTYPES:
            raise UnsupportedSpaceError(f"{where}: dtype {dtype!r}; trajstore imports {sorted(_DTYPES)}")
        return FeatureSpec(key, name, "tensor", dtype, shape)
    raise UnsupportedSpaceError(f"{where}: a {cls} feature; trajstore imports FeaturesDict, Tensor, Scalar, "
                                "Image and Text")


def _walk(node: Any, key: str, name: str, out: list[FeatureSpec], depth: int) -> None:
    where = f"features.json: {key!r}"
    cls = _class(node, where)
    if cls != "FeaturesDict":
        out.append(_leaf(node, cls, key, name))
        return
    if depth > 16:
        raise FormatError(f"{where}: FeaturesDicts nested deeper than 16 levels")
    children = _get(node, where, "featuresDict", "features")
    if not isinstance(children, dict):
        raise FormatError(f"{where}: featuresDict.features is not an object")
    for child, sub in children.items():
        if not child or "/" in child:
            raise FormatError(f"{where}: a feature name {child!r} that is empty or holds '/'")
        _walk(sub, f"{key}/{child}", f"{name}/{child}" if name else child, out, depth + 1)


def read_features(path: Path) -> RldsFeatures:
    """The features ``features.json`` (at ``path``) declares.

    Raises:
        FormatError: not a TFDS FeaturesDict with a ``steps`` Dataset, a malformed entry, too big (names the
            file and the feature).
        UnsupportedSpaceError: a feature trajstore cannot hold (a dynamic shape, a ClassLabel, a string
            tensor of more than one value, an image that is not uint8/uint16 PNG/JPEG; names it).
    """
    check_json_size(path)
    root = read_json(path, "RLDS features")
    if _class(root, "features.json") != "FeaturesDict":
        raise FormatError(f"{path}: the root feature is not a FeaturesDict")
    top = _get(root, "features.json", "featuresDict", "features")
    if not isinstance(top, dict) or "steps" not in top:
        raise FormatError(f"{path}: no 'steps' feature (not an RLDS dataset)")
    if _class(top["steps"], "features.json: 'steps'") != "Dataset":
        raise FormatError(f"{path}: 'steps' is not a Dataset feature (not the RLDS episode/steps layout)")
    steps: list[FeatureSpec] = []
    _walk(_get(top["steps"], "features.json: 'steps'", "sequence", "feature"), "steps", "", steps, 0)
    episode: list[FeatureSpec] = []
    for child, sub in top.items():
        if child != "steps":
            _walk(sub, child, "" if child == "episode_metadata" else child, episode, 0)
    images = [s.key for s in episode if s.kind == "image"]
    if images:
        raise UnsupportedSpaceError(f"{path}: {images[0]!r} is an image per episode; episode data is JSON")
    if not any(s.name == "is_first" for s in steps):
        raise FormatError(f"{path}: no 'steps/is_first' feature (RLDS marks each episode's first step with it)")
    return RldsFeatures(tuple(steps), tuple(episode))


def check_json_size(path: Path) -> None:
    """Refuse a JSON file larger than :data:`MAX_JSON_BYTES` (FormatError) before reading it."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FormatError(f"{path} does not exist (not a TFDS dataset directory)") from None
    if size > MAX_JSON_BYTES:
        raise FormatError(f"{path}: {size} bytes, more than the {MAX_JSON_BYTES} an import reads")


def leaf_space(spec: FeatureSpec, *, fps: float, text_length: int = 1) -> Space:
    """The trajstore space of one step of ``spec``: an RGB uint8 image -> ``BoxSpace(0, 255, (H, W, 3),
    uint8)`` with metadata ``{"kind": "image", "layout": "HWC", "fps": fps}``; other images -> a plain
    ``BoxSpace`` of their shape and dtype (kept exactly in HDF5); bool -> ``BinarySpace``; integers ->
    ``BoxSpace`` over the dtype's range; floats -> unbounded ``BoxSpace``; text -> ``TextSpace(text_length)``."""
    if spec.kind == "text":
        return TextSpace(max(1, text_length))
    if spec.is_camera:
        return BoxSpace(0, 255, spec.shape, np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": fps})
    dtype = np.dtype(spec.dtype)
    if dtype.kind == "b":
        return BinarySpace(spec.shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return BoxSpace(info.min, info.max, spec.shape, dtype)
    return BoxSpace(-np.inf, np.inf, spec.shape, dtype)
