"""Values of one LeRobot episode: numeric columns of the data parquet, PNG/JPEG images embedded in
it, and frames of a video file that several episodes share.

A video file holds episodes one after the other; an episode's frames are the ones whose
presentation time ``pts * time_base`` is nearest to ``from_timestamp + i / fps`` (``i`` = 0 .. length-1),
within half a frame period (LeRobot's own reader picks frames by timestamp the same way, with a
tolerance). Nothing assumes that an episode starts at 0 or at the file's first frame.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from trajstore._fs import path_inside
from trajstore.errors import FormatError
from trajstore.interop.lerobot._source import Feature, VideoSpan

#: Slack (s) on the half-frame window, for timestamps stored as float32 (LeRobot's ``timestamp``).
TIME_SLACK = 1e-4


def array_values(table: Any, feature: Feature, where: str) -> np.ndarray:
    """The column ``feature.key`` of a pyarrow table as ``(n, *feature.shape)`` of ``feature.dtype``.

    Fixed-size and variable lists (nested for 2-D features) are flattened; a scalar column fits a
    shape of ``[1]`` or ``()``; a ``"string"`` feature gives str values.

    Raises:
        FormatError: the column holds another number of elements than ``n * prod(shape)``, or nulls.
    """
    column = table.column(feature.key).combine_chunks()
    n = len(column)
    if feature.dtype == "string":  # a text leaf a trajstore export kept: one string per frame
        cells = column.to_pylist()
        if not all(isinstance(c, str) for c in cells):
            raise FormatError(f"{where}: column {feature.key!r} holds a value that is not a string")
        return np.array(cells, dtype=str).reshape((n, *feature.shape))
    values = column
    while _is_list(values.type):  # one level per axis of a nested list feature
        values = values.flatten()
    if values.null_count:
        raise FormatError(f"{where}: column {feature.key!r} has missing values")
    flat = values.to_numpy(zero_copy_only=False)
    expected = n * int(np.prod(feature.shape, dtype=np.int64))
    if flat.size != expected:
        raise FormatError(f"{where}: column {feature.key!r} holds {flat.size} values for {n} frames of shape "
                          f"{feature.shape} (expected {expected})")
    try:
        return flat.astype(np.dtype(feature.dtype), copy=False).reshape((n, *feature.shape))
    except TypeError as exc:
        raise FormatError(f"{where}: feature {feature.key!r} has dtype {feature.dtype!r}, "
                          "which is not a NumPy dtype") from exc


def _is_list(arrow_type: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def decode_image(cell: Any, feature: Feature, root: Path, where: str) -> np.ndarray:
    """One embedded image (``{"bytes": PNG/JPEG bytes, "path": ...}``) as ``(H, W, 3)`` uint8.

    An image without bytes is read from ``path``, relative to the dataset folder and inside it (see
    :func:`trajstore._fs.path_inside`).

    Raises:
        FormatError: no bytes and no file, a ``path`` that leads outside the dataset folder (absolute,
            ``..``, a symlink out of it), undecodable bytes, or another size than the feature's.
    """
    from PIL import Image

    data = cell.get("bytes") if isinstance(cell, dict) else None
    if data is None:
        rel = cell.get("path") if isinstance(cell, dict) else None
        file = path_inside(root, rel, f"{where}: image {feature.key!r}") if isinstance(rel, str) and rel else None
        if file is None or not file.is_file():
            raise FormatError(f"{where}: image {feature.key!r} has no bytes and no file ({rel!r})")
        data = file.read_bytes()
    if not isinstance(data, bytes):
        raise FormatError(f"{where}: image {feature.key!r} bytes are a {type(data).__name__}, not bytes")
    try:
        with Image.open(io.BytesIO(data)) as im:  # reads the header only
            if (im.height, im.width) != feature.shape[:2]:  # checked before the pixels are decoded
                raise FormatError(f"{where}: image {feature.key!r} is {im.height} x {im.width}, info.json says "
                                  f"{feature.shape}")
            frame = np.asarray(im if im.mode == "RGB" else im.convert("RGB"))
    except FormatError:
        raise
    except Exception as exc:  # PIL raises UnidentifiedImageError, OSError, ValueError, DecompressionBombError
        raise FormatError(f"{where}: image {feature.key!r} cannot be decoded: {exc}") from None
    if frame.shape != feature.shape:
        raise FormatError(f"{where}: image {feature.key!r} is {frame.shape}, info.json says {feature.shape}")
    return frame


class VideoFrames:
    """Decodes episodes out of LeRobot's shared video files, keeping the last file open (episodes come
    in file order, so consecutive ones reuse it). Close it when done."""

    def __init__(self) -> None:
        self._path: Path | None = None
        self._container: Any = None
        self._to_rgb: Any = None  # one reused swscale context (see storages/_video_codec.py: ~10x faster)

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
        self._container = self._path = None

    def _open(self, path: Path) -> Any:
        if path != self._path:
            self.close()
            try:
                import av
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise ImportError("importing LeRobot videos needs PyAV: pip install 'trajstore[lerobot]'") from exc
            try:
                self._container = av.open(str(path))
            except Exception as exc:  # av.error.InvalidDataError and friends
                raise FormatError(f"{path}: cannot open the video: {exc}") from None
            if not self._container.streams.video:
                self.close()
                raise FormatError(f"{path}: no video stream")
            self._path = path
            if self._to_rgb is None:
                from av.video.reformatter import VideoReformatter

                self._to_rgb = VideoReformatter()
        return self._container

    def episode(self, span: VideoSpan, length: int, fps: float, feature: Feature, where: str) -> Iterator[np.ndarray]:
        """Frames ``0 .. length-1`` of one episode, in order, each ``(H, W, 3)`` uint8.

        Frame ``i`` is the decoded frame nearest to ``span.from_timestamp + i / fps`` s, within half a
        frame period.

        Raises:
            FormatError: no frame near some ``i`` (names the file, episode, frame and time), a frame of
                another size than the feature's, or a stream that cannot be decoded.
        """
        container = self._open(span.file)
        stream = container.streams.video[0]
        targets = span.from_timestamp + np.arange(length) / fps
        half = 0.5 / fps + TIME_SLACK
        first = self._frames_from(container, stream, span.from_timestamp - 1.0 / fps)
        try:
            for frame in _nearest(first, targets, half, f"{where} ({span.file})", feature,
                                  lambda: self._frames_from(container, stream, None)):
                rgb = self._to_rgb.reformat(frame, format="rgb24", threads=1).to_ndarray()
                if rgb.shape != feature.shape:
                    raise FormatError(f"{where}: video {feature.key!r} frames are {rgb.shape}, "
                                      f"info.json says {feature.shape}")
                yield rgb
        except FormatError:
            raise
        except Exception as exc:  # a decoder error in the middle of the file
            raise FormatError(f"{where}: cannot decode {span.file}: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _frames_from(container: Any, stream: Any, seconds: float | None) -> Iterator[Any]:
        """Decoded frames from the keyframe at or before ``seconds`` (the file's start when None)."""
        if seconds is None or seconds <= 0 or stream.time_base is None:
            container.seek(0)
        else:
            container.seek(int(seconds / stream.time_base), stream=stream, backward=True, any_frame=False)
        for frame in container.decode(stream):
            if frame.pts is not None:
                yield frame


def _nearest(frames: Iterator[Any], targets: np.ndarray, half: float, where: str, feature: Feature,
             from_start: Any) -> Iterator[Any]:
    """For each target time, the frame of ``frames`` (in presentation order) nearest to it within ``half``
    s. When the first frame after the seek is already past the first target (a seek that landed late),
    decoding starts over from the file's start (``from_start()``), once."""
    n, nxt, pending = len(targets), 0, None  # pending: (distance, frame) best so far for targets[nxt]
    restarted = False
    while True:
        for frame in frames:
            t = float(frame.pts * frame.time_base)
            if nxt == 0 and pending is None and t > targets[0] + half and not restarted:
                break  # landed past the episode's start: decode from the file's start instead
            while nxt < n:
                d = t - targets[nxt]
                if d < -half:
                    break  # before this target's window: the next frame may fit
                if d <= half:
                    if pending is None or abs(d) < pending[0]:
                        pending = (abs(d), frame)
                    break
                if pending is None:  # past the window with no frame in it
                    raise _missing(where, feature, nxt, targets[nxt])
                yield pending[1]
                pending, nxt = None, nxt + 1
            if nxt >= n:
                return
        else:  # the stream ended
            if pending is not None:
                yield pending[1]
                nxt += 1
            if nxt < n:
                raise _missing(where, feature, nxt, targets[nxt])
            return
        frames, restarted = from_start(), True


def _missing(where: str, feature: Feature, i: int, t: float) -> FormatError:
    return FormatError(f"{where}: video {feature.key!r} has no frame within half a frame period of frame {i} "
                       f"(t = {t:.4f} s)")
