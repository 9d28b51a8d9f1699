"""Fixed-bin histograms, one per stat cell (an element, a channel or the whole leaf), whose range
grows by powers of two: the quantile sketch of :mod:`~trajstore.replay_buffer.leaf_stats`. NumPy
only, no I/O.

Cell ``e`` has ``bins`` bins of width ``width[e]`` (a power of two) starting at ``low[e]`` (a
multiple of the width). The first values get the narrowest such width whose bins hold them all. A
value outside the range widens it to the narrowest width ``width * 2**k`` whose bins, aligned on
multiples of it, hold the bins already counted and the new values; every old bin lies inside one
new bin (both are aligned on powers of two), so the counts stay exact: every value is counted in
the bin that holds it.

Memory: ``cells x bins`` counts per leaf, at most :data:`MAX_LEAF_BINS` (65,536) whatever the
leaf's shape: :func:`bins_for` gives a leaf with many cells fewer, wider bins (at least
:data:`MIN_BINS`; the caller keeps the cells at most ``MAX_LEAF_BINS // MIN_BINS``).

Integer leaves use integer widths; 1-byte integers (``uint8`` frames) get 256 bins of width 1 from
the dtype's minimum, which never grow: one bin per value, so their quantiles are exact.

Error bound (see :meth:`Histograms.order_statistic`): an order statistic read from the counts lies
in the same bin as the true one, so it is off by less than ``width`` (by at most ``width - 1`` for
integers, 0 with width 1), and never by more than ``max - min`` (it is clamped to the observed
range). Quantiles interpolate two order statistics as ``np.quantile`` does (``method="linear"``),
so they keep that bound (plus float64 rounding when binning). Because a width is only ever the
narrowest that holds the values, ``width <= 2 * (max - min) / (bins - 2)`` once the values span
more than the first width: with 1024 bins a quantile is within 0.2 % of the observed range.
"""

from __future__ import annotations

from typing import Any

import numpy as np
# Imported here, not at the first frame counted: importing Pillow takes tens of ms with the GIL held,
# which would stall the recording loop on the writer thread's first block.
from PIL import Image

#: Bins per element, and the cap on bins per leaf (elements x bins); a leaf with many elements gets
#: fewer, wider bins (at least MIN_BINS), which its ``quantile_error`` reports.
BINS = 1024
MAX_LEAF_BINS = 1 << 16
MIN_BINS = 16
#: Doublings after which a value is clamped into the range instead (float64 spans ~2100 octaves).
_MAX_DOUBLINGS = 2200
_MAX_WIDTH = 2.0 ** 1023


def bins_for(elements: int, dtype: np.dtype) -> int:
    """Bins per element for a leaf of ``elements`` elements (channels) of ``dtype`` (a power of two)."""
    if dtype.kind in "iu" and dtype.itemsize == 1 and elements * 256 <= MAX_LEAF_BINS:
        return 256
    b = BINS
    while b > MIN_BINS and elements * b > MAX_LEAF_BINS:
        b //= 2
    return b


# Pillow modes whose bands are the columns of an (M, E) uint8 array, E = 1..4.
_PIL_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
# One row of at most 2**24 pixels per histogram call: Pillow refuses (MemoryError) a single row of ~10**8
# pixels, which one extend of 300 480x640 frames makes.
_PIL_MAX_WIDTH = 1 << 24


def _uint8_counts(x: np.ndarray) -> np.ndarray:
    """Counts of each byte value per column of ``x`` (uint8, shape ``(M, E)``), shape ``(E, 256)`` int64.

    The write path counts every camera frame, so this is on the clock: Pillow's per-band histogram
    reads the bytes as they are (~35 us per 128x128 RGB frame here), where ``np.bincount`` first
    widens every byte to a 64-bit index (~115 us). Other widths: one bincount per column.
    """
    elements = x.shape[1]
    mode = _PIL_MODES.get(elements)
    if mode is None or x.shape[0] == 0:
        return np.stack([np.bincount(x[:, e], minlength=256) for e in range(elements)]).astype(np.int64)
    counts = np.zeros((elements, 256), np.int64)
    for start in range(0, x.shape[0], _PIL_MAX_WIDTH):
        part = np.ascontiguousarray(x[start:start + _PIL_MAX_WIDTH])
        im = Image.frombuffer(mode, (part.shape[0], 1), part, "raw", mode, 0, 1)
        counts += np.asarray(im.histogram(), np.int64).reshape(elements, 256)
    return counts


