"""Look at an episode: a contact sheet of one camera (PNG, Pillow) or a video of every camera (MP4, PyAV).

* ``.png``: every ``every``-th frame of one camera in a grid of :data:`SHEET_COLUMNS` columns, each
  labelled with its step number in the episode (``t=0``, ``t=5``, ...) on a strip under the frame.
  A tile is ``W`` pixels wide and ``H + LABEL_HEIGHT`` high, so the sheet is
  ``min(n, SHEET_COLUMNS) * W`` by ``ceil(n / SHEET_COLUMNS) * (H + LABEL_HEIGHT)`` for ``n`` tiles.
* ``.mp4``: one frame per step (frame count = the episode's steps), every camera side by side
  (shorter ones padded with black at the bottom), H.264 at the buffer's frame rate
  (:func:`~trajstore.ops.episodes.buffer_fps`; :data:`DEFAULT_FPS` when the
  metadata has none), written through trajstore's own segment encoder (temp file, then rename).

Single-channel frames (depth, grayscale; ``(H, W)`` or ``(H, W, 1)``, uint8 or uint16) are shown as
gray, scaled from the episode's min..max to 0..255.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from trajstore.errors import UnknownLeafError
from trajstore.ops.episodes import buffer_fps, camera_keys, episode_position
from trajstore.replay_buffer.replay_buffer import ReplayBuffer
from trajstore.spaces import tree

SHEET_COLUMNS = 8
LABEL_HEIGHT = 14
#: Frame rate of an MP4 preview when neither the cameras nor the buffer declare one (Hz).
DEFAULT_FPS = 30.0
#: Steps decoded at a time.
READ_BATCH = 128
SUFFIXES = (".png", ".mp4")

Progress = Callable[[int], None]


@dataclass
class PreviewResult:
    path: str
    episode: int  # Episode.id
    cameras: list[str]
    frames: int  # tiles of the sheet, or frames of the video
    size: tuple[int, int]  # (width, height) in pixels
    fps: float | None = None  # video only
    fps_source: str | None = None

    def line(self) -> str:
        what = (f"{self.frames} frames at {self.fps:g} fps ({self.fps_source})" if self.fps is not None
                else f"{self.frames} frames")
        return (f"{self.path}: episode {self.episode}, {', '.join(self.cameras)}, {what}, "
                f"{self.size[0]}x{self.size[1]} pixels")


def write_preview(path: str | os.PathLike, episode: int, out: str | os.PathLike, *, camera: str | None = None,
                  every: int = 1, progress: Progress | None = None) -> PreviewResult:
    """Write a preview of episode ``episode`` (an ``Episode.id``) of the buffer at ``path`` to ``out``.

    Args:
        camera: the camera leaf of a ``.png`` sheet (default: the first camera in the space's order).
        every: keep every ``every``-th step in a ``.png`` sheet (>= 1).
        progress: called with a number of steps after each batch decoded.

    Raises:
        ValueError: ``out`` ends in neither ``.png`` nor ``.mp4``; ``every`` < 1; the buffer has no
            camera leaf; ``camera`` is not one of them (names the cameras).
        UnknownLeafError: (a ``ValueError``) ``camera`` is no leaf of the buffer at all.
        IndexError: no held episode has that id.
        FormatError: ``path`` is not a buffer folder.
        ImportError: ``.mp4`` without PyAV (``pip install trajstore[video]``).
        Nothing is written when one of these is raised.
    """
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{out}: unknown preview format {out.suffix or '(no suffix)'!r}; use .png (a contact "
                         "sheet) or .mp4 (a video)")
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be an int >= 1, got {every!r}")
    with ReplayBuffer.load_from(path, read_only=True) as rb:
        cameras = camera_keys(rb)
        if not cameras:
            raise ValueError(f"{path} has no camera leaf to preview (leaves of an image or video storage, or tagged "
                             f"kind=image/depth); its leaves: {[k for k in _leaf_names(rb)]}")
        if camera is not None and camera not in cameras:
            leaves = {tree.path_name(p) for p in tree.leaf_paths(rb.space)}
            error = ValueError if camera in leaves else UnknownLeafError  # UnknownLeafError: no such leaf at all
            raise error(f"{path} has no camera {camera!r}; its cameras: {cameras}")
        k = episode_position(rb, episode)
        ep = rb.episode(k)
        if suffix == ".png":
            chosen = [camera or cameras[0]]
            frames = _frames(rb, ep.start, ep.stop, chosen, every, progress)[0]
            sheet = contact_sheet(frames, np.arange(0, len(ep), every))
            _save_atomic(out, lambda tmp: sheet.save(tmp, format="PNG"))
            return PreviewResult(str(out), ep.id, chosen, len(frames), sheet.size)
        fps, source, _ = buffer_fps(rb)
        if fps is None:
            fps, source = DEFAULT_FPS, f"default: {source}"
        frames = _frames(rb, ep.start, ep.stop, cameras, 1, progress)
        size = write_side_by_side(out, frames, fps)
        return PreviewResult(str(out), ep.id, cameras, len(ep), size, fps, source)


def _leaf_names(rb: ReplayBuffer) -> list[str]:
    sep = getattr(rb.storage, "nested_separator", "/")
    return [tree.path_name(p, sep) for p in tree.leaf_paths(rb.space)]


def _frames(rb: ReplayBuffer, start: int, stop: int, cameras: Sequence[str], every: int,
            progress: Progress | None) -> list[np.ndarray]:
    """Frames of each camera at steps ``start, start + every, ... < stop``, as display RGB uint8."""
    sep = getattr(rb.storage, "nested_separator", "/")
    paths = [tree.parse_name(c, sep) for c in cameras]
    wanted = np.arange(start, stop, every)
    parts: list[list[np.ndarray]] = [[] for _ in cameras]
    for a in range(0, len(wanted), READ_BATCH):
        idx = wanted[a:a + READ_BATCH]
        batch = rb.get_at(idx)  # one gather (the leaves not asked for are read too: a preview is small)
        for i, p in enumerate(paths):
            parts[i].append(np.asarray(tree.get(batch, p)))
        if progress is not None:
            progress(len(idx))
    return [to_rgb(np.concatenate(chunks)) for chunks in parts]


def to_rgb(frames: np.ndarray) -> np.ndarray:
    """``(N, H, W, 3)`` uint8 for display: RGB uint8 as it is; single-channel frames scaled min..max to gray."""
    if frames.ndim == 4 and frames.shape[-1] == 3 and frames.dtype == np.uint8:
        return frames
    gray = frames[..., 0] if frames.ndim == 4 else frames
    lo, hi = (float(gray.min()), float(gray.max())) if gray.size else (0.0, 1.0)
    scaled = ((gray.astype(np.float64) - lo) * (255.0 / (hi - lo if hi > lo else 1.0))).round().astype(np.uint8)
    return np.repeat(scaled[..., None], 3, axis=-1)


def contact_sheet(frames: np.ndarray, steps: Sequence[int], columns: int = SHEET_COLUMNS) -> Any:
    """A ``PIL.Image`` grid of ``frames`` ``(N, H, W, 3)`` uint8, tile ``i`` labelled ``t=steps[i]``
    (size: see the module docstring)."""
    from PIL import Image, ImageDraw

    n, h, w = len(frames), frames.shape[1], frames.shape[2]
    cols = max(1, min(n, columns))
    rows = max(1, math.ceil(n / cols))
    sheet = Image.new("RGB", (cols * w, rows * (h + LABEL_HEIGHT)), "black")
    draw = ImageDraw.Draw(sheet)
    for i, (frame, step) in enumerate(zip(frames, steps)):
        x, y = (i % cols) * w, (i // cols) * (h + LABEL_HEIGHT)
        sheet.paste(Image.fromarray(np.ascontiguousarray(frame)), (x, y))
        draw.text((x + 2, y + h + 1), f"t={int(step)}", fill="white")
    return sheet


def write_side_by_side(out: Path, cameras: Sequence[np.ndarray], fps: float) -> tuple[int, int]:
    """Encode the cameras' frames (each ``(N, H_i, W_i, 3)`` uint8, same ``N``) side by side as H.264 MP4
    at ``fps`` Hz; returns the picture ``(width, height)``."""
    from trajstore.storages.frames._video_codec import EncoderSettings, SegmentEncoder

    height = max(f.shape[1] for f in cameras)
    padded = [np.pad(f, ((0, 0), (0, height - f.shape[1]), (0, 0), (0, 0))) for f in cameras]
    frames = np.concatenate(padded, axis=2)
    width = frames.shape[2]
    tmp_final = out.with_name(f".{out.name}.{os.getpid()}.part.mp4")
    encoder = SegmentEncoder(tmp_final, height, width, fps, EncoderSettings(crf=18, gop_size=30))
    try:
        for a in range(0, len(frames), READ_BATCH):
            encoder.encode(frames[a:a + READ_BATCH])
        encoder.close()
    except BaseException:
        encoder.discard()
        raise
    os.replace(tmp_final, out)
    return width, height


def _save_atomic(out: Path, save: Callable[[Path], None]) -> None:
    """Write through a temp file next to ``out`` and rename: a failed write leaves no half file."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        save(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
