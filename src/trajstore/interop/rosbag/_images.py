"""ROS 2 camera messages as arrays: ``sensor_msgs/msg/Image`` (raw pixels in one of the encodings of
``sensor_msgs/image_encodings.hpp``) and ``sensor_msgs/msg/CompressedImage`` (JPEG or PNG, as
``image_transport``'s ``compressed`` and ``compressedDepth`` plugins write them).

Colour frames become ``(H, W, 3)`` uint8 RGB (``bgr8``/``bgra8``/``rgba8`` reordered, alpha dropped),
``mono8`` ``(H, W)`` uint8, ``mono16``/``16UC1`` ``(H, W)`` uint16 (depth in mm, REP 118) and ``32FC1``
``(H, W)`` float32 (depth in m). Sizes are checked before any pixel is copied or decoded.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from trajstore.errors import FormatError
from trajstore.spaces import BoxSpace, Space

#: Most pixels one imported frame may have (64 M: a 4K frame is 8.3 M). A message declaring more is refused
#: before anything is allocated for it.
MAX_FRAME_PIXELS = 1 << 26

#: ROS encoding (lower case) -> (dtype, channels in the message, channel order to keep for the array).
ENCODINGS: dict[str, tuple[str, int, tuple[int, ...] | None]] = {
    "rgb8": ("u1", 3, (0, 1, 2)), "bgr8": ("u1", 3, (2, 1, 0)), "8uc3": ("u1", 3, (2, 1, 0)),
    "rgba8": ("u1", 4, (0, 1, 2)), "bgra8": ("u1", 4, (2, 1, 0)), "8uc4": ("u1", 4, (2, 1, 0)),
    "mono8": ("u1", 1, None), "8uc1": ("u1", 1, None),
    "mono16": ("u2", 1, None), "16uc1": ("u2", 1, None),
    "32fc1": ("f4", 1, None),
}


def image_space(frame: np.ndarray, encoding: str, fps: float | None) -> Space:
    """The stream space of frames like ``frame`` (the topic's first), with camera metadata: ``kind``
    (``"image"``; ``"depth"`` for uint16 and float32 single-channel frames), ``layout`` (``"HWC"`` / ``"HW"``),
    ``fps`` when known, ``units`` for depth (``"mm"`` for uint16, ``"m"`` for float32) and the ROS ``encoding``."""
    meta: dict[str, Any] = {"layout": "HWC" if frame.ndim == 3 else "HW", "encoding": encoding}
    if frame.dtype == np.uint16:
        meta.update(kind="depth", units="mm")
    elif frame.dtype == np.float32:
        meta.update(units="m")  # float depth: no frame storage takes it, HDF5 keeps it exactly
    else:
        meta["kind"] = "image"
    if fps is not None:
        meta["fps"] = fps
    if frame.dtype.kind == "f":
        return BoxSpace(-np.inf, np.inf, frame.shape, frame.dtype, metadata=meta)
    info = np.iinfo(frame.dtype)
    return BoxSpace(0, info.max, frame.shape, frame.dtype, metadata=meta)


def _check_pixels(h: int, w: int, where: str) -> None:
    if h <= 0 or w <= 0 or h * w > MAX_FRAME_PIXELS:
        raise FormatError(f"{where}: a frame of {h} x {w} pixels; 1 to {MAX_FRAME_PIXELS} pixels are imported")


def raw_image(msg: Any, where: str) -> tuple[np.ndarray, str]:
    """A ``sensor_msgs/msg/Image`` as an array (see the module docstring) and its encoding (as written).

    Raises:
        FormatError: an encoding not in :data:`ENCODINGS` (Bayer, YUV, ...), a size beyond
            :data:`MAX_FRAME_PIXELS`, or a ``step``/``data`` length that does not hold ``height`` rows
            (names ``where``).
    """
    encoding = str(msg.encoding)
    spec = ENCODINGS.get(encoding.lower())
    if spec is None:
        raise FormatError(f"{where}: image encoding {encoding!r} is not imported (known: {sorted(ENCODINGS)})")
    code, channels, order = spec
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    _check_pixels(h, w, where)
    dtype = np.dtype(code).newbyteorder(">" if msg.is_bigendian else "<")
    row = w * channels * dtype.itemsize
    data = np.asarray(msg.data, dtype=np.uint8).reshape(-1)
    if step < row or data.size < step * h:
        raise FormatError(f"{where}: image {w} x {h} {encoding} needs {h} rows of >= {row} bytes; the message "
                          f"has step {step} and {data.size} bytes")
    pixels = data[:step * h].reshape(h, step)[:, :row].copy().view(dtype).reshape(h, w, channels)
    pixels = pixels.astype(dtype.newbyteorder("="), copy=False)
    if channels == 1:
        return np.ascontiguousarray(pixels[..., 0]), encoding
    return np.ascontiguousarray(pixels[..., list(order)]), encoding


#: Bytes before the PNG of an ``image_transport`` ``compressedDepth`` message (a ConfigHeader: the
#: format enum and two float depth-quantisation parameters).
COMPRESSED_DEPTH_HEADER = 12


def compressed_image(msg: Any, where: str) -> tuple[np.ndarray, str]:
    """A ``sensor_msgs/msg/CompressedImage`` decoded (Pillow) and its ``format`` string.

    JPEG/PNG colour -> ``(H, W, 3)`` uint8 RGB, 8-bit grey -> ``(H, W)`` uint8, 16-bit grey PNG (and
    ``compressedDepth`` of ``16UC1``) -> ``(H, W)`` uint16. The frame size is read from the header and
    checked before the pixels are decoded.

    Raises:
        FormatError: undecodable data, a size beyond :data:`MAX_FRAME_PIXELS`, or a ``compressedDepth``
            message of 32-bit float depth (quantised inverse depth; not imported).
    """
    from PIL import Image

    fmt = str(msg.format)
    data = np.asarray(msg.data, dtype=np.uint8).tobytes()
    if "compresseddepth" in fmt.lower():
        if "32fc1" in fmt.lower():
            raise FormatError(f"{where}: compressedDepth of 32FC1 depth ({fmt!r}) is not imported")
        data = data[COMPRESSED_DEPTH_HEADER:]
    try:
        with Image.open(io.BytesIO(data)) as im:  # reads the header only
            _check_pixels(im.height, im.width, where)
            if im.mode in ("L", "I;16", "I;16B", "I;16L", "I"):
                frame = np.asarray(im)
                if im.mode != "L":
                    frame = frame.astype(np.uint16)  # 16-bit PNG (Pillow may give int32 "I")
            else:
                frame = np.asarray(im if im.mode == "RGB" else im.convert("RGB"))
    except FormatError:
        raise
    except Exception as exc:  # PIL raises UnidentifiedImageError, OSError, ValueError, DecompressionBombError
        raise FormatError(f"{where}: compressed image ({fmt!r}) cannot be decoded: {exc}") from None
    return frame, fmt
