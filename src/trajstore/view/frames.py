"""Camera frames as the viewer's page shows them: one image file per frame.

A leaf stored losslessly (PNG chunks, raw HDF5) is sent as PNG, so the page shows the pixels that were
appended; a JPEG or video leaf is sent as JPEG (quality :data:`JPEG_QUALITY`), re-encoded from the frame
the buffer's own reader decoded. Frames that are not RGB uint8 (CHW, depth, uint16, float) are turned into
display RGB first as the preview does (:func:`~trajstore.ops.preview_data.to_rgb`: CHW transposed,
one channel scaled from its min..max to gray).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from trajstore.ops.preview_data import to_rgb

__all__ = ["JPEG_QUALITY", "PNG_LEVEL", "encode_frame"]

#: Quality of the JPEG a lossy leaf's frame is re-encoded at (simplejpeg's 0..100 scale).
JPEG_QUALITY = 92
#: zlib level of the PNG of a lossless leaf's frame: 1 is several times faster than the default 6 and
#: only somewhat larger, which matters more for playback over loopback than bytes.
PNG_LEVEL = 1


def encode_frame(frame: np.ndarray, *, layout: Any = None, lossless: bool) -> tuple[bytes, str]:
    """``(image bytes, content type)`` of one frame, ``(H, W, C)`` / ``(C, H, W)`` for ``layout="CHW"`` /
    ``(H, W)``: PNG (``"image/png"``) when ``lossless``, else JPEG (``"image/jpeg"``).

    Raises:
        ValueError: ``frame`` is not 2-D or 3-D.
    """
    frame = np.asarray(frame)
    if frame.ndim not in (2, 3):
        raise ValueError(f"a camera frame is (H, W), (H, W, C) or (C, H, W), got shape {frame.shape}")
    rgb = np.ascontiguousarray(to_rgb(frame[None], layout)[0])
    if lossless:
        from PIL import Image

        out = io.BytesIO()
        Image.fromarray(rgb).save(out, format="PNG", compress_level=PNG_LEVEL)
        return out.getvalue(), "image/png"
    import simplejpeg

    return simplejpeg.encode_jpeg(rgb, quality=JPEG_QUALITY, colorspace="RGB"), "image/jpeg"
