"""The MP4 preview (PyAV through trajstore's segment encoder): every camera side by side, one frame per
step, and optionally the plots of the low-dim leaves on the right with a cursor at the current step.

Picture: the cameras side by side (shorter ones padded with black at the bottom), ``Wv x Hv``. With
plots, the cameras are scaled up by the integer ``k = max(1, Hp // Hv)`` (nearest neighbour) and
padded to the plot panel's height ``Hp`` (at least :data:`MIN_PANEL_HEIGHT`), and the panel
(:class:`~trajstore.ops.preview_plots.PlotImage`, rendered once) follows on the right: the picture is
``k * Wv + Wp`` by ``Hp``. The cursor is drawn per frame into a copy of the panel with numpy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from trajstore.ops.preview_plots import PlotImage

#: Frames encoded at a time.
ENCODE_BATCH = 64
#: The plot panel of a video is at least this high (pixels), and :data:`PANEL_ROW_HEIGHT` per row of plots.
MIN_PANEL_HEIGHT = 360
PANEL_ROW_HEIGHT = 150
#: Width of one column of plots beside a video (pixels).
PANEL_COLUMN_WIDTH = 480


def panel_size(video_height: int, leaves: int) -> tuple[int, int, int]:
    """``(width, height, columns)`` of the plot panel beside a video ``video_height`` high with plots of
    ``leaves`` leaves: one column up to 4 leaves, else two; both sizes even (H.264 4:2:0)."""
    columns = 1 if leaves <= 4 else 2
    rows = -(-leaves // columns)
    height = max(video_height, MIN_PANEL_HEIGHT, rows * PANEL_ROW_HEIGHT)
    return columns * PANEL_COLUMN_WIDTH, height + height % 2, columns


def scale_factor(video_height: int, panel_height: int) -> int:
    """Integer scale-up of the cameras beside a panel ``panel_height`` high."""
    return max(1, panel_height // max(1, video_height))


def write_side_by_side(out: Path, cameras: Sequence[np.ndarray], fps: float, plot: PlotImage | None = None
                       ) -> tuple[int, int]:
    """Encode the cameras' frames (each ``(N, H_i, W_i, 3)`` uint8, same ``N``) side by side as H.264 MP4
    at ``fps`` Hz, with ``plot`` on the right and a cursor at frame ``i``'s step ``i`` (layout: the
    module docstring). Written to a temp file, then renamed to ``out``.

    Returns:
        The picture's ``(width, height)`` in pixels.

    Raises:
        ImportError: no PyAV (``pip install 'trajstore[video]'``).
    """
    from trajstore.storages.frames._video_codec import EncoderSettings, SegmentEncoder

    n = len(cameras[0])
    video_h = max(f.shape[1] for f in cameras)
    video_w = sum(f.shape[2] for f in cameras)
    k = 1 if plot is None else scale_factor(video_h, plot.pixels.shape[0])
    height = video_h * k if plot is None else max(video_h * k, plot.pixels.shape[0])
    width = video_w * k + (0 if plot is None else plot.pixels.shape[1])
    tmp_final = out.with_name(f".{out.name}.{os.getpid()}.part.mp4")
    encoder = SegmentEncoder(tmp_final, height, width, fps, EncoderSettings(crf=18, gop_size=30))
    try:
        for a in range(0, n, ENCODE_BATCH):
            b = min(n, a + ENCODE_BATCH)
            picture = np.zeros((b - a, height, width, 3), np.uint8)
            x = 0
            for f in cameras:
                part = f[a:b]
                if k > 1:
                    part = part.repeat(k, axis=1).repeat(k, axis=2)
                picture[:, :part.shape[1], x:x + part.shape[2]] = part
                x += part.shape[2]
            if plot is not None:
                ph, pw = plot.pixels.shape[:2]
                for i in range(a, b):
                    picture[i - a, :ph, x:x + pw] = plot.with_cursor(i)
            encoder.encode(picture)
        encoder.close()
    except BaseException:
        encoder.discard()
        raise
    os.replace(tmp_final, out)
    return width, height
