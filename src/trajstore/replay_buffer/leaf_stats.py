"""Normalisation statistics of one leaf: :class:`LeafStats` (the result) and :class:`LeafAccumulator`
(what is kept and updated as steps arrive). NumPy only, no I/O.

Which leaves: numeric ``BoxSpace`` leaves (integer and float dtypes). Text leaves and bool leaves
(``BinarySpace``) are skipped: they have no statistics.

Reduced over which axes: an image leaf (metadata ``kind="image"``) per channel, over ``N`` and
the pixel axes (``(N, H, W, C)`` -> ``(C,)``; the channel axis is the ``C`` of its ``layout``,
``"HWC"`` when none); any other leaf per element, over ``N`` (``(N, *shape)`` -> ``shape``).
NaN and inf values (possible when bounds checks are off or bounds infinite) are not counted, so
``count`` is per element.

Moments are float64 (:mod:`~trajstore.replay_buffer._moments`); quantiles come from fixed-bin
histograms (:mod:`~trajstore.replay_buffer._histogram`), within ``quantile_error`` of
``np.quantile`` (linear method), exact for 1-byte integer leaves such as ``uint8`` frames.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from trajstore.replay_buffer._histogram import Histograms
from trajstore.replay_buffer._moments import Moments
from trajstore.spaces import Space

#: Field name -> probability of the quantiles every LeafStats carries.
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}


@dataclass(frozen=True)
class LeafStats:
    """Statistics of one leaf over the steps held.

    Every array has shape ``shape``: the leaf's shape, or ``(C,)`` for an image leaf (per channel).
    ``count`` is int64 (values counted per element: steps x pixels for an image channel); the others
    are float64 in the leaf's units (``std`` with ``ddof=0``, as ``np.std``). Where ``count`` is 0
    they are NaN.

    Attributes:
        name: the leaf's path joined by ``"/"`` (``"observation/pixels"``).
        per_channel: True for image leaves (reduced over ``N, H, W``).
        quantile_error: bound on ``|q - np.quantile(x, p)|`` of ``q01`` ... ``q99`` (0: exact).
    """

    name: str
    shape: tuple[int, ...]
    per_channel: bool
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
        out: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "per_channel": self.per_channel}
        for f in fields(self)[3:]:
            a = getattr(self, f.name)
            out[f.name] = a.tolist() if a.dtype.kind == "i" else _nan_to_none(a)
        return out


def _nan_to_none(a: np.ndarray) -> Any:
    return np.where(np.isnan(a), None, a.astype(object)).tolist() if a.ndim else (None if np.isnan(a) else float(a))


def has_stats(leaf: Space) -> bool:
    """True for numeric Box leaves (integer or float dtype); False for text and bool leaves."""
    return leaf.type_name == "box" and np.dtype(leaf.dtype).kind in "iuf"


def channel_axis(leaf: Space) -> int | None:
    """The channel axis of an image leaf (metadata ``kind="image"``), or None: reduce per element."""
    meta = leaf.metadata
    shape = tuple(leaf.shape)
    if meta.get("kind") != "image" or len(shape) < 2:
        return None
    layout = meta.get("layout") or "HWC"
    if len(layout) == len(shape) and "C" in layout:
        return layout.index("C")
    return len(shape) - 1


class LeafAccumulator:
    """Running moments and histograms of one leaf; ``add`` takes batches ``(N, *leaf.shape)``."""

    def __init__(self, leaf: Space):
        self.dtype = np.dtype(leaf.dtype)
        self.leaf_shape = tuple(leaf.shape)
        self.axis = channel_axis(leaf)
        self.shape = (self.leaf_shape[self.axis],) if self.axis is not None else self.leaf_shape
        elements = int(np.prod(self.shape, dtype=np.int64))
        self.moments = Moments.empty(elements)
        self.hist = Histograms(elements, self.dtype)

    def _rows(self, batch: np.ndarray) -> np.ndarray:
        """The batch as ``(M, E)``: one column per element (or channel)."""
        if self.axis is None:
            return batch.reshape(batch.shape[0], int(np.prod(self.shape, dtype=np.int64)))
        return np.moveaxis(batch, self.axis + 1, -1).reshape(-1, self.shape[0])

    def add(self, batch: np.ndarray) -> None:
        """Count a batch of steps, shape ``(N, *leaf shape)``."""
        x = self._rows(np.asarray(batch))
        if x.shape[0] == 0:
            return
        valid = None
        if self.dtype.kind == "f":
            finite = np.isfinite(x)
            valid = None if finite.all() else finite
        counts = self.hist.add(x, valid)
        part = Moments.of_counts(counts, self.hist.low[0]) if self.hist.unit else Moments.of_batch(x, valid)
        self.moments.merge(part)

    def result(self, name: str) -> LeafStats:
        m = self.moments
        shape = self.shape
        out = {"count": m.n.reshape(shape), "min": m.min.reshape(shape), "max": m.max.reshape(shape),
               "mean": np.where(m.n > 0, m.mean, np.nan).reshape(shape), "std": m.std().reshape(shape)}
        for key, p in QUANTILES.items():
            out[key] = self._quantile(p).reshape(shape)
        out["quantile_error"] = self.hist.quantile_error().reshape(shape)
        return LeafStats(name=name, shape=shape, per_channel=self.axis is not None, **out)

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

    # -- several per-element leaves as one (stats_keeper.RangeStats counts them in one pass) -------
    def joinable(self) -> tuple[Any, ...] | None:
        """Leaves with the same key can be counted as one accumulator of their elements side by side
        (:meth:`joined`): per-element float leaves with as many bins. None: count this one alone."""
        if self.axis is not None or self.dtype.kind != "f":
            return None
        return ("f", self.hist.bins)

    @classmethod
    def joined(cls, parts: list["LeafAccumulator"]) -> "LeafAccumulator":
        """One accumulator whose elements are those of ``parts`` (same :meth:`joinable` key), in order.
        Every element keeps its own moments, bins and range, so counting a batch of the joined leaf
        gives each element what counting its own leaf would."""
        acc = LeafAccumulator.__new__(LeafAccumulator)
        acc.dtype = np.result_type(*(p.dtype for p in parts))
        acc.axis = None
        acc.shape = acc.leaf_shape = (sum(int(np.prod(p.shape, dtype=np.int64)) for p in parts),)
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
    def from_json(cls, leaf: Space, data: dict[str, Any]) -> "LeafAccumulator":
        """Raises ValueError/KeyError when ``data`` does not fit ``leaf``."""
        acc = cls(leaf)
        elements = acc.moments.n.shape[0]
        acc.moments = Moments.from_json(data["moments"])
        if acc.moments.n.shape != (elements,):
            raise ValueError(f"moments of {acc.moments.n.shape} elements, expected {elements}")
        acc.hist = Histograms.from_json(data["histogram"], elements, acc.dtype)
        return acc
