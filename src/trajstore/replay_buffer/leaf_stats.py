"""Normalisation statistics of one leaf: :class:`LeafStats` (the result) and :class:`LeafAccumulator`
(what is kept and updated as steps arrive). NumPy only, no I/O.

Which leaves: numeric ``BoxSpace`` leaves (integer and float dtypes). Text leaves and bool leaves
(``BinarySpace``) are skipped: they have no statistics.

Reduced over which axes (:func:`reduction`), so that what is kept and committed is bounded whatever
the leaf's shape (at most :data:`MAX_CELLS` stat cells, and ``cells x bins <= 65,536`` histogram
counts, per leaf):

1. ``metadata["stats"]`` when the leaf names one: ``"per_element"`` (at most :data:`MAX_CELLS`
   elements), ``"per_channel"`` or ``"whole"``;
2. an image-like leaf (metadata ``kind`` in :data:`IMAGE_KINDS`: ``"image"``, ``"depth"``) per
   channel, over ``N`` and the pixel axes. The channel axis is the ``C`` of its ``layout``
   (``"HWC"``: the last, ``(N, H, W, C)`` -> ``(C,)``; ``"CHW"``: the first); without a layout
   (or one of another length) the last axis of a leaf of 3 or more axes; a leaf with no channel axis (``(H, W)``, or a layout without ``C``) is one
   channel: scalar statistics, shape ``()``;
3. a leaf of at most :data:`PER_ELEMENT_MAX` (256) elements per element, over ``N``
   (``(N, *shape)`` -> ``shape``): joints, actions, rewards;
4. any other leaf as a whole: scalar statistics over ``N`` and every axis (shape ``()``).

NaN and inf values (possible when bounds checks are off or bounds infinite) are not counted, so
``count`` is per cell.

Moments are float64 (:mod:`~trajstore.replay_buffer._moments`): ``mean`` and ``std`` are those of
NumPy to float64 rounding. Quantiles come from fixed-bin histograms
(:mod:`~trajstore.replay_buffer._histogram`): within ``quantile_error`` of ``np.quantile`` (linear
method), which is the bin width, never more than ``max - min``, and at most
``2 (max - min) / (bins - 2)`` (``bins``: 1024 for up to 64 cells, then fewer down to 16 for 4096
cells); exact (0) for 1-byte integer leaves such as ``uint8`` frames.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.replay_buffer._histogram import MAX_LEAF_BINS, MIN_BINS, Histograms
from trajstore.replay_buffer._moments import Moments
from trajstore.spaces import Space

#: Field name -> probability of the quantiles every LeafStats carries.
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
#: Metadata ``kind`` values of image-like leaves (statistics per channel).
IMAGE_KINDS = ("image", "depth")
#: Leaves of at most this many elements get statistics per element (unless marked otherwise).
PER_ELEMENT_MAX = 256
#: Most stat cells (elements or channels) of one leaf: ``MAX_CELLS x MIN_BINS`` histogram counts.
MAX_CELLS = MAX_LEAF_BINS // MIN_BINS
#: Metadata key marking a leaf's reduction, and its values.
STATS_KEY = "stats"
#: Rows (values of each cell) counted at a time by :meth:`LeafAccumulator.add`: float64 temporaries
#: of 512 KiB per cell.
PIECE_ROWS = 1 << 16
PER_ELEMENT, PER_CHANNEL, WHOLE = "per_element", "per_channel", "whole"


@dataclass(frozen=True)
class LeafStats:
    """Statistics of one leaf over the steps held.

    Every array has shape ``shape`` (see :func:`reduction`): the leaf's shape (per element),
    ``(C,)`` (per channel: an image-like leaf, ``C`` its channel count), or ``()`` (one channel, or
    the whole leaf). ``count`` is int64 (values counted per cell: steps x pixels for an image
    channel); the others are float64 in the leaf's units (``std`` with ``ddof=0``, as ``np.std``).
    Where ``count`` is 0 they are NaN.

    Attributes:
        name: the leaf's path joined by ``"/"`` (``"observation/pixels"``).
        per_channel: True when reduced per channel (over ``N`` and the pixel axes), shape ``(C,)``.
        reduction: ``"per_element"``, ``"per_channel"`` or ``"whole"`` (one channel counts as whole).
        broadcast_shape: ``shape`` with 1s for the reduced leaf axes, so that an array of this shape
            broadcasts against values ``(..., *leaf shape)``: ``(C,)`` for HWC, ``(C, 1, 1)`` for CHW,
            ``()`` for a whole leaf, the leaf's shape per element.
        quantile_error: bound on ``|q - np.quantile(x, p)|`` of ``q01`` ... ``q99`` (0: exact): the
            bin width, at most ``max - min`` (see the module docstring).
    """

    name: str
    shape: tuple[int, ...]
    per_channel: bool
    reduction: str
    broadcast_shape: tuple[int, ...]
    count: np.ndarray
    min: np.ndarray
    max: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    q01: np.ndarray
    q10: np.ndarray
    q50: np.ndarray
    q90: np.ndarray
    q99: np.ndarray
    quantile_error: np.ndarray

    def to_json(self) -> dict[str, Any]:
        """JSON form: arrays as nested lists, NaN as ``None``."""
        out: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "per_channel": self.per_channel,
                               "reduction": self.reduction, "broadcast_shape": list(self.broadcast_shape)}
        for f in fields(self)[5:]:
            a = getattr(self, f.name)
            out[f.name] = a.tolist() if a.dtype.kind == "i" else _nan_to_none(a)
        return out


def _nan_to_none(a: np.ndarray) -> Any:
    return np.where(np.isnan(a), None, a.astype(object)).tolist() if a.ndim else (None if np.isnan(a) else float(a))


def has_stats(leaf: Space) -> bool:
    """True for numeric Box leaves (integer or float dtype); False for text and bool leaves."""
    return leaf.type_name == "box" and np.dtype(leaf.dtype).kind in "iuf"


def reduction(leaf: Space) -> tuple[str, int | None]:
    """How ``leaf``'s statistics are reduced (the rule of the module docstring): ``(PER_ELEMENT, None)``,
    ``(PER_CHANNEL, channel axis of the leaf's shape)`` or ``(WHOLE, None)``.

    Raises:
        InvalidValueError: ``metadata["stats"]`` is not one of the three names, ``"per_element"`` on a
            leaf of more than :data:`MAX_CELLS` elements, ``"per_channel"`` on a leaf with no channel
            axis, or a channel axis longer than :data:`MAX_CELLS`.
    """
    meta = leaf.metadata
    shape = tuple(leaf.shape)
    elements = int(np.prod(shape, dtype=np.int64))
    marked = meta.get(STATS_KEY)
    where = f"leaf with metadata {meta.to_json()!r} and shape {shape}"
    if marked is not None and marked not in (PER_ELEMENT, PER_CHANNEL, WHOLE):
        raise InvalidValueError(f"metadata {STATS_KEY!r} must be {PER_ELEMENT!r}, {PER_CHANNEL!r} or {WHOLE!r}; "
                                f"got {marked!r} ({where})")
    if marked == WHOLE:
        return WHOLE, None
    if marked == PER_ELEMENT:
        if elements > MAX_CELLS:
            raise InvalidValueError(f"metadata {STATS_KEY!r}: {PER_ELEMENT!r} takes at most {MAX_CELLS} elements, "
                                    f"got {elements} ({where}); use {PER_CHANNEL!r} or {WHOLE!r}")
        return PER_ELEMENT, None
    if marked == PER_CHANNEL or meta.get("kind") in IMAGE_KINDS:
        axis = _channel_axis(shape, meta.get("layout"))
        if axis is None:
            if marked == PER_CHANNEL:
                raise InvalidValueError(f"metadata {STATS_KEY!r}: {PER_CHANNEL!r} needs a channel axis (a 3-d "
                                        f"shape, or a layout naming C), got {where}")
            return WHOLE, None  # one channel: scalar statistics
        if shape[axis] > MAX_CELLS:
            raise InvalidValueError(f"statistics per channel take at most {MAX_CELLS} channels, got {shape[axis]} "
                                    f"({where}); mark the leaf {{{STATS_KEY!r}: {WHOLE!r}}}")
        return PER_CHANNEL, axis
    return (PER_ELEMENT if elements <= PER_ELEMENT_MAX else WHOLE), None


def _channel_axis(shape: tuple[int, ...], layout: Any) -> int | None:
    """The ``C`` of ``layout`` (when it has one letter per axis), else the last axis of a shape of 3 or
    more axes (HWC), else None (one channel)."""
    if isinstance(layout, str) and len(layout) == len(shape):
        return layout.index("C") if "C" in layout else None
    return len(shape) - 1 if len(shape) >= 3 else None


def _version_1_cells(leaf: Space) -> int:
    """The stat cells trajstore before the reduction rule gave ``leaf`` (version-1 stats files): per channel
    for ``kind="image"`` leaves of 2 or more axes (the layout's ``C``, else the last axis), else per element.
    Equal cell counts mean the same statistics (the other axes of a per-channel leaf are then 1)."""
    shape = tuple(leaf.shape)
    if leaf.metadata.get("kind") != "image" or len(shape) < 2:
        return int(np.prod(shape, dtype=np.int64))
    layout = leaf.metadata.get("layout") or "HWC"
    return shape[layout.index("C")] if len(layout) == len(shape) and "C" in layout else shape[-1]


def check_leaves(space: Space) -> None:
    """Raises InvalidValueError (naming the leaf) if a numeric leaf of ``space`` has a bad ``"stats"`` mark."""
    from trajstore.spaces import tree

    for path, leaf in tree.leaves(space):
        if has_stats(leaf):
            try:
                reduction(leaf)
            except InvalidValueError as exc:
                raise InvalidValueError(f"leaf {tree.path_name(path)!r}: {exc}") from None


class LeafAccumulator:
    """Running moments and histograms of one leaf; ``add`` takes batches ``(N, *leaf.shape)``."""

    def __init__(self, leaf: Space):
        self.dtype = np.dtype(leaf.dtype)
        self.leaf_shape = tuple(leaf.shape)
        self.reduction, self.axis = reduction(leaf)
        if self.reduction == PER_CHANNEL:
            self.shape = (self.leaf_shape[self.axis],)
            self.broadcast_shape = tuple(n if i == self.axis else 1 for i, n in enumerate(self.leaf_shape))
            self.broadcast_shape = self.broadcast_shape[self.axis:]  # leading 1s are implied
        else:
            self.shape = self.leaf_shape if self.reduction == PER_ELEMENT else ()
            self.broadcast_shape = self.shape
        elements = int(np.prod(self.shape, dtype=np.int64))
        self.moments = Moments.empty(elements)
        self.hist = Histograms(elements, self.dtype)
        # the same cells as trajstore before the rule had (version-1 stats files): its readers can read them
        self.version_1_cells = elements == _version_1_cells(leaf)

    def _rows(self, batch: np.ndarray) -> np.ndarray:
        """The batch as ``(M, E)``: one column per stat cell (element, channel, or the whole leaf)."""
        if self.reduction == WHOLE:
            return batch.reshape(-1, 1)
        if self.axis is None:
            return batch.reshape(batch.shape[0], int(np.prod(self.shape, dtype=np.int64)))
        return np.moveaxis(batch, self.axis + 1, -1).reshape(-1, self.shape[0])

    def add(self, batch: np.ndarray) -> None:
        """Count a batch of steps, shape ``(N, *leaf shape)``.

        Counted in pieces of :data:`PIECE_ROWS` rows (values of a cell), so that the float64
        temporaries of a large leaf stay small (its batch would otherwise take several fresh buffers of
        its size in float64); a fixed count of rows, so a joined accumulator counts each of its leaves
        as that leaf alone would.
        """
        x = self._rows(np.asarray(batch))
        if x.shape[0] == 0:
            return
        if self.hist.unit:  # counts per byte value (no temporaries), moments from the counts
            counts = self.hist.add(x, self._valid(x))
            self.moments.merge(Moments.of_counts(counts, self.hist.low[0]))
            return
        for start in range(0, x.shape[0], PIECE_ROWS):
            part = x[start:start + PIECE_ROWS]
            valid = self._valid(part)
            part = part.astype(np.float64, copy=False)  # once, for the histograms and the moments
            moments = Moments.of_batch(part, valid)
            self.hist.add(part, valid, (moments.min, moments.max))
            self.moments.merge(moments)

    def _valid(self, x: np.ndarray) -> np.ndarray | None:
        """The finite entries of float ``x`` (None: all of them, or an integer dtype)."""
        if self.dtype.kind != "f":
            return None
        finite = np.isfinite(x)
        return None if finite.all() else finite

    def result(self, name: str) -> LeafStats:
        m = self.moments
        shape = self.shape
        out = {"count": m.n.reshape(shape), "min": m.min.reshape(shape), "max": m.max.reshape(shape),
               "mean": np.where(m.n > 0, m.mean, np.nan).reshape(shape), "std": m.std().reshape(shape)}
        for key, p in QUANTILES.items():
            out[key] = self._quantile(p).reshape(shape)
        with np.errstate(invalid="ignore"):
            spread = np.where(m.n > 0, m.max - m.min, 0.0)
        out["quantile_error"] = np.minimum(self.hist.quantile_error(), spread).reshape(shape)
        return LeafStats(name=name, shape=shape, per_channel=self.reduction == PER_CHANNEL, reduction=self.reduction,
                         broadcast_shape=self.broadcast_shape, **out)

    def _quantile(self, p: float) -> np.ndarray:
        """``np.quantile(x, p)`` (linear method) per element from the histograms; NaN where empty."""
        n = self.moments.n
        h = p * np.maximum(n - 1, 0)
        k = np.floor(h).astype(np.int64)
        f = h - k
        lo = self.hist.order_statistic(k, self.moments.min, self.moments.max)
        hi = self.hist.order_statistic(np.minimum(k + 1, np.maximum(n - 1, 0)), self.moments.min, self.moments.max)
        return np.where(n > 0, lo + f * (hi - lo), np.nan)

    def copy(self) -> "LeafAccumulator":
        acc = LeafAccumulator.__new__(LeafAccumulator)
        acc.__dict__.update(self.__dict__)
        acc.moments, acc.hist = self.moments.copy(), self.hist.copy()
        return acc

    def to_json(self) -> dict[str, Any]:
        return {"moments": self.moments.to_json(), "histogram": self.hist.to_json()}

    def merge(self, other: "LeafAccumulator") -> None:
        """Count ``other``'s steps too (an accumulator of the same leaf over other steps, e.g. another
        shard's): moments by Chan et al.'s rule, histograms re-binned (:meth:`Histograms.merge`); count,
        min, max, mean and std are then those of the union to float64 rounding.

        Raises:
            ValueError: an accumulator of another shape or reduction.
        """
        if (other.shape, other.reduction, other.dtype) != (self.shape, self.reduction, self.dtype):
            raise ValueError(f"cannot merge statistics of shape {other.shape} ({other.reduction}, {other.dtype}) into "
                             f"{self.shape} ({self.reduction}, {self.dtype})")
        self.moments.merge(other.moments)
        self.hist.merge(other.hist)

    # -- several per-element leaves as one (stats_keeper.RangeStats counts them in one pass) -------
    def joinable(self) -> tuple[Any, ...] | None:
        """Leaves with the same key can be counted as one accumulator of their elements side by side
        (:meth:`joined`): per-element float leaves with as many bins. None: count this one alone."""
        if self.reduction != PER_ELEMENT or self.dtype.kind != "f":
            return None
        return ("f", self.hist.bins)

    @classmethod
    def joined(cls, parts: list["LeafAccumulator"]) -> "LeafAccumulator":
        """One accumulator whose elements are those of ``parts`` (same :meth:`joinable` key), in order.
        Every element keeps its own moments, bins and range, so counting a batch of the joined leaf
        gives each element what counting its own leaf would."""
        acc = LeafAccumulator.__new__(LeafAccumulator)
        acc.dtype = np.result_type(*(p.dtype for p in parts))
        acc.reduction, acc.axis, acc.version_1_cells = PER_ELEMENT, None, all(p.version_1_cells for p in parts)
        acc.shape = acc.leaf_shape = acc.broadcast_shape = (sum(int(np.prod(p.shape, dtype=np.int64)) for p in parts),)
        acc.moments = Moments(*(np.concatenate([getattr(p.moments, f) for p in parts])
                                for f in ("n", "mean", "m2", "min", "max")))
        acc.hist = Histograms.joined([p.hist for p in parts])
        return acc

    def part(self, start: int, template: "LeafAccumulator") -> "LeafAccumulator":
        """A copy of the elements ``start ...`` of a :meth:`joined` accumulator, shaped like ``template``."""
        stop = start + int(np.prod(template.shape, dtype=np.int64))
        acc = LeafAccumulator.__new__(LeafAccumulator)
        acc.__dict__.update(template.__dict__)
        acc.moments = Moments(*(getattr(self.moments, f)[start:stop].copy() for f in ("n", "mean", "m2", "min", "max")))
        acc.hist = self.hist.part(start, stop, template.hist)
        return acc

    @classmethod
    def fits(cls, leaf: Space, data: Any) -> bool:
        """True if ``data`` (one leaf of a stats file) has this version's cells and bins for ``leaf``."""
        try:
            acc = cls(leaf)
            return (len(data["moments"]["n"]) == acc.moments.n.shape[0] and int(data["histogram"]["bins"]) == acc.hist.bins
                    and len(data["histogram"]["low"]) == acc.moments.n.shape[0])
        except (KeyError, TypeError, ValueError):
            return False

    @classmethod
    def from_json(cls, leaf: Space, data: dict[str, Any]) -> "LeafAccumulator":
        """Raises ValueError/KeyError when ``data`` does not fit ``leaf``."""
        acc = cls(leaf)
        elements = acc.moments.n.shape[0]
        acc.moments = Moments.from_json(data["moments"])
        if acc.moments.n.shape != (elements,):
            raise ValueError(f"moments of {acc.moments.n.shape} elements, expected {elements}")
        acc.hist = Histograms.from_json(data["histogram"], elements, acc.dtype)
        return acc
