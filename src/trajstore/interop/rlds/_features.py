"""``features.json`` (a TFDS ``FeaturesDict`` in JSON) -> the features of an RLDS episode, and each one's space.

The JSON form is TFDS's ``FeatureConnector.to_json`` (tensorflow_datasets 4.x): every node has a
``pythonClassName`` and one entry for its class: ``featuresDict.features`` (FeaturesDict), ``sequence.feature``
(Dataset: the ``steps`` of RLDS), ``tensor`` (Tensor, Scalar: ``dtype``, ``shape.dimensions`` as strings,
``encoding``), ``image`` (Image: ``dtype``, ``shape``, ``encodingFormat``), ``text`` (Text). In the records,
nested names are joined by ``/`` (``steps/observation/image``) and steps are concatenated into flat lists.
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._fs import read_json
from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import BinarySpace, BoxSpace, Space, TextSpace

__all__ = ["FeatureSpec", "MAX_FRAME_BYTES", "RldsFeatures", "check_regular_file", "json_int", "leaf_space",
           "read_features"]

#: The largest ``features.json`` / ``dataset_info.json`` read (bytes).
MAX_JSON_BYTES = 16 << 20
#: The largest declared image (one step's decoded frame, ``H * W * C * itemsize`` bytes): 64 MiB.
MAX_FRAME_BYTES = 64 << 20
#: The largest declared dimension of a shape.
MAX_DIM = 1 << 31

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


def json_int(value: Any, where: str, what: str) -> int:
    """A JSON integer or an integer written as a string (TFDS writes dimensions and counts as strings)."""
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 63:
        return value
    raise FormatError(f"{where}: {what} {value!r:.40} is not an integer")


def _entry(node: dict, where: str, key: str) -> dict:
    entry = _get(node, where, key)
    if not isinstance(entry, dict):
        raise FormatError(f"{where}: {key!r} is a {type(entry).__name__}, an object expected")
    return entry


def _dtype(entry: dict, where: str, default: str | None = None) -> str:
    dtype = entry.get("dtype", default)
    if not isinstance(dtype, str):
        raise FormatError(f"{where}: dtype {dtype!r:.40} is not a string")
    return dtype


def _shape(entry: dict, where: str) -> tuple[int, ...]:
    shape = entry.get("shape", {})
    dims = shape.get("dimensions", []) if isinstance(shape, dict) else None
    if not isinstance(dims, list):
        raise FormatError(f"{where}: expected shape.dimensions to be a list")
    if len(dims) > 8:
        raise FormatError(f"{where}: a shape of {len(dims)} axes, more than the 8 an import takes")
    out = []
    for d in dims:
        n = json_int(d, where, "a dimension")
        if n < 0:
            raise UnsupportedSpaceError(f"{where}: has a dynamic shape {dims}; trajstore leaves have fixed shapes")
        if n > MAX_DIM:
            raise FormatError(f"{where}: dimension {n} is beyond the import's bound ({MAX_DIM})")
        out.append(n)
    if math.prod(out) > 1 << 31:
        raise FormatError(f"{where}: shape {out} is beyond the import's bounds (8 axes, 2**31 numbers)")
    return tuple(out)


def _leaf(node: dict, cls: str, key: str, name: str) -> FeatureSpec:
    where = f"features.json: {key!r}"
    if cls == "Text":
        return FeatureSpec(key, name, "text", "str", ())
    if cls == "Image":
        entry = _entry(node, where, "image")
        dtype, shape = _dtype(entry, where, "uint8"), _shape(entry, where)
        encoding = entry.get("encodingFormat") or "png"
        if not isinstance(encoding, str):
            raise FormatError(f"{where}: encodingFormat {encoding!r:.40} is not a string")
        encoding = encoding.lower()
        if dtype not in _IMAGE_DTYPES or len(shape) != 3 or shape[2] not in (1, 3, 4) or encoding not in ("png",
                                                                                                     "jpeg"):
            raise UnsupportedSpaceError(f"{where}: an Image of dtype {dtype}, shape {shape}, {encoding}; "
                                        "trajstore imports uint8/uint16 (H, W, 1|3|4) PNG or JPEG images")
        if dtype == "uint16" and encoding != "png":
            raise UnsupportedSpaceError(f"{where}: a uint16 Image encoded as {encoding}; 16-bit images are PNG")
        frame = math.prod(shape) * np.dtype(dtype).itemsize
        if frame > MAX_FRAME_BYTES:
            raise FormatError(f"{where}: an Image of shape {shape} ({dtype}) is {frame} bytes decoded, more than "
                              f"the {MAX_FRAME_BYTES} an import decodes per frame")
        return FeatureSpec(key, name, "image", dtype, shape, encoding)
    if cls in ("Tensor", "Scalar"):
        entry = _entry(node, where, "tensor")
        dtype, shape = _dtype(entry, where), _shape(entry, where)
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


def check_regular_file(path: Path, what: str, max_bytes: int | None = None) -> int:
    """``path``'s size, after checking it is a regular file (not a folder, FIFO or device: those would be
    refused late or block a read) of at most ``max_bytes``; FormatError naming ``path`` and ``what``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FormatError(f"{path} does not exist ({what})") from None
    if not stat.S_ISREG(st.st_mode):
        raise FormatError(f"{path} is not a regular file ({what})")
    if max_bytes is not None and st.st_size > max_bytes:
        raise FormatError(f"{path}: {st.st_size} bytes, more than the {max_bytes} an import reads")
    return st.st_size


def check_json_size(path: Path) -> None:
    """Refuse a JSON path that is not a regular file of at most :data:`MAX_JSON_BYTES` (FormatError)."""
    check_regular_file(path, "a TFDS JSON file", MAX_JSON_BYTES)


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
