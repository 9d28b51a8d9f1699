"""PyAV back end of :class:`~trajstore.storages.frames.video.VideoStorage`: encode and decode segment files.

A *segment* is one MP4 file of H.264 video holding frames ``0 .. n-1`` at a constant
``fps``; frame ``i`` has the presentation time ``i / fps`` s. Keyframes are exactly the
frames ``0, g, 2g, ...`` (``g`` = ``gop_size``, scene-cut keyframes are off); readers take
them from the file's own sample table, so no reader depends on ``g``.

- :class:`SegmentEncoder` writes one segment into a hidden temp name and renames it into
  place only after the container is closed and the bytes are fsynced: a segment file is
  complete or absent, never empty or torn.
- Reading is in :mod:`~trajstore.storages.frames._segment_reader` (frame tables from the MP4
  index, reused decoders fed packet by packet).

Nothing here imports ``av`` at module import time: it is loaded on first use, so the core
package does not need PyAV. Fork safety: in a forked child, every encoder inherited from the
parent is :meth:`SegmentEncoder.abandon`-ed at once by an ``os.register_at_fork`` hook, so
the child can neither write the parent's file nor hang freeing the encoder, whatever it does.
"""

from __future__ import annotations

import ctypes
import io
import os
import weakref
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._fs import fsync_dir

#: Codecs this back end writes. libsvtav1 is left out on purpose: run as root it switches the
#: calling process to SCHED_FIFO 99, and since a segment encoder stays open across many
#: ``set`` calls, the threads it spawns would run at real-time priority for that whole time.
CODECS = {"libx264": "h264"}
#: Pixel formats offered; 4:2:0 needs even sizes (odd frames are padded, see :func:`coded_size`).
PIX_FMTS = ("yuv420p", "yuv444p")
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")
TMP_SUFFIX = ".tmp"

# Encoders dropped in a forked child. Freeing one there would join x264 worker threads that
# do not exist in the child (measured: the child hangs), so they are leaked on purpose.
_ABANDONED: list[Any] = []
# Open encoders of this process, abandoned in a forked child before any other code runs there.
_OPEN_ENCODERS: "weakref.WeakSet[SegmentEncoder]" = weakref.WeakSet()


def _abandon_inherited_encoders() -> None:
    for encoder in list(_OPEN_ENCODERS):
        encoder.abandon()
    _OPEN_ENCODERS.clear()


os.register_at_fork(after_in_child=_abandon_inherited_encoders)


def _av() -> Any:
    try:
        import av
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("VideoStorage needs PyAV: pip install 'trajstore[video]' (or pip install av)") from exc
    return av


def _reformatter() -> Any:
    # One reused single-threaded swscale context per encoder/reader: PyAV's per-frame default
    # (a new context with a thread pool each call) measured 1.15 ms per 224x224 frame to RGB
    # here, a reused one 0.08 ms, with identical output.
    from av.video.reformatter import VideoReformatter

    return VideoReformatter()


@dataclass(frozen=True)
class EncoderSettings:
    """How segments are encoded (all JSON values; stored in the storage config and checked
    there, by the options :class:`~trajstore.storages.frames.video.VideoStorage` declares).

    Attributes:
        codec: encoder name, one of :data:`CODECS` (``"libx264"``, H.264).
        crf: x264 constant rate factor, 0 (lossless luma) .. 51; lower is better and bigger.
        preset: x264 speed preset, one of :data:`PRESETS`.
        gop_size: frames from one keyframe to the next (>= 1). A random read decodes on
            average about ``gop_size / 2`` frames, so small is fast to read and large is small on disk.
        pix_fmt: ``"yuv420p"`` (chroma at half resolution, plays everywhere) or ``"yuv444p"``.
    """

    codec: str = "libx264"
    crf: int = 20
    preset: str = "faster"
    gop_size: int = 1
    pix_fmt: str = "yuv420p"


def coded_size(height: int, width: int, pix_fmt: str) -> tuple[int, int]:
    """The frame size in the file: 4:2:0 rounds ``(H, W)`` up to even (the extra row/column
    repeats the edge and is cropped on read); 4:4:4 keeps it."""
    if pix_fmt == "yuv420p":
        return height + height % 2, width + width % 2
    return height, width


def fps_fraction(fps: float) -> Fraction:
    """``fps`` (Hz) as an exact-enough fraction for stream time bases (29.97 -> 2997/100)."""
    return Fraction(fps).limit_denominator(1001 * 1000)


