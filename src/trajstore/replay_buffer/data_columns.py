"""One top-level key of many episodes' data, read from their log lines without parsing each line:
what a selection such as ``success == true`` needs (:mod:`~trajstore.replay_buffer.episode_query`).

How (:func:`top_level_values`): the lines' bytes are scanned in C (NumPy over the whole span, and
one regular-expression scan per needle for its positions). A line is *flat* when its data holds no
nested list or dict and no backslash (one ``{`` after ``"data":``, no ``[``, no ``\\``): in a flat
line no string can hold a quote, so every ``"key":`` after the data's ``{`` is a key of the data,
and its value is the scalar that follows (``true``, ``false``, ``null``: set with NumPy, no Python
code per line; a number or a string without escapes: one ``int``/``json.loads``/``decode`` each).
A key given twice in a line gives its last value, as ``json.loads``. The lines that are not flat
are parsed as JSON, one batch. Same values as parsing every line.
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
_NUMBER_START = np.frombuffer(b"-+0123456789.eE", np.uint8)


def top_level_values(span: bytes, starts: np.ndarray, lengths: np.ndarray, key: str, source: str,
                     max_depth: int) -> list[Any]:
    """The value of data key ``key`` in each log line ``span[starts[k]:starts[k] + lengths[k]]`` (int64
    ``(E,)``, in increasing order), :data:`MISSING` where the data lacks it.

    Raises:
        FormatError: a line that is not a record (names ``source``).
    """
    n = len(starts)
    if n == 0:
        return []
    buf = np.frombuffer(span, np.uint8)
    line_of = _line_of(starts)
    out = np.full(n, MISSING, object)
    data_at = np.full(n, -1, np.int64)
    found = _find(span, b'"data":{')
    if found.size:
        lines = line_of(found)
        first = np.unique(lines, return_index=True)[1]
        data_at[lines[first]] = found[first] + 8  # the first "data":{ of a line is its own (the fields before are numbers)
    ends = starts + lengths
    closes = (buf[np.maximum(ends - 3, 0)] == ord("}")) & (buf[np.maximum(ends - 2, 0)] == ord("}"))
    bad = np.bincount(line_of(np.flatnonzero((buf == ord("[")) | (buf == ord("\\")))), minlength=n)
    braces = np.bincount(line_of(np.flatnonzero(buf == ord("{"))), minlength=n)
    flat = (bad == 0) & (braces == 2) & (data_at >= 0) & closes  # the data is the line's end
    needle = b'"' + json.dumps(key)[1:-1].encode() + b'":'
    at = _find(span, needle)
    if at.size:
        lines = line_of(at)
        keep = flat[lines] & (at >= data_at[lines])
        at, lines = at[keep][::-1], lines[keep][::-1]
        last = np.unique(lines, return_index=True)[1]  # a key given twice: the last one, as json.loads
        at, lines = at[last] + len(needle), lines[last]
        _fill(span, buf, at, lines, ends, out)
    rest = np.flatnonzero(~flat)
    if rest.size:
        text = b"[" + b",".join(span[int(starts[k]):int(starts[k] + lengths[k])].rstrip(b"\n")
                                for k in rest.tolist()) + b"]"
        for k, record in zip(rest.tolist(), loads_bounded(text, source=source, max_depth=max_depth)):
            data = record.get("data") if isinstance(record, dict) else None
            out[k] = data.get(key, MISSING) if isinstance(data, dict) else MISSING
    return out.tolist()


def _find(span: bytes, needle: bytes) -> np.ndarray:
    """Int64 positions (increasing) where ``needle`` starts in ``span``, left to right without overlap
    (one regular-expression scan in C; no Python code runs per match)."""
    return np.fromiter(map(re.Match.start, re.finditer(re.escape(needle), span)), np.int64)


def _ends(buf: np.ndarray, a: np.ndarray, stops: bytes, limit: np.ndarray) -> np.ndarray:
    """For each start in ``a``: the position of the first byte of ``stops`` at or after it, below
    ``limit`` (int64, as ``a``); -1 where there is none."""
    width = 32
    window = buf[np.minimum(a[:, None] + np.arange(width), len(buf) - 1)]
    hit = np.isin(window, np.frombuffer(stops, np.uint8))
    first = hit.argmax(axis=1)
    out = np.where(hit[np.arange(len(a)), first], a + first, -1)
    for j in np.flatnonzero(out < 0).tolist():  # a long value: looked for byte by byte
        at = [p for p in (bytes(buf[a[j]:limit[j]]).find(bytes([c])) for c in stops) if p >= 0]
        out[j] = a[j] + min(at) if at else -1
    return np.where(out < limit, out, -1)


def _fill(span: bytes, buf: np.ndarray, at: np.ndarray, lines: np.ndarray, ends: np.ndarray, out: np.ndarray) -> None:
    """``out[lines[j]]``: the scalar that starts at ``span[at[j]]`` in a flat line ending before
    ``ends[lines[j]]`` (see the module docstring); left as is where none does."""
    size = len(buf)
    head = buf[np.minimum(at, size - 1)]
    for word, value in _SCALARS.items():
        hit = np.flatnonzero(head == word[0])
        for i in range(1, len(word)):
            hit = hit[buf[np.minimum(at[hit] + i, size - 1)] == word[i]]
        out[lines[hit]] = value
    for quoted in (True, False):
        pick = np.flatnonzero(head == ord('"') if quoted else np.isin(head, _NUMBER_START))
        if not pick.size:
            continue
        a = at[pick] + quoted
        b = _ends(buf, a, b'"' if quoted else b",}", ends[lines[pick]])
        ok = b >= 0
        raws = (span[i:j] for i, j in zip(a[ok].tolist(), b[ok].tolist()))
        got = (r.decode() for r in raws) if quoted else (int(r) if r.isdigit() else json.loads(r) for r in raws)
        out[lines[pick[ok]]] = np.fromiter(got, object, int(ok.sum()))


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
