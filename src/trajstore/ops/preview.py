"""Look at an episode: a contact sheet (PNG, Pillow) or a video (MP4, PyAV), both with plots of the
low-dim leaves (matplotlib, the ``preview`` extra) and the episode data.

* ``.png``: a caption with the episode data (task, success, ...), then one row per camera of at most
  :data:`~trajstore.ops.preview_data.DEFAULT_FRAMES` frames evenly spaced over the episode (``frames=K``)
  or every ``every``-th frame, each labelled with its step and time, then the plots of the low-dim
  leaves (state, action, reward; one subplot per leaf, x axis = step, the frames' steps marked), then
  notes (leaves not plotted and why; the extra to install for plots). Layout and sizes:
  :mod:`trajstore.ops.preview_sheet`; which steps, times and leaves: :mod:`trajstore.ops.preview_data`.
* ``.mp4``: one frame per step (frame count = the episode's steps), every camera side by side, the
  plots on the right with a red cursor at the current step, H.264 at the buffer's frame rate
  (:func:`~trajstore.ops.episodes.buffer_fps`; :data:`DEFAULT_FPS` when the metadata has none).
  Layout: :mod:`trajstore.ops.preview_video`.

Single-channel frames (depth, grayscale; ``(H, W)`` or ``(H, W, 1)``, uint8 or uint16) are shown as
gray, scaled from the shown frames' min..max to 0..255. Without matplotlib the preview is written
without plots and :attr:`PreviewResult.notes` says which extra brings them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trajstore.errors import UnknownLeafError
from trajstore.ops.episodes import camera_keys
from trajstore.ops.preview_data import DEFAULT_FRAMES, READ_BATCH, choose_steps, gather, to_rgb
from trajstore.ops.preview_plots import EXTRA_NOTE, PlotImage, plot_series
from trajstore.ops.preview_sheet import (LABEL_HEIGHT, SHEET_COLUMNS, caption_text, camera_block, compose,
                                         contact_sheet, sheet_width)
from trajstore.ops.preview_video import panel_size, write_side_by_side
from trajstore.replay_buffer.replay_buffer import ReplayBuffer
from trajstore.spaces import tree

__all__ = ["PreviewResult", "write_preview", "contact_sheet", "to_rgb", "write_side_by_side", "LABEL_HEIGHT",
           "SHEET_COLUMNS", "DEFAULT_FPS", "DEFAULT_FRAMES", "READ_BATCH", "SUFFIXES"]

#: Frame rate of an MP4 preview when neither the cameras nor the buffer declare one (Hz).
DEFAULT_FPS = 30.0
SUFFIXES = (".png", ".mp4")

Progress = Callable[[int], None]


@dataclass
class PreviewResult:
    """What :func:`write_preview` wrote.

    Attributes:
        frames: frames per camera row of the sheet, or frames of the video.
        size: ``(width, height)`` in pixels.
        steps: the sheet's steps (counted from the episode's first step); every step for a video.
        plots: the leaves plotted; ``skipped``: leaf -> why it is not; ``notes``: lines printed under the
            plots (and by the CLI), e.g. the extra that brings plots.
        tiles_at: camera -> top-left pixel of its first tile on the sheet (PNG only).
    """

    path: str
    episode: int  # Episode.id
    cameras: list[str]
    frames: int
    size: tuple[int, int]
    fps: float | None = None  # video only
    fps_source: str | None = None
    steps: list[int] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tiles_at: dict[str, tuple[int, int]] = field(default_factory=dict)

    def line(self) -> str:
        what = (f"{self.frames} frames at {self.fps:g} fps ({self.fps_source})" if self.fps is not None
                else f"{self.frames} frames")
        text = (f"{self.path}: episode {self.episode}, {', '.join(self.cameras)}, {what}, "
                f"{self.size[0]}x{self.size[1]} pixels")
        if self.plots:
            text += f"; plots of {', '.join(self.plots)}"
        return "\n".join([text] + self.notes)


def write_preview(path: str | os.PathLike, episode: int, out: str | os.PathLike, *, camera: str | None = None,
                  frames: int | None = None, every: int | None = None, plots: bool = True,
                  progress: Progress | None = None) -> PreviewResult:
    """Write a preview of episode ``episode`` (an ``Episode.id``) of the buffer at ``path`` to ``out``
    (``.png`` or ``.mp4``; what each holds: the module docstring).

    Args:
        camera: show only this camera leaf (default: every camera of the buffer).
        frames: frames per camera of a ``.png`` sheet, evenly spaced (default 16; every step of a shorter
            episode); ``every``: every ``every``-th step instead. Not both; neither applies to ``.mp4``.
        plots: draw the plots of the low-dim leaves (needs matplotlib; without it the preview is written
            without them and a note says ``pip install 'trajstore[preview]'``).
        progress: called with a number of steps after each batch of frames read.

    Raises:
        ValueError: ``out`` ends in neither ``.png`` nor ``.mp4``; ``frames``/``every`` not an int >= 1,
            both given, or given for ``.mp4``; the buffer has no camera leaf; ``camera`` is not one of
            them (names the cameras); the episode has no steps.
        UnknownLeafError: (a ``ValueError``) ``camera`` is no leaf of the buffer at all.
        IndexError: no held episode has that id (names the held ids).
        FormatError: ``path`` is not a buffer folder.
        ImportError: ``.mp4`` without PyAV (``pip install 'trajstore[video]'``).
        Nothing is written when one of these is raised.
    """
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{out}: unknown preview format {out.suffix or '(no suffix)'!r}; use .png (a contact "
                         "sheet) or .mp4 (a video)")
    choose_steps(1, frames, every)  # checks frames and every before anything is read
    if suffix == ".mp4" and (frames is not None or every is not None):
        raise ValueError("frames and every choose the frames of a .png sheet; an .mp4 preview shows every step")
    with ReplayBuffer.load_from(path, read_only=True) as rb:
        cameras = _cameras(rb, path, camera)
        if suffix == ".png":
            return _sheet(rb, episode, out, cameras, frames, every, plots, progress)
        return _video(rb, episode, out, cameras, plots, progress)


def _cameras(rb: ReplayBuffer, path: Any, camera: str | None) -> list[str]:
    cameras = camera_keys(rb)
    sep = getattr(rb.storage, "nested_separator", "/")
    if not cameras:
        leaves = [tree.path_name(p, sep) for p in tree.leaf_paths(rb.space)]
        raise ValueError(f"{path} has no camera leaf to preview (leaves of an image or video storage, or tagged "
                         f"kind=image/depth); its leaves: {leaves}")
    if camera is None:
        return cameras
    if camera not in cameras:
        leaves = {tree.path_name(p, sep) for p in tree.leaf_paths(rb.space)}
        error = ValueError if camera in leaves else UnknownLeafError  # UnknownLeafError: no such leaf at all
        raise error(f"{path} has no camera {camera!r}; its cameras: {cameras}")
    return [camera]


def _plot_notes(series: dict, skipped: dict[str, str], plots: bool) -> tuple[bool, list[str]]:
    """``(draw plots?, notes)``."""
    notes = []
    if skipped:
        notes.append("not plotted: " + ", ".join(f"{k} ({why})" for k, why in skipped.items()))
    if not plots:
        return False, notes
    if not series:
        return False, notes + ["no low-dim leaf to plot"]
    try:
        from trajstore.ops.preview_plots import load_matplotlib

        load_matplotlib()
    except ImportError:
        return False, notes + [f"no plots: {EXTRA_NOTE}"]
    return True, notes


def _sheet(rb: ReplayBuffer, episode: int, out: Path, cameras: list[str], frames: int | None, every: int | None,
           plots: bool, progress: Progress | None) -> PreviewResult:
    ep = gather(rb, episode, cameras, frames=frames, every=every, series=plots, progress=progress)
    draw, notes = _plot_notes(ep.series, ep.skipped, plots)
    times = None if ep.times is None else list(ep.times)
    blocks = {cam: camera_block(cam, ep.frames[cam], ep.steps, times) for cam in cameras}
    width = sheet_width(list(blocks.values()))
    plot = plot_series(ep.series, width=width, marks=list(ep.steps), units=ep.units).pixels if draw else None
    sheet = compose(_caption(ep), blocks, plot, notes)
    _save_atomic(out, lambda tmp: sheet.image.save(tmp, format="PNG"))
    return PreviewResult(str(out), ep.id, cameras, len(ep.steps), sheet.image.size, steps=ep.steps.tolist(),
                         plots=list(ep.series) if draw else [], skipped=ep.skipped, notes=notes,
                         tiles_at=sheet.tiles_at)


def _video(rb: ReplayBuffer, episode: int, out: Path, cameras: list[str], plots: bool,
           progress: Progress | None) -> PreviewResult:
    ep = gather(rb, episode, cameras, steps="all", series=plots, progress=progress)
    fps, source = ep.fps, ep.fps_source
    if fps is None:
        fps, source = DEFAULT_FPS, f"default: {source}"
    draw, notes = _plot_notes(ep.series, ep.skipped, plots)
    plot: PlotImage | None = None
    if draw:
        video_h = max(f.shape[1] for f in ep.frames.values())
        width, height, columns = panel_size(video_h, len(ep.series))
        plot = plot_series(ep.series, width=width, height=height, columns=columns, units=ep.units)
    size = write_side_by_side(out, [ep.frames[c] for c in cameras], fps, plot)
    return PreviewResult(str(out), ep.id, cameras, len(ep), size, fps, source, steps=ep.steps.tolist(),
                         plots=list(ep.series) if draw else [], skipped=ep.skipped, notes=notes)


def _caption(ep: Any) -> str:
    duration = None if ep.fps is None else len(ep) / ep.fps
    return caption_text(ep.id, len(ep), ep.data, duration_s=duration,
                        time_source=None if ep.fps is None else f"at {ep.fps:g} fps, {ep.fps_source}",
                        interrupted=ep.interrupted, overwritten=ep.overwritten)


def _save_atomic(out: Path, save: Callable[[Path], None]) -> None:
    """Write through a temp file next to ``out`` and rename: a failed write leaves no half file."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        save(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
