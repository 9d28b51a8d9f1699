"""MP4 files of a LeRobot export: one per camera per file index, episodes back to back.

Frame ``j`` of the file (counting across its episodes) has the presentation time ``j / fps`` s, so an
episode that starts at frame ``s`` of the file has ``from_timestamp = s / fps`` and its frame ``i`` is at
``from_timestamp + i / fps``, which is where LeRobot's reader looks for it (``_query_videos``).

Codecs (both ship in PyAV's wheel, encode on a CPU without privileges, and LeRobot decodes them):

- ``"h264"`` (libx264, the default): decoded by every player, PyAV and torchcodec; CRF 20 (the
  project's ``VideoStorage`` setting), no B-frames so decode order is presentation order.
- ``"libsvtav1"`` (AV1, LeRobot's own default; CRF 30 as LeRobot): smaller files. Run as root, SVT-AV1
  switches the calling thread to real-time scheduling (SCHED_FIFO); :meth:`ExportVideo.close` puts the
  process back to ``SCHED_OTHER``.

Both use a keyframe every 2 frames (LeRobot's ``g=2``): a random read decodes at most one frame
before the one it wants. Pixel format yuv420p (LeRobot's); H.264 frames of odd height or width are
written as yuv444p, since 4:2:0 needs even sizes (AV1 refuses odd sizes before anything is written).
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from trajstore.errors import UnsupportedSpaceError

#: ``vcodec`` -> (PyAV encoder, codec name LeRobot writes in info.json, default CRF).
CODECS = {"h264": ("libx264", "h264", 20), "libsvtav1": ("libsvtav1", "av1", 30)}
GOP = 2


def _av() -> Any:
    try:
        import av
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the LeRobot export needs PyAV: pip install 'trajstore[lerobot]'") from exc
    return av


def pix_fmt_for(vcodec: str, height: int, width: int, key: str) -> str:
    """The pixel format a camera of ``(height, width)`` gets with ``vcodec``.

    Raises:
        ValueError: unknown ``vcodec``.
        UnsupportedSpaceError: AV1 with an odd size (names the feature).
    """
    if vcodec not in CODECS:
        raise ValueError(f"vcodec must be one of {sorted(CODECS)}, got {vcodec!r}")
    if height % 2 == 0 and width % 2 == 0:
        return "yuv420p"
    if vcodec == "h264":
        return "yuv444p"
    raise UnsupportedSpaceError(f"camera {key!r}: {height}x{width} frames need even sizes for {vcodec} (yuv420p); "
                                "use vcodec='h264'")


def fps_fraction(fps: float) -> Fraction:
    """``fps`` (Hz) as a fraction for the stream time base (29.97 -> 2997/100)."""
    return Fraction(fps).limit_denominator(1001 * 1000)


def reset_scheduler() -> None:
    """Back to ordinary scheduling after SVT-AV1 (a no-op when nothing changed or where unsupported)."""
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) != os.SCHED_OTHER:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


class ExportVideo:
    """One MP4 file being written; :attr:`frames` counts the frames in it so far.

    Args:
        path: the new file (its folder is made).
        height, width: frame size in pixels.
        fps: frame rate (Hz).
        vcodec: a key of :data:`CODECS`.
        crf: constant rate factor (lower: better and bigger); ``None``: the codec's default.
        pix_fmt: from :func:`pix_fmt_for`.
    """

    def __init__(self, path: Path, height: int, width: int, fps: float, vcodec: str, crf: int | None,
                 pix_fmt: str):
        av = _av()
        encoder, _, default_crf = CODECS[vcodec]
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.frames = 0
        self._pix_fmt = pix_fmt
        self._container = av.open(str(path), "w", format="mp4")
        try:
            self._stream = self._container.add_stream(encoder, rate=fps_fraction(fps))
            self._stream.height, self._stream.width = height, width
            self._stream.pix_fmt = pix_fmt
            crf = str(default_crf if crf is None else int(crf))
            if encoder == "libx264":
                # One encoder thread: the same buffer must give the same bytes, and with 2 threads one run of
                # the export test in about 8 gave a different stream on a loaded machine.
                self._stream.codec_context.thread_count = 1
                self._stream.options = {"crf": crf, "preset": "faster",
                                        "x264-params": f"keyint={GOP}:min-keyint={GOP}:scenecut=0:bframes=0"}
            else:
                self._stream.options = {"crf": crf, "g": str(GOP), "preset": "8"}
        except BaseException:
            self._container.close()
            raise

    def encode(self, frames: np.ndarray) -> None:
        """Append frames ``(N, H, W, 3)`` uint8 RGB."""
        av = _av()
        for frame in frames:
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24").reformat(format=self._pix_fmt)
            vf.pts = self.frames
            self._container.mux(self._stream.encode(vf))
            self.frames += 1

    def size(self) -> int:
        """Bytes in the file so far (0 before the muxer has written anything: AV1 holds frames back)."""
        return self.path.stat().st_size if self.path.exists() else 0

    def close(self) -> None:
        """Drain the encoder and finish the file."""
        try:
            self._container.mux(self._stream.encode(None))
        finally:
            self._container.close()
            reset_scheduler()
