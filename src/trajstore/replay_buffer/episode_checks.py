"""Consistency checks of the episode table's int64 columns (ids, starts, stops, final observation
numbers, interrupted flags), shared by the table (:mod:`~trajstore.replay_buffer.episodes`) and the
episode index's open-time check (:mod:`~trajstore.replay_buffer.episode_index`). NumPy only, no I/O."""

from __future__ import annotations

from typing import Any

import numpy as np

ROWS = 5  # ids, starts, stops, final observation number (-1: none), interrupted (0/1)


def check_rows(rows: np.ndarray, last: np.ndarray | None = None) -> None:
    """The table's own consistency checks of closed-episode columns ``rows`` (int64 ``(5, E)``: ids,
    starts, stops, final numbers, interrupted flags), after the column ``last`` (int64 ``(5,)``) when
    given: ids and stops increasing, each start before its stop, final numbers -1 or increasing,
    flags 0 or 1.

    Raises:
        ValueError: the first check that fails, as :meth:`EpisodeTable.from_columns` raises it.
    """
    check_columns(rows, None, None, last)


def check_columns(rows: np.ndarray, data: list[Any] | None, final_count: int | None, last: np.ndarray | None
                   ) -> None:
    """Raise ValueError unless ``rows`` (int64 ``(5, E)``) are closed episodes in order (after column
    ``last``, when given) with one JSON object (or ``None``) of data each."""
    if rows.ndim != 2 or rows.shape[0] != ROWS or (data is not None and rows.shape[1] != len(data)):
        raise ValueError("inconsistent episode table: its lists differ in length")
    ids, starts, stops, final, interrupted = rows
    if last is not None:
        ids, stops = np.concatenate([last[:1], ids]), np.concatenate([last[2:3], stops])
        final = np.concatenate([last[3:4], final])
    if np.any(rows[2] <= rows[1]) or np.any(np.diff(stops) <= 0) or np.any(np.diff(ids) <= 0):
        raise ValueError("inconsistent episode table")
    numbered = final[final >= 0]
    if np.any(final < -1) or np.any(np.diff(numbered) <= 0) or (
            final_count is not None and np.any(numbered >= final_count)):
        raise ValueError("inconsistent episode table: bad final observation numbers")
    if np.any((interrupted != 0) & (interrupted != 1)):
        raise ValueError("inconsistent episode table: interrupted flags must be 0 or 1")
    if data is not None and not all(d is None or isinstance(d, dict) for d in data):
        raise ValueError("inconsistent episode table: episode data must be JSON objects")
