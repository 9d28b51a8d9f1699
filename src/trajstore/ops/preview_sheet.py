"""The PNG contact sheet of a preview (Pillow): caption, one block of frames per camera, plots, notes.

Layout, top to bottom, all blocks left-aligned on a white sheet ``width`` pixels wide, where
``width = max(MIN_WIDTH, widest camera block)``:

1. the caption (:func:`caption_text`, wrapped to the width): ``CAPTION_PAD + lines * CAPTION_LINE +
   CAPTION_PAD`` pixels;
2. per camera a block (:func:`camera_block`): a ``HEADER_HEIGHT`` strip with the camera's name, then
   ``ceil(K / columns)`` rows of ``columns = min(K, MAX_ROW_TILES)`` tiles; a tile is the frame
   (``W x H``, scaled by :func:`tile_scale`: up by an integer factor, nearest neighbour, when narrower
   than ``MIN_TILE_WIDTH``; down by an integer factor (box filter) when its long side exceeds
   ``MAX_TILE_SIDE``) over a ``LABEL_HEIGHT`` strip with its step and time (a block is at least as
   wide as its header's text);
3. the plots (:mod:`trajstore.ops.preview_plots`), ``width`` wide, when there are any;
4. notes (skipped leaves, a missing extra), ``NOTE_LINE`` pixels each plus ``CAPTION_PAD``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np

LABEL_HEIGHT = 28
HEADER_HEIGHT = 18
CAPTION_LINE = 18
CAPTION_PAD = 6
NOTE_LINE = 16
MIN_WIDTH = 640
#: Tiles per row of a camera block (a default sheet of 16 frames is one row per camera).
MAX_ROW_TILES = 16
#: Frames narrower than this are shown scaled up (pixels); frames longer than ``MAX_TILE_SIDE`` scaled down.
MIN_TILE_WIDTH = 64
MAX_TILE_SIDE = 256
#: Columns of :func:`contact_sheet` when called on its own.
SHEET_COLUMNS = 8
CAPTION_FONT, HEADER_FONT, LABEL_FONT, NOTE_FONT = 14, 12, 11, 12


@lru_cache(maxsize=None)
def font(size: int) -> Any:
    """Pillow's built-in font at ``size`` pixels (a bitmap font, size ignored, without FreeType)."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):
        return ImageFont.load_default()


def label_lines(step: int, seconds: float | None) -> list[str]:
    """Text of a tile's label: ``["step 50", "5.00 s"]`` (no time line when ``seconds`` is ``None``)."""
    return [f"step {int(step)}"] + ([] if seconds is None else [f"{seconds:.2f} s"])


def caption_text(episode_id: int, length: int, data: Mapping[str, Any], *, duration_s: float | None = None,
                 time_source: str | None = None, interrupted: bool = False, overwritten: bool = False) -> str:
    """The caption of a preview: a line for the episode, then its JSON data (``task`` first), e.g.

    ``episode 3: 300 steps, 30.00 s (10 fps (metadata of observation/pixels))`` /
    ``task: push the T · success: true · seed: 3``.
    """
    head = f"episode {episode_id}: {length} steps"
    if duration_s is not None:
        head += f", {duration_s:.2f} s" + (f" ({time_source})" if time_source else "")
    if interrupted:
        head += ", interrupted"
    if overwritten:
        head += ", oldest steps overwritten (steps counted from the first held one)"
    keys = sorted(data, key=lambda k: (k != "task", k != "success", list(data).index(k)))
    items = [f"{k}: {v if isinstance(v, str) else json.dumps(v, default=str)}" for k, v in
             ((k, data[k]) for k in keys)]
    return head + ("\n" + " · ".join(items) if items else "\n(no episode data)")


def wrap(text: str, width: int, size: int) -> list[str]:
    """``text`` broken into lines (at spaces) no wider than ``width`` pixels in :func:`font` ``(size)``."""
    f = font(size)
    lines = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            trial = word if not line else f"{line} {word}"
            if line and f.getlength(trial) > width:
                lines.append(line)
                line = word
            else:
                line = trial
        lines.append(line)
    return lines


