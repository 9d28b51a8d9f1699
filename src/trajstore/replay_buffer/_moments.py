"""Per-element count, mean, sum of squared deviations, min and max in float64, merged with the
parallel-variance rule of Chan, Golub and LeVeque (1979). NumPy only, no I/O.

Two partial results ``a`` and ``b`` merge as ``n = na + nb``, ``d = mean_b - mean_a``,
``mean = mean_a + d * nb / n``, ``m2 = m2_a + m2_b + d**2 * na * nb / n``: no sum of squares of raw
values is ever formed (uint8 squares would overflow, float32 ones lose digits), and a batch's own
``m2`` is taken around its own mean (two passes), so batches combine to within rounding of the
one-pass result over all the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Moments:
    """Arrays of shape ``(E,)``: ``n`` (int64), ``mean``, ``m2``, ``min``, ``max`` (float64;
    ``min``/``max`` are NaN while ``n`` is 0)."""

    n: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    min: np.ndarray
    max: np.ndarray

    @classmethod
    def empty(cls, elements: int) -> "Moments":
        nan = np.full(elements, np.nan)
        return cls(np.zeros(elements, np.int64), np.zeros(elements), np.zeros(elements), nan, nan.copy())

    @classmethod
    def of_batch(cls, x: np.ndarray, valid: np.ndarray | None = None) -> "Moments":
        """Moments of the rows of ``x`` (shape ``(M, E)``, any numeric dtype), over ``valid`` entries only."""
        xf = x.astype(np.float64, copy=False)
        if valid is None:
            n = np.full(x.shape[1], x.shape[0], np.int64)
            if x.shape[0] == 0:
                return cls.empty(x.shape[1])
            mean = xf.mean(axis=0)
            dev = xf - mean
            # einsum, not a BLAS dot product: OpenBLAS threads spin on a busy machine (18 ms for 65,536 values)
            return cls(n, mean, np.einsum("ij,ij->j", dev, dev), xf.min(axis=0), xf.max(axis=0))
        n = valid.sum(axis=0).astype(np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, np.where(valid, xf, 0.0).sum(axis=0) / np.maximum(n, 1), 0.0)
            dev = np.where(valid, xf - mean, 0.0)
        vmin = np.where(n > 0, np.where(valid, xf, np.inf).min(axis=0), np.nan)
        vmax = np.where(n > 0, np.where(valid, xf, -np.inf).max(axis=0), np.nan)
        return cls(n, mean, np.einsum("ij,ij->j", dev, dev), vmin, vmax)

    @classmethod
    def of_counts(cls, counts: np.ndarray, low: float) -> "Moments":
        """Moments of integer values given as counts per value: ``counts[e, k]`` values equal to
        ``low + k`` (shape ``(E, K)``); exact, whatever the number of values."""
        values = low + np.arange(counts.shape[1], dtype=np.float64)
        n = counts.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, counts @ values / np.maximum(n, 1), 0.0)
        m2 = np.einsum("ek,ek->e", counts.astype(np.float64), (values[None, :] - mean[:, None]) ** 2)
        seen = counts > 0
        first = np.where(n > 0, low + seen.argmax(axis=1), np.nan)
        last = np.where(n > 0, low + counts.shape[1] - 1 - seen[:, ::-1].argmax(axis=1), np.nan)
        return cls(n.astype(np.int64), mean, m2, first, last)

    def merge(self, other: "Moments") -> None:
        """Fold ``other`` into this one (Chan et al.'s rule, see the module docstring)."""
        n = self.n + other.n
        with np.errstate(invalid="ignore", divide="ignore"):
            d = other.mean - self.mean
            share = np.where(n > 0, other.n / np.maximum(n, 1), 0.0)
            self.mean = self.mean + d * share
            self.m2 = self.m2 + other.m2 + d * d * self.n * share
        self.n = n
        self.min = np.fmin(self.min, other.min)
        self.max = np.fmax(self.max, other.max)

    def std(self) -> np.ndarray:
        """Population standard deviation (``ddof=0``, as ``np.std``); NaN where ``n`` is 0."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n > 0, np.sqrt(np.maximum(self.m2, 0.0) / np.maximum(self.n, 1)), np.nan)

    def copy(self) -> "Moments":
        return Moments(self.n.copy(), self.mean.copy(), self.m2.copy(), self.min.copy(), self.max.copy())

    def to_json(self) -> dict[str, Any]:
        opt = lambda a: [None if np.isnan(v) else float(v) for v in a]  # noqa: E731
        return {"n": self.n.tolist(), "mean": self.mean.tolist(), "m2": self.m2.tolist(),
                "min": opt(self.min), "max": opt(self.max)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Moments":
        opt = lambda a: np.array([np.nan if v is None else v for v in a], np.float64)  # noqa: E731
        return cls(np.asarray(data["n"], np.int64), np.asarray(data["mean"], np.float64),
                   np.asarray(data["m2"], np.float64), opt(data["min"]), opt(data["max"]))
