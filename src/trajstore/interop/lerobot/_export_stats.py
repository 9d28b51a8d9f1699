"""Statistics of an export, laid out as LeRobot v3.0 keeps them: per episode (the ``stats/<key>/<stat>``
columns of ``meta/episodes``) and for the whole dataset (``meta/stats.json``).

Each feature gets ``min, max, mean, std, count, q01, q10, q50, q90, q99`` (lerobot 0.4.4's
``DEFAULT_QUANTILES``). Vectors and scalars: per element, shape ``(n,)``; cameras: per channel, on
values scaled to [0, 1], shape ``(3, 1, 1)``; ``count`` is ``(1,)``. ``std`` is the population standard
deviation. ``min``/``max`` keep an integer feature's dtype (int64 in LeRobot's files), everything else is
float64.

Per episode the figures are exact: NumPy's linear-interpolation quantiles on every value, and for
uint8 frames a 256-bin histogram per channel gives the same figures without holding the frames
(LeRobot samples frames and approximates quantiles with running histograms, so its own figures differ
in the last digits). The dataset figures combine the episodes as lerobot's ``aggregate_stats`` does:
exact min, max, mean and std (parallel variance), quantiles as count-weighted means of the episodes'.
"""

from __future__ import annotations

from typing import Any

import numpy as np

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
STAT_NAMES = ("min", "max", "mean", "std", "count", *QUANTILES)

Stats = dict[str, np.ndarray]


def value_stats(values: np.ndarray) -> Stats:
    """Statistics of one episode's values ``(N, n)`` (scalars as ``(N, 1)``), ``N >= 1``, per element."""
    keep_int = values.dtype.kind in "iu"
    as_float = values.astype(np.float64)
    out: Stats = {
        "min": values.min(axis=0).astype(np.int64) if keep_int else as_float.min(axis=0),
        "max": values.max(axis=0).astype(np.int64) if keep_int else as_float.max(axis=0),
        "mean": as_float.mean(axis=0),
        "std": as_float.std(axis=0),
        "count": np.array([len(values)], np.int64),
    }
    for name, q in QUANTILES.items():
        out[name] = np.quantile(as_float, q, axis=0)
    return out


class FrameStats:
    """Per-channel statistics of uint8 RGB frames, accumulated block by block (256-bin histograms)."""

    def __init__(self) -> None:
        self.hist = np.zeros((3, 256), np.int64)
        self.frames = 0

    def add(self, frames: np.ndarray) -> None:
        """Count frames ``(N, H, W, 3)`` uint8."""
        flat = frames.reshape(-1, 3)
        for c in range(3):
            self.hist[c] += np.bincount(flat[:, c], minlength=256)
        self.frames += len(frames)

    def stats(self) -> Stats:
        """Statistics of the frames added, on values / 255, each ``(3, 1, 1)`` (count ``(1,)``)."""
        levels = np.arange(256, dtype=np.float64)
        n = self.hist.sum(axis=1).astype(np.float64)
        mean = (self.hist * levels).sum(axis=1) / n
        var = (self.hist * (levels - mean[:, None]) ** 2).sum(axis=1) / n
        present = self.hist > 0
        out: Stats = {
            "min": np.array([levels[p].min() for p in present]),
            "max": np.array([levels[p].max() for p in present]),
            "mean": mean,
            "std": np.sqrt(var),
        }
        for name, q in QUANTILES.items():
            out[name] = np.array([_hist_quantile(h, q) for h in self.hist])
        out = {k: (v / 255.0).reshape(3, 1, 1) for k, v in out.items()}
        out["count"] = np.array([self.frames], np.int64)
        return out


def _hist_quantile(hist: np.ndarray, q: float) -> float:
    """``np.quantile(values, q)`` (linear interpolation) of the values a histogram of levels 0..255 counts."""
    cum = np.cumsum(hist)
    pos = q * (cum[-1] - 1)
    lo, hi = int(np.floor(pos)), int(np.ceil(pos))
    v_lo = float(np.searchsorted(cum, lo, side="right"))  # the level of the value of rank lo
    v_hi = float(np.searchsorted(cum, hi, side="right"))
    return v_lo + (pos - lo) * (v_hi - v_lo)


def aggregate(per_episode: list[Stats]) -> Stats:
    """Dataset statistics from the episodes' (lerobot's ``aggregate_feature_stats`` rule)."""
    means = np.stack([s["mean"] for s in per_episode])  # (E, ...)
    counts = np.array([int(s["count"][0]) for s in per_episode], np.float64)
    weights = counts.reshape((-1,) + (1,) * (means.ndim - 1))  # broadcast over the stat's shape
    total = counts.sum()
    mean = (means * weights).sum(axis=0) / total
    variances = np.stack([s["std"] for s in per_episode]) ** 2
    out: Stats = {
        "min": np.stack([s["min"] for s in per_episode]).min(axis=0),
        "max": np.stack([s["max"] for s in per_episode]).max(axis=0),
        "mean": mean,
        "std": np.sqrt(((variances + (means - mean) ** 2) * weights).sum(axis=0) / total),
        "count": np.array([int(total)], np.int64),
    }
    for name in QUANTILES:
        out[name] = (np.stack([s[name] for s in per_episode]) * weights).sum(axis=0) / total
    return out


def to_json(stats: Stats) -> dict[str, Any]:
    """Nested lists in :data:`STAT_NAMES` order, as in ``meta/stats.json``."""
    return {name: stats[name].tolist() for name in STAT_NAMES}
