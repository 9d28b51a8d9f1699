"""One RLDS episode (a parsed ``tf.train.Example``) -> its length, episode data and per-step values.

Each ``steps/<name>`` feature holds the episode's T steps concatenated (TFDS's RLDS layout): a Tensor of
shape S is ``T * prod(S)`` numbers row-major (float_list for floats, int64_list for integers and bools,
bools as 0/1), an Image T encoded files (bytes_list), a Text T UTF-8 strings. T is the length of
``steps/is_first``; ``is_first`` must be true only at step 0 and ``is_last`` (if declared) only at step
T - 1. Every count is checked against T before a value is reshaped or an image decoded.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from trajstore.errors import FormatError
from trajstore.interop.rlds._example import Feature
from trajstore.interop.rlds._features import FeatureSpec

__all__ = ["check_boundaries", "check_image", "decode_image", "episode_data", "episode_length", "step_values"]


def _feature(example: dict[str, Feature], spec: FeatureSpec, where: str) -> Feature:
    feature = example.get(spec.key)
    if feature is None:
        raise FormatError(f"{where}: has no feature {spec.key!r} (features.json declares it)")
    want = {"image": "bytes", "text": "bytes"}.get(spec.kind) or (
        "float" if np.dtype(spec.dtype).kind == "f" else "int64")
    if feature.kind not in (want, None) or (feature.kind is None and len(feature)):
        raise FormatError(f"{where}: {spec.key!r} is stored as {feature.kind}_list, a {spec.kind} of {spec.dtype} "
                          f"as {want}_list")
    return feature


def episode_length(example: dict[str, Feature], where: str) -> int:
    """T, the number of steps: the length of ``steps/is_first`` (FormatError when missing, empty or not
    an int64_list)."""
    feature = example.get("steps/is_first")
    if feature is None or feature.kind not in ("int64", None):
        raise FormatError(f"{where}: 'steps/is_first' is missing or not an int64_list")
    if not len(feature):
        raise FormatError(f"{where}: an episode of 0 steps ('steps/is_first' is empty)")
    return len(feature)


def _count(feature: Feature, spec: FeatureSpec, n: int, where: str, what: str) -> None:
    if len(feature) != n:
        raise FormatError(f"{where}: {spec.key!r} holds {len(feature)} values, {what} ({n}) expected")


def _numbers(feature: Feature, spec: FeatureSpec, count: int, where: str) -> np.ndarray:
    dtype = np.dtype(spec.dtype)
    values = np.asarray(feature.values)
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            out = values.astype(dtype)
        if dtype.itemsize < values.dtype.itemsize:
            overflow = np.flatnonzero(np.isinf(out) & np.isfinite(values))
            if len(overflow):
                raise FormatError(f"{where}: {spec.key!r} holds {values[overflow[0]]} (value {overflow[0]}), "
                                  f"beyond the range of its dtype {spec.dtype}")
        return out
    values = values.astype(np.int64, copy=False)
    if dtype.kind == "b":
        bad = (values != 0) & (values != 1)
        if bad.any():
            raise FormatError(f"{where}: {spec.key!r} is bool, holds {values[bad][0]} (0 or 1 expected)")
        return values.astype(bool)
    info = np.iinfo(dtype)
    lo, hi = (values.min(), values.max()) if len(values) else (0, 0)
    if dtype == np.uint64:
        return values.view(np.uint64)
    if lo < info.min or hi > info.max:
        raise FormatError(f"{where}: {spec.key!r} holds {lo if lo < info.min else hi}, outside {spec.dtype}")
    return values.astype(dtype)


def step_values(example: dict[str, Feature], spec: FeatureSpec, steps: int, where: str) -> Any:
    """The values of a ``steps/`` Tensor feature as ``(T, *shape)`` of its dtype, of a Text feature as a
    list of T ``str``, of an Image feature as the list of T encoded files (bytes, not decoded).

    Raises:
        FormatError: the feature is missing, of another list kind, holds another count than ``T * prod(shape)``
            (T for images and text), a bool other than 0/1, an integer outside its dtype, text not UTF-8.
    """
    feature = _feature(example, spec, where)
    if spec.kind == "image":
        _count(feature, spec, steps, where, "one image per step")
        return list(feature.values)
    if spec.kind == "text":
        _count(feature, spec, steps, where, "one text per step")
        return _decoded(feature, spec, where)
    _count(feature, spec, steps * spec.size, where, f"{steps} steps x {spec.size}")
    return _numbers(feature, spec, steps, where).reshape((steps, *spec.shape))


def _decoded(feature: Feature, spec: FeatureSpec, where: str) -> list[str]:
    out = []
    for i, raw in enumerate(feature.values):
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise FormatError(f"{where}: {spec.key!r} entry {i} is not UTF-8 text") from None
    return out


def check_boundaries(example: dict[str, Feature], steps: int, where: str) -> None:
    """``is_first`` true exactly at step 0, ``is_last`` (when present) exactly at step T - 1."""
    for key, at in (("steps/is_first", 0), ("steps/is_last", steps - 1)):
        feature = example.get(key)
        if feature is None:
            continue
        if feature.kind not in ("int64", None):
            raise FormatError(f"{where}: {key!r} is stored as {feature.kind}_list, a bool as int64_list")
        values = np.asarray(feature.values, np.int64)
        if len(values) != steps:
            raise FormatError(f"{where}: {key!r} holds {len(values)} values, {steps} steps expected")
        bad = np.flatnonzero((values != 0) & (values != 1))
        if len(bad):
            raise FormatError(f"{where}: {key!r} holds {values[bad[0]]} at step {bad[0]} (a bool: 0 or 1 "
                              "expected)")
        want = np.zeros(steps, np.int64)
        want[at] = 1
        if not np.array_equal(values, want):
            raise FormatError(f"{where}: {key!r} is true at steps {np.flatnonzero(values).tolist()[:8]}, "
                              f"expected only at step {at} (one episode per record)")


def episode_data(example: dict[str, Feature], specs: tuple[FeatureSpec, ...], where: str) -> dict[str, Any]:
    """The episode-level features (``episode_metadata/*`` and other top-level ones) as JSON values, nested at
    ``/`` (``episode_metadata/a/b`` -> ``{"a": {"b": ...}}``): text -> ``str``, a scalar -> a Python
    ``bool``/``int``/``float``, a tensor -> nested lists.

    Raises:
        FormatError: a feature missing, of another list kind or count, text not UTF-8.
    """
    out: dict[str, Any] = {}
    for spec in specs:
        feature = _feature(example, spec, where)
        if spec.kind == "text":
            _count(feature, spec, 1, where, "one text")
            value: Any = _decoded(feature, spec, where)[0]
        else:
            _count(feature, spec, spec.size, where, f"shape {spec.shape}")
            value = _numbers(feature, spec, 1, where).reshape(spec.shape).tolist()
        node = out
        parts = spec.name.split("/")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _image_errors() -> tuple[type[BaseException], ...]:
    """What Pillow raises on a damaged or hostile file: OSError (truncated, bad data), ValueError,
    SyntaxError (a bad PNG chunk), EOFError, struct.error, DecompressionBombError."""
    import struct

    from PIL import Image

    return OSError, ValueError, SyntaxError, EOFError, struct.error, Image.DecompressionBombError


def _open(data: bytes, spec: FeatureSpec, where: str) -> Any:
    from PIL import Image

    try:
        img = Image.open(io.BytesIO(data))  # reads the header only
    except _image_errors() as exc:
        raise FormatError(f"{where}: an image that cannot be read: {exc}") from None
    h, w, c = spec.shape
    if img.format not in ("PNG", "JPEG"):
        raise FormatError(f"{where}: a {img.format} image, PNG or JPEG expected")
    if img.size != (w, h):
        raise FormatError(f"{where}: a {img.size[0]}x{img.size[1]} (WxH) image, features.json declares "
                          f"{w}x{h} (shape {spec.shape})")
    return img


def check_image(data: bytes, spec: FeatureSpec, where: str) -> None:
    """Read the header of one encoded image (not its pixels): PNG or JPEG of the declared size."""
    _open(data, spec, where).close()


_MODES = {("uint8", 1): "L", ("uint8", 3): "RGB", ("uint8", 4): "RGBA"}


def decode_image(data: bytes, spec: FeatureSpec, where: str) -> np.ndarray:
    """One encoded image -> ``(H, W, C)`` of the feature's dtype (converted to C channels as TFDS's
    ``decode_image(channels=C)`` does). The size in the header is checked against the declared shape
    (itself at most :data:`~trajstore.interop.rlds._features.MAX_FRAME_BYTES` decoded) before the pixels
    are decoded, so a decompression bomb is refused unread.

    Raises:
        FormatError: not PNG/JPEG, another size than declared, undecodable, a uint16 feature holding an
            image that is not 16-bit grey (names ``where``: file, record, feature and step).
    """
    img = _open(data, spec, where)
    try:
        if spec.dtype == "uint16":
            if img.mode not in ("I;16", "I;16B", "I;16L", "I"):
                raise FormatError(f"{where}: a {img.mode} image, a 16-bit grey image expected")
            arr = np.asarray(img)
            if arr.ndim != 2 or arr.min(initial=0) < 0 or arr.max(initial=0) > 65535:
                raise FormatError(f"{where}: a {img.mode} image, a 16-bit grey image expected")
            return arr.astype(np.uint16).reshape(spec.shape)
        mode = _MODES[(spec.dtype, spec.shape[2])]
        arr = np.asarray(img if img.mode == mode else img.convert(mode))
    except FormatError:
        raise
    except _image_errors() as exc:
        raise FormatError(f"{where}: an image that cannot be decoded: {exc}") from None
    return arr.reshape(spec.shape)
