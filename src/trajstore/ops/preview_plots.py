"""Plots of an episode's low-dim leaves for a preview (matplotlib, Agg canvas, no pyplot state).

One subplot per leaf, titled with the leaf's name (and its ``units`` metadata), one line per dimension
(legend ``[0]``, ``[1]``, ... when there are several), x axis = step in the episode. The figure is
rendered once to an RGB array (:class:`PlotImage`); a video draws its moving cursor into a copy of
that array with numpy (:meth:`PlotImage.with_cursor`), so no frame re-renders the figure.

matplotlib is optional: ``pip install 'trajstore[preview]'``; :func:`load_matplotlib` raises
``ImportError`` saying so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

#: Pixels per row of subplots.
PLOT_ROW_HEIGHT = 220
#: A subplot is at least this wide (pixels); the number of columns follows from the width.
PLOT_MIN_COLUMN_WIDTH = 320
#: Steps marked with light vertical lines (the frames of a sheet) when there are at most this many.
MAX_MARKS = 32
DPI = 100
CURSOR_RGB = (220, 30, 30)
EXTRA_NOTE = "plots need matplotlib: pip install 'trajstore[preview]'"


def load_matplotlib():
    """``(Figure, FigureCanvasAgg)`` classes of matplotlib (Agg: no display, no global state).

    Raises:
        ImportError: matplotlib is not installed (the message names the ``preview`` extra).
    """
    try:
        import matplotlib  # noqa: F401  (first: a blocked matplotlib fails here, not in a cached submodule)
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(EXTRA_NOTE) from exc
    return Figure, FigureCanvasAgg


@dataclass
class AxesBox:
    """Where one subplot's data area is in a :class:`PlotImage` (pixels, rows from the top) and the
    steps its x axis spans."""

    left: float
    right: float
    top: int
    bottom: int
    x_min: float
    x_max: float

    def x_of(self, step: float) -> int:
        """Pixel column of ``step``."""
        return int(round(self.left + (step - self.x_min) / (self.x_max - self.x_min) * (self.right - self.left)))


@dataclass
class PlotImage:
    """A rendered figure: ``pixels`` uint8 ``(H, W, 3)`` and the data area of each subplot."""

    pixels: np.ndarray
    axes: list[AxesBox]

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` in pixels."""
        return self.pixels.shape[1], self.pixels.shape[0]

    def with_cursor(self, step: float, width: int = 2) -> np.ndarray:
        """A copy of :attr:`pixels` with a vertical :data:`CURSOR_RGB` line at ``step`` in every subplot."""
        out = self.pixels.copy()
        for box in self.axes:
            x = box.x_of(step)
            out[box.top:box.bottom, max(0, x - width // 2):x - width // 2 + width] = CURSOR_RGB
        return out


def plot_series(series: Mapping[str, np.ndarray], *, width: int, columns: int | None = None,
                row_height: int = PLOT_ROW_HEIGHT, height: int | None = None, marks: Sequence[int] = (),
                units: Mapping[str, str] | None = None) -> PlotImage:
    """Render ``series`` (leaf name -> float ``(n, D)``, all of the same ``n`` steps) as one subplot per leaf.

    Args:
        width: figure width in pixels.
        columns: subplots per row (default: as many of :data:`PLOT_MIN_COLUMN_WIDTH` as fit, at most the
            number of leaves).
        row_height, height: pixels per row of subplots, or the whole figure's height (wins when given).
        marks: steps drawn as light vertical lines (at most :data:`MAX_MARKS`, else none).
        units: leaf -> units shown in its title.

    Raises:
        ImportError: no matplotlib (:func:`load_matplotlib`); ValueError: ``series`` is empty.
    """
    if not series:
        raise ValueError("no low-dim leaf to plot")
    Figure, FigureCanvasAgg = load_matplotlib()
    from matplotlib.ticker import MaxNLocator
    names = list(series)
    cols = columns or max(1, min(len(names), width // PLOT_MIN_COLUMN_WIDTH))
    rows = math.ceil(len(names) / cols)
    total_h = height if height is not None else rows * row_height
    fig = Figure(figsize=(width / DPI, total_h / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    units = units or {}
    plotted = []
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, i + 1)
        values = np.asarray(series[name], np.float64)
        n = len(values)
        x = np.arange(n)
        if len(marks) <= MAX_MARKS:
            for s in marks:
                ax.axvline(s, color="0.85", lw=0.8, zorder=0)
        for d in range(values.shape[1]):
            ax.plot(x, values[:, d], lw=1.1, label=f"[{d}]")
        ax.set_xlim(0, n - 1) if n > 1 else ax.set_xlim(-0.5, 0.5)
        ax.set_title(name + (f" [{units[name]}]" if name in units else ""), fontsize=9)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, lw=0.4, alpha=0.5)
        if values.shape[1] > 1:
            ax.legend(fontsize=6, ncol=min(values.shape[1], 4), loc="best", framealpha=0.6)
        if i >= len(names) - cols:
            ax.set_xlabel("step", fontsize=8)
        plotted.append(ax)
    fig.canvas.draw()
    pixels = np.array(fig.canvas.buffer_rgba())[..., :3]
    h = pixels.shape[0]
    boxes = []
    for ax in plotted:
        bb = ax.get_window_extent()
        x0, x1 = ax.get_xlim()
        boxes.append(AxesBox(bb.x0, bb.x1, max(0, int(round(h - bb.y1))), min(h, int(round(h - bb.y0))), x0, x1))
    return PlotImage(np.ascontiguousarray(pixels), boxes)