def contact_sheet(frames: np.ndarray, steps: Sequence[int], columns: int = SHEET_COLUMNS,
                  times: Sequence[float] | None = None) -> Any:
    """A ``PIL.Image`` grid of ``frames`` ``(K, H, W, 3)`` uint8 in ``min(K, columns)`` columns, tile ``i``
    the frame over a ``LABEL_HEIGHT`` strip labelled :func:`label_lines` ``(steps[i], times[i])``:
    ``min(K, columns) * W`` by ``ceil(K / columns) * (H + LABEL_HEIGHT)`` pixels."""
    from PIL import Image, ImageDraw

    n, h, w = len(frames), frames.shape[1], frames.shape[2]
    cols = max(1, min(n, columns))
    rows = max(1, math.ceil(n / cols))
    sheet = Image.new("RGB", (cols * w, rows * (h + LABEL_HEIGHT)), "white")
    for i, step in enumerate(steps[:n]):
        x, y = (i % cols) * w, (i // cols) * (h + LABEL_HEIGHT)
        sheet.paste(Image.fromarray(np.ascontiguousarray(frames[i])), (x, y))
        strip = Image.new("RGB", (w, LABEL_HEIGHT), (40, 40, 40))  # drawn apart: a long label is clipped
        draw = ImageDraw.Draw(strip)
        for j, text in enumerate(label_lines(step, None if times is None else times[i])):
            draw.text((2, 1 + j * 13), text, fill="white", font=font(LABEL_FONT))
        sheet.paste(strip, (x, y + h))
    return sheet


def tile_scale(height: int, width: int) -> tuple[int, int]:
    """``(up, down)`` integer factors a ``height x width`` frame is shown at on a sheet (one of them is 1)."""
    if width < MIN_TILE_WIDTH:
        return -(-MIN_TILE_WIDTH // width), 1
    return 1, max(1, -(-max(height, width) // MAX_TILE_SIDE))


def scaled_for_display(frames: np.ndarray) -> np.ndarray:
    """``frames`` ``(K, H, W, 3)`` uint8 at the size :func:`tile_scale` chooses."""
    from PIL import Image

    up, down = tile_scale(frames.shape[1], frames.shape[2])
    if up > 1:
        return frames.repeat(up, axis=1).repeat(up, axis=2)
    if down > 1:
        return np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(f)).reduce(down)) for f in frames])
    return frames


def camera_block(name: str, frames: np.ndarray, steps: Sequence[int], times: Sequence[float] | None = None,
                 columns: int = MAX_ROW_TILES) -> Any:
    """A ``HEADER_HEIGHT`` strip naming the camera over :func:`contact_sheet` of its frames, scaled as
    :func:`tile_scale` says."""
    from PIL import Image, ImageDraw

    h, w = frames.shape[1:3]
    up, down = tile_scale(h, w)
    grid = contact_sheet(scaled_for_display(frames), steps, columns, times)
    shown = f", shown x{up}" if up > 1 else (f", shown 1/{down}" if down > 1 else "")
    title = f"{name}  ({w}x{h}{shown})"
    width = max(grid.width, int(font(HEADER_FONT).getlength(title)) + 4)  # a short row still shows its name
    block = Image.new("RGB", (width, HEADER_HEIGHT + grid.height), "white")
    ImageDraw.Draw(block).text((2, 2), title, fill="black", font=font(HEADER_FONT))
    block.paste(grid, (0, HEADER_HEIGHT))
    return block


@dataclass
class Sheet:
    """A composed sheet: the ``PIL.Image`` and the top-left pixel of each camera block's first tile."""

    image: Any
    tiles_at: dict[str, tuple[int, int]] = field(default_factory=dict)


def sheet_width(blocks: Sequence[Any]) -> int:
    """Width of the sheet holding ``blocks`` (``PIL.Image`` camera blocks), see the module docstring."""
    return max([MIN_WIDTH] + [b.width for b in blocks])


def compose(caption: str, blocks: Mapping[str, Any], plot: np.ndarray | None = None,
            notes: Sequence[str] = ()) -> Sheet:
    """Stack the caption, the camera ``blocks`` (name -> :func:`camera_block`), the ``plot`` pixels
    (uint8 ``(Hp, Wp, 3)``) and ``notes`` into one sheet (layout: the module docstring)."""
    from PIL import Image, ImageDraw

    width = sheet_width(list(blocks.values()))
    lines = wrap(caption, width - 2 * CAPTION_PAD, CAPTION_FONT)
    note_lines = [line for note in notes for line in wrap(note, width - 2 * CAPTION_PAD, NOTE_FONT)]
    caption_h = 2 * CAPTION_PAD + len(lines) * CAPTION_LINE
    plot_h = 0 if plot is None else plot.shape[0]
    notes_h = len(note_lines) * NOTE_LINE + (CAPTION_PAD if note_lines else 0)
    height = caption_h + sum(b.height for b in blocks.values()) + plot_h + notes_h
    sheet = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(sheet)
    for i, line in enumerate(lines):
        draw.text((CAPTION_PAD, CAPTION_PAD + i * CAPTION_LINE), line, fill="black", font=font(CAPTION_FONT))
    y = caption_h
    tiles_at = {}
    for name, block in blocks.items():
        sheet.paste(block, (0, y))
        tiles_at[name] = (0, y + HEADER_HEIGHT)
        y += block.height
    if plot is not None:
        sheet.paste(Image.fromarray(np.ascontiguousarray(plot)), (0, y))
        y += plot_h
    for i, line in enumerate(note_lines):
        draw.text((CAPTION_PAD, y + i * NOTE_LINE), line, fill=(90, 90, 90), font=font(NOTE_FONT))
    return Sheet(sheet, tiles_at)


def caption_height(caption: str, width: int) -> int:
    """Pixels the caption takes on a sheet ``width`` wide."""
    return 2 * CAPTION_PAD + len(wrap(caption, width - 2 * CAPTION_PAD, CAPTION_FONT)) * CAPTION_LINE
