"""Decode the JPEG frames of a compressed ALOHA episode (``root.attrs["compress"]``).

A frame is one row of ``/observations/images/<cam>``, ``(padded_size,)`` uint8: the bytes
``cv2.imencode(".jpg", image)`` gave, followed by zeros up to the longest frame of the episode (Interbotix
``aloha`` / ``mobile-aloha`` ``record_episodes.py``; act-plus-plus ``compress_data.py`` pads each camera to its
own longest frame). A JPEG ends with its end-of-image marker ``FF D9``, so the frame is the row up to its
last non-zero byte; ACT's loaders decode the whole padded row with ``cv2.imdecode``, which stops there too.

Colour order: OpenCV encodes the array it is given as if it were BGR, and ``cv2.imdecode`` gives it back in
that order, so what ACT's loaders hand the policy is the array the recorder had. Decoding as ``"BGR"``
(simplejpeg, libjpeg-turbo) gives that same array; a plain RGB decoder would swap red and blue.
"""

from __future__ import annotations

import numpy as np

from trajstore.errors import FormatError
from trajstore.interop.aloha._source import MAX_FRAME_PIXELS, MAX_STEP_BYTES


def frame_bytes(row: np.ndarray, where: str) -> memoryview:
    """The JPEG bytes of one padded row ``(padded_size,)`` uint8: up to its last non-zero byte.

    Raises:
        FormatError: the row is all zeros or does not end with the end-of-image marker ``FF D9``.
    """
    nz = np.flatnonzero(row)
    if nz.size == 0:
        raise FormatError(f"{where}: an empty frame (all {row.size} bytes are 0)")
    end = int(nz[-1]) + 1
    if end < 4 or row[end - 2] != 0xFF or row[end - 1] != 0xD9:
        raise FormatError(f"{where}: not a JPEG frame (no end-of-image marker FF D9 before the zero padding)")
    return memoryview(np.ascontiguousarray(row[:end]))


def jpeg_size(row: np.ndarray, where: str) -> tuple[int, int]:
    """``(H, W)`` from the header of the JPEG in ``row`` (a padded row), checked against
    :data:`~trajstore.interop.aloha._source.MAX_FRAME_PIXELS` and, decoded (``H * W * 3`` bytes), against the
    per-step bound :data:`~trajstore.interop.aloha._source.MAX_STEP_BYTES` that raw frames have.

    Raises:
        FormatError: not a JPEG, or a frame size beyond the bound.
    """
    import simplejpeg

    data = frame_bytes(row, where)
    try:
        h, w, _, _ = simplejpeg.decode_jpeg_header(data)
    except Exception as exc:  # simplejpeg raises ValueError / RuntimeError on corrupt headers
        raise FormatError(f"{where}: not a JPEG frame ({exc})") from None
    if not (0 < h and 0 < w and h * w <= MAX_FRAME_PIXELS and h * w * 3 <= MAX_STEP_BYTES):
        raise FormatError(f"{where}: a JPEG frame of {w}x{h} pixels ({h * w * 3} bytes decoded), expected "
                          f"1..{min(MAX_FRAME_PIXELS, MAX_STEP_BYTES // 3)} pixels")
    return int(h), int(w)


def decode_frames(rows: np.ndarray, out: np.ndarray, lengths: np.ndarray | None, where: str, first: int) -> None:
    """Decode the padded rows ``(n, padded_size)`` into ``out`` ``(n, H, W, 3)`` uint8 (BGR decode: the
    recorder's array, see the module docstring).

    Args:
        lengths: ``compress_len[:, first:first + n]`` ``(num_cams, n)``: frame ``i``'s byte length must be one of
            column ``i`` (the recorders write the rows in their task config's camera order, which the file
            does not keep: h5py lists ``/observations/images`` by name).
        where: the file and key, for messages; ``first``: the step of ``rows[0]``.

    Raises:
        FormatError: a frame that is not a JPEG, decodes to another size, or whose length is not in
            ``compress_len``; names the step.
    """
    import simplejpeg

    for i in range(rows.shape[0]):
        at = f"{where}[{first + i}]"
        data = frame_bytes(rows[i], at)
        if lengths is not None and not np.any(lengths[:, i] == len(data)):
            raise FormatError(f"{at}: a JPEG frame of {len(data)} bytes, but /compress_len[:, {first + i}] says "
                              f"{[int(v) for v in lengths[:, i]]}")
        try:
            header = simplejpeg.decode_jpeg_header(data)
            if tuple(header[:2]) != out.shape[1:3]:
                raise FormatError(f"{at}: a JPEG frame of {header[1]}x{header[0]}, expected "
                                  f"{out.shape[2]}x{out.shape[1]} like frame 0")
            simplejpeg.decode_jpeg(data, colorspace="BGR", buffer=out[i])
        except FormatError:
            raise
        except Exception as exc:  # corrupt entropy data: simplejpeg raises ValueError / RuntimeError
            raise FormatError(f"{at}: the JPEG frame cannot be decoded ({exc})") from None