class Histograms:
    """``counts`` of shape ``(E, bins)`` (int64), ``low`` and ``width`` of shape ``(E,)`` (float64).

    ``add`` takes finite values only: the caller masks NaN and inf out (``valid``).
    """

    def __init__(self, elements: int, dtype: np.dtype):
        self.dtype = np.dtype(dtype)
        self.integer = self.dtype.kind in "iu"
        self.bins = bins_for(elements, self.dtype)
        self.counts = np.zeros((elements, self.bins), np.int64)
        self.low = np.zeros(elements)
        self.width = np.zeros(elements)  # 0: no value seen yet (range set by the first values)
        # 1-byte integers: one bin per value, fixed for good.
        self.unit = self.integer and self.dtype.itemsize == 1 and self.bins == 256
        if self.unit:
            self.low[:] = np.iinfo(self.dtype).min
            self.width[:] = 1.0

    def add(self, x: np.ndarray, valid: np.ndarray | None = None,
            bounds: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Count the rows of ``x`` (shape ``(M, E)``; ``valid``: a bool mask of the same shape or None;
        ``bounds``: the per-cell min and max of the valid values if the caller has them, NaN where none).

        Returns the counts of this batch alone, shape ``(E, bins)`` (the moments of 1-byte integer
        leaves are computed from them).
        """
        elements = self.counts.shape[0]
        if self.unit and self.dtype == np.uint8 and valid is None and elements <= 16:
            batch = _uint8_counts(x)
            self.counts += batch
            return batch
        if self.unit:
            idx = x.astype(np.intp) - int(self.low[0])
        else:
            xf = x.astype(np.float64, copy=False)
            self._cover(xf, valid, bounds)
            # (x - low) / width as a product: widths are powers of two, so 1 / width is exact; in place
            inverse = np.divide(1.0, self.width, out=np.zeros_like(self.width), where=self.width > 0)
            pos = np.subtract(xf, self.low)
            with np.errstate(invalid="ignore"):
                np.multiply(pos, inverse, out=pos)
            if valid is not None:  # NaN and inf are masked out below; give them a bin meanwhile
                np.nan_to_num(pos, copy=False, posinf=0.0, neginf=0.0)
            np.clip(pos, 0, self.bins - 1, out=pos)
            idx = pos.astype(np.intp)  # truncation: the floor of these values, none below 0
        idx += np.arange(elements, dtype=np.intp) * self.bins
        if valid is not None:
            idx = np.where(valid, idx, elements * self.bins)
        batch = np.bincount(idx.ravel(), minlength=elements * self.bins + 1)[:elements * self.bins]
        batch = batch.reshape(elements, self.bins).astype(np.int64, copy=False)
        self.counts += batch
        return batch

    def _cover(self, x: np.ndarray, valid: np.ndarray | None,
               bounds: tuple[np.ndarray, np.ndarray] | None = None, min_width: np.ndarray | None = None) -> None:
        """Widen each cell's range, if needed, to the narrowest that holds its counted bins and the batch
        (``min_width``, float64 ``(E,)`` powers of two or 0: and whose width is at least that)."""
        if bounds is not None:
            lo, hi = bounds
        elif valid is None:
            lo, hi = x.min(axis=0), x.max(axis=0)
        else:
            lo = np.where(valid, x, np.inf).min(axis=0)
            hi = np.where(valid, x, -np.inf).max(axis=0)
        seen = lo <= hi
        fresh = seen & (self.width == 0)
        with np.errstate(over="ignore", invalid="ignore"):  # a range near float64's largest values
            grow = fresh | (seen & ((lo < self.low) | (hi >= self.low + self.bins * self.width)))
        if min_width is not None:
            grow |= seen & (self.width < min_width)
        if not grow.any():
            return
        rows = np.flatnonzero(grow)
        occupied = self.counts[rows] > 0
        any_old = occupied.any(axis=1)
        first_bin = np.where(any_old, occupied.argmax(axis=1), 0)
        last_bin = np.where(any_old, self.bins - 1 - occupied[:, ::-1].argmax(axis=1), 0)
        old_low, old_width = self.low[rows], self.width[rows]
        # the span to hold: the new values and the starts of the counted bins
        need_lo = np.where(any_old, np.minimum(lo[rows], old_low + first_bin * old_width), lo[rows])
        need_hi = np.where(any_old, np.maximum(hi[rows], old_low + last_bin * old_width), hi[rows])
        scale = np.maximum(np.abs(need_lo), np.abs(need_hi))
        floor = np.where(scale > 0, 2.0 ** np.floor(np.log2(np.where(scale > 0, scale, 1.0) * 2.0 ** -30)), 2.0 ** -30)
        if self.integer:
            floor = np.maximum(floor, 1.0)
        width = np.where(old_width > 0, old_width, floor)
        if min_width is not None:
            width = np.maximum(width, min_width[rows])
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            guess = (need_hi - need_lo) / self.bins
            guess = np.where(guess > 0, 2.0 ** np.floor(np.log2(np.where(guess > 0, guess, 1.0))), 0.0)
        # a power of two at most the answer, so the doublings below are few (the largest finite one at most)
        width = np.minimum(np.maximum(width, guess), _MAX_WIDTH)
        for _ in range(_MAX_DOUBLINGS):
            with np.errstate(over="ignore", invalid="ignore"):
                low = np.floor(need_lo / width) * width
                short = ~(low + self.bins * width > need_hi)
            if not short.any():
                break
            if not (short & (width < _MAX_WIDTH)).any():
                break  # values spanning more than float64 holds: the widest bins, the extremes clipped
            width = np.where(short, np.minimum(width * 2, _MAX_WIDTH), width)
        new_counts = np.zeros((len(rows), self.bins), np.int64)
        if any_old.any():
            k = np.flatnonzero(any_old)
            starts = old_low[k, None] + np.arange(self.bins) * old_width[k, None]
            with np.errstate(invalid="ignore"):
                target = np.floor((starts - low[k, None]) / width[k, None])
            target = np.clip(np.nan_to_num(target), 0, self.bins - 1).astype(np.intp)
            flat = (target + np.arange(len(k))[:, None] * self.bins).ravel()
            moved = np.bincount(flat, weights=self.counts[rows[k]].ravel().astype(np.float64),
                                minlength=len(k) * self.bins)
            new_counts[k] = np.rint(moved).astype(np.int64).reshape(len(k), self.bins)
        self.counts[rows] = new_counts
        self.low[rows], self.width[rows] = low, width

    def merge(self, other: "Histograms") -> None:
        """Count ``other``'s values too (a histogram of the same cells and dtype, of other steps).

        The range widens (as :meth:`add` widens it) to hold both histograms' counted bins, with a width at
        least ``other``'s: both are aligned on powers of two, so each of ``other``'s bins lies inside one
        bin of the result and the counts stay exact (the quantile bound is the result's width).

        Raises:
            ValueError: another number of cells or bins.
        """
        if other.counts.shape != self.counts.shape:
            raise ValueError(f"cannot merge a histogram of {other.counts.shape} counts into one of {self.counts.shape}")
        if self.unit or not other.counts.any():
            self.counts += other.counts  # 1-byte integers: the same fixed bins
            return
        occupied = other.counts > 0
        seen = occupied.any(axis=1)
        first = occupied.argmax(axis=1)
        last = other.bins - 1 - occupied[:, ::-1].argmax(axis=1)
        lo = np.where(seen, other.low + first * other.width, np.inf)
        hi = np.where(seen, other.low + last * other.width, -np.inf)
        self._cover(np.zeros((0, len(lo))), None, (lo, hi), np.where(seen, other.width, 0.0))
        rows = np.flatnonzero(seen)
        starts = other.low[rows, None] + np.arange(other.bins) * other.width[rows, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            target = np.floor((starts - self.low[rows, None]) / self.width[rows, None])
        target = np.clip(np.nan_to_num(target), 0, self.bins - 1).astype(np.intp)
        flat = (target + np.arange(len(rows))[:, None] * self.bins).ravel()
        moved = np.bincount(flat, weights=other.counts[rows].ravel().astype(np.float64), minlength=len(rows) * self.bins)
        self.counts[rows] += np.rint(moved).astype(np.int64).reshape(len(rows), self.bins)

    def order_statistic(self, j: np.ndarray, vmin: np.ndarray, vmax: np.ndarray) -> np.ndarray:
        """Estimates of the ``j[e]``-th smallest value (0-based) of each element, shape ``(E,)``.

        Within its bin the value is placed by its rank among the bin's counts, then clamped to the
        element's ``[vmin, vmax]``. Error: less than ``width`` (integers: at most ``width - 1``).
        """
        cum = np.cumsum(self.counts, axis=1)
        b = np.minimum((cum <= j[:, None]).sum(axis=1), self.bins - 1)
        rows = np.arange(len(b))
        c = np.maximum(self.counts[rows, b], 1)
        r = j - (cum[rows, b] - self.counts[rows, b])
        frac = (r + 0.5) / c
        est = self.low + b * self.width
        est = est + (np.floor(self.width * frac) if self.integer else self.width * frac)
        return np.clip(est, vmin, vmax)

    def quantile_error(self) -> np.ndarray:
        """The bound on the quantiles' error per element, shape ``(E,)`` (0 for one integer per bin)."""
        return self.width - 1 if self.integer else self.width.copy()

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        flat = self.counts.ravel()
        nz = np.flatnonzero(flat)
        return {"bins": self.bins, "low": self.low.tolist(), "width": self.width.tolist(),
                "nonzero": nz.tolist(), "counts": flat[nz].tolist()}

    @classmethod
    def from_json(cls, data: dict[str, Any], elements: int, dtype: np.dtype) -> "Histograms":
        h = cls(elements, dtype)
        if int(data["bins"]) != h.bins or len(data["low"]) != elements:
            raise ValueError(f"histogram of {data['bins']} bins x {len(data['low'])} elements, expected "
                             f"{h.bins} x {elements}")
        h.low[:] = data["low"]
        h.width[:] = data["width"]
        flat = h.counts.ravel()
        flat[np.asarray(data["nonzero"], np.intp)] = np.asarray(data["counts"], np.int64)
        return h

    @classmethod
    def joined(cls, parts: list["Histograms"]) -> "Histograms":
        """The histograms of ``parts`` (same ``bins``, none ``unit``) side by side, as one of their elements."""
        h = Histograms.__new__(Histograms)
        h.__dict__.update(parts[0].__dict__)
        h.counts = np.concatenate([p.counts for p in parts])
        h.low = np.concatenate([p.low for p in parts])
        h.width = np.concatenate([p.width for p in parts])
        return h

    def part(self, start: int, stop: int, template: "Histograms") -> "Histograms":
        """A copy of elements ``[start, stop)`` of a :meth:`joined` histogram, typed like ``template``."""
        h = Histograms.__new__(Histograms)
        h.__dict__.update(template.__dict__)
        h.counts, h.low, h.width = (a[start:stop].copy() for a in (self.counts, self.low, self.width))
        return h

    def copy(self) -> "Histograms":
        h = Histograms.__new__(Histograms)
        h.__dict__.update(self.__dict__)
        h.counts, h.low, h.width = self.counts.copy(), self.low.copy(), self.width.copy()
        return h
