"""One top-level key of many episodes' data, read from their log lines without parsing each line:
what a selection such as ``success == true`` needs (:mod:`~trajstore.replay_buffer.episode_query`).

How (:func:`top_level_values`): the lines' bytes are scanned once in C (NumPy and one regular
expression over the whole span). A line is *flat* when its data holds no nested list or dict and
no backslash (one ``{`` after ``"data":``, no ``[``, no ``\\``): in a flat line no string can hold a
quote, so every ``"key":`` after the data's ``{`` is a key of the data, and its value is the
scalar that follows (``true``, ``false``, ``null``, a number, a string without escapes). The lines
that are not flat are parsed as JSON, one batch. Same values as parsing every line.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from trajstore._json import loads_bounded

__all__ = ["MISSING", "EpisodeRow", "top_level_values"]

#: The value of a key that the episode's data does not have.
MISSING: Any = object()
_SCALARS = {b"true": True, b"false": False, b"null": None}
_DATA = re.compile(rb'"data":\{')


def top_level_values(span: bytes, starts: np.ndarray, lengths: np.ndarray, key: str, source: str,
                     max_depth: int) -> list[Any]:
    """The value of data key ``key`` in each log line ``span[starts[k]:starts[k] + lengths[k]]`` (int64
    ``(E,)``, in increasing order), :data:`MISSING` where the data lacks it.

    Raises:
        FormatError: a line that is not a record (names ``source``).
    """
    n = len(starts)
    out: list[Any] = [MISSING] * n
    if n == 0:
        return out
    buf = np.frombuffer(span, np.uint8)
    line_of = _line_of(starts)

    def count(chars: bytes) -> np.ndarray:
        hits = np.flatnonzero(np.isin(buf, np.frombuffer(chars, np.uint8)))
        return np.bincount(line_of(hits), minlength=n)

    data_at = np.full(n, -1, np.int64)
    found = np.fromiter((m.end() for m in _DATA.finditer(span)), np.int64)
    if found.size:
        lines = line_of(found - 1)
        first = np.unique(lines, return_index=True)[1]
        data_at[lines[first]] = found[first]  # the first "data":{ of a line is its own (the fields before are numbers)
    ends = starts + lengths
    closes = (buf[np.maximum(ends - 3, 0)] == ord("}")) & (buf[np.maximum(ends - 2, 0)] == ord("}"))
    flat = (count(b"[\\") == 0) & (count(b"{") == 2) & (data_at >= 0) & closes  # the data is the line's end
    pattern = re.compile(b'"' + re.escape(json.dumps(key)[1:-1].encode()) + rb'":("[^"]*"|true|false|null|[-+0-9.eE]+)')
    matches = [(m.start(), m.group(1)) for m in pattern.finditer(span)]
    if matches:
        at = np.fromiter((p for p, _ in matches), np.int64, len(matches))
        lines = line_of(at)
        keep = flat[lines] & (at >= data_at[lines])
        for k, j in zip(lines[keep].tolist(), np.flatnonzero(keep).tolist()):
            raw = matches[j][1]
            value = _SCALARS.get(raw, MISSING)
            out[k] = value if value is not MISSING else json.loads(raw)
    rest = np.flatnonzero(~flat)
    if rest.size:
        text = b"[" + b",".join(span[int(starts[k]):int(starts[k] + lengths[k])].rstrip(b"\n")
                                for k in rest.tolist()) + b"]"
        for k, record in zip(rest.tolist(), loads_bounded(text, source=source, max_depth=max_depth)):
            data = record.get("data") if isinstance(record, dict) else None
            out[k] = data.get(key, MISSING) if isinstance(data, dict) else MISSING
    return out


def _line_of(starts: np.ndarray):
    def line_of(positions: np.ndarray) -> np.ndarray:
        return np.searchsorted(starts, positions, side="right") - 1
    return line_of


class EpisodeRow:
    """What a selection's predicate reads of one episode: its attributes and the data keys it names."""

    __slots__ = ("id", "_steps", "done", "interrupted", "overwritten", "_data")

    def __init__(self, id: int, steps: int, done: bool, interrupted: bool, overwritten: bool,
                 data: dict[str, Any] | None):
        self.id, self._steps, self.done, self.interrupted, self.overwritten = id, steps, done, interrupted, overwritten
        self._data = data

    def __len__(self) -> int:
        return self._steps
