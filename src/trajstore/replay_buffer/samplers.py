"""Which steps to read for training: logical indices only, no data I/O.

Samplers read the episode table (:class:`~trajstore.replay_buffer.episodes.Episode` list)
and return logical indices; the buffer gathers the data in one read per leaf.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from trajstore.replay_buffer.episodes import Episode


def uniform_steps(count: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """``batch_size`` logical indices in ``[0, count)``, uniform with replacement, int64 ``(B,)``.

    Raises:
        ValueError: ``count`` is 0 or ``batch_size`` < 1.
    """
    if count <= 0:
        raise ValueError("cannot sample from an empty buffer")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return rng.integers(0, count, size=batch_size, dtype=np.int64)


def window_starts(episodes: Sequence[Episode], window: int) -> np.ndarray:
    """Every logical index where a window of ``window`` steps fits inside one episode, int64 ``(M,)``."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    parts = [np.arange(e.start, e.stop - window + 1, dtype=np.int64) for e in episodes if len(e) >= window]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def uniform_windows(episodes: Sequence[Episode], window: int, batch_size: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Logical indices ``(B, window)`` of windows drawn uniformly (with replacement) among all
    windows that lie inside one episode: a window never crosses an episode boundary.

    Each valid window is equally likely, so long episodes give proportionally more windows.

    Raises:
        ValueError: no episode holds ``window`` steps, or ``batch_size`` < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    starts = window_starts(episodes, window)
    if len(starts) == 0:
        longest = max((len(e) for e in episodes), default=0)
        raise ValueError(f"no episode holds a window of {window} steps (longest: {longest})")
    chosen = starts[rng.integers(0, len(starts), size=batch_size)]
    return chosen[:, None] + np.arange(window, dtype=np.int64)[None, :]