class _OwnedFile(io.RawIOBase):
    """The output file an encoder writes through, on a plain descriptor (PyAV buffers already).

    :meth:`disown` in a forked child closes this process's copy of the descriptor and marks
    the file closed, so PyAV skips the MP4 trailer and nothing can reach the parent's file.
    """

    def __init__(self, path: Path):
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        while view:  # a regular file may take fewer bytes per call
            view = view[os.write(self._fd, view):]
        return len(data)

    def read(self, size: int = -1) -> bytes:
        return os.read(self._fd, size if size >= 0 else 1 << 30)

    def seek(self, offset: int, whence: int = 0) -> int:
        return os.lseek(self._fd, offset, whence)

    def tell(self) -> int:
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
        super().close()

    disown = close  # in a forked child this closes only the child's copy; the parent's stays open


class SegmentEncoder:
    """Encode frames into one new segment file.

    Frames go to ``<path>.tmp`` next to ``path``; :meth:`close` finalises the MP4, fsyncs it,
    renames it to ``path`` and fsyncs the folder.

    Args:
        path: final file name (``.mp4``); must not exist.
        height, width: true frame size ``H, W`` (pixels); odd sizes are padded for 4:2:0.
        fps: frame rate (Hz) written into the file.
        settings: codec options.
    """

    def __init__(self, path: Path, height: int, width: int, fps: float, settings: EncoderSettings):
        av = _av()
        self.path = Path(path)
        self.tmp_path = self.path.with_name(self.path.name + TMP_SUFFIX)
        self.height, self.width = height, width
        self.coded = coded_size(height, width, settings.pix_fmt)
        self.frames_written = 0
        self._pix_fmt = settings.pix_fmt
        self._reformatter = _reformatter()
        self._file: _OwnedFile | None = _OwnedFile(self.tmp_path)
        try:
            self._container = av.open(self._file, "w", format="mp4")
            self._stream = self._container.add_stream(settings.codec, rate=fps_fraction(fps))
            self._stream.height, self._stream.width = self.coded
            self._stream.pix_fmt = settings.pix_fmt
            g = int(settings.gop_size)
            # Fixed keyframe grid (no scene cuts) so readers know where to seek from the frame number.
            # No B-frames: measured at 224x224, gop 8, crf 20: +2% bytes, random reads ~25% faster
            # (no reordering delay to decode through), and decode order = presentation order.
            self._stream.options = {"crf": str(int(settings.crf)), "preset": settings.preset,
                                    "x264-params": f"keyint={g}:min-keyint={g}:scenecut=0:bframes=0"}
        except BaseException:
            self._file.close()
            self.tmp_path.unlink(missing_ok=True)
            raise
        _OPEN_ENCODERS.add(self)

    def encode(self, frames: np.ndarray) -> None:
        """Append frames ``(N, H, W, 3)`` uint8 RGB."""
        av = _av()
        frames = np.asarray(frames, dtype=np.uint8)
        ch, cw = self.coded
        if (ch, cw) != (self.height, self.width):
            frames = np.pad(frames, ((0, 0), (0, ch - self.height), (0, cw - self.width), (0, 0)), mode="edge")
        for frame in frames:
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
            vf = self._reformatter.reformat(vf, format=self._pix_fmt, threads=1)
            vf.pts = self.frames_written
            self._container.mux(self._stream.encode(vf))
            self.frames_written += 1

    def close(self) -> Path:
        """Finish the file and move it into place; returns ``path``.

        Raises:
            ValueError: no frame was encoded (an empty segment is never written; use :meth:`discard`).
        """
        if self.frames_written == 0:
            raise ValueError(f"segment {self.path.name} has no frames; discard it instead")
        if self._file is None:
            raise ValueError(f"segment {self.path.name} was already closed, discarded or abandoned")
        self._container.mux(self._stream.encode(None))  # drain the encoder's delayed frames
        self._container.close()
        _OPEN_ENCODERS.discard(self)
        self._file.sync()
        self._file.close()
        self._file = None
        os.replace(self.tmp_path, self.path)
        fsync_dir(self.path.parent)
        return self.path

    def discard(self) -> None:
        """Close without keeping anything (removes the temp file)."""
        if self._file is None:
            return
        _OPEN_ENCODERS.discard(self)
        try:
            self._container.close()
        finally:
            self._file.close()
            self._file = None
            self.tmp_path.unlink(missing_ok=True)

    def abandon(self) -> None:
        """In a forked child: let go of the parent's encoder without finishing or freeing it.

        The child's copy of the file descriptor is closed first, so PyAV skips the trailer,
        and the encoder objects are kept alive for the life of the process: freeing them would
        join encoder threads that only exist in the parent.
        """
        if self._file is None:
            return  # closed, discarded or already abandoned
        self._file.disown()
        self._file = None
        for obj in (self._container, self._stream):
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))  # never freed, even at interpreter exit
            _ABANDONED.append(obj)
