"""Stream timestamps: seconds or nanoseconds in, int64 nanoseconds out, order checks, and the
in-memory column of one stream's held timestamps. NumPy only, no I/O.

A timestamp given as a float (Python ``float``, ``np.floating``, a float array) is seconds and is
rounded to the nearest nanosecond; an integer (``int``, ``np.integer``, an integer array) is already
nanoseconds. Within an episode a stream's timestamps never decrease (equal ones are allowed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trajstore.errors import InvalidValueError

_I64 = np.iinfo(np.int64)
#: Largest float seconds that still fit int64 nanoseconds (about 292 years).
_MAX_SECONDS = _I64.max / 1e9


def one_ns(stream: str, t: Any) -> int:
    """``t`` (float seconds or int nanoseconds) as int nanoseconds.

    Raises:
        InvalidValueError: ``t`` is a bool, not a number, NaN or infinite, or out of int64 ns (names ``stream``).
    """
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, float, np.integer, np.floating)):
        raise InvalidValueError(f"stream {stream!r}: timestamp must be float seconds or int nanoseconds, "
                                f"got {t!r} of type {type(t).__name__}")
    if isinstance(t, (int, np.integer)):
        if not _I64.min <= int(t) <= _I64.max:
            raise InvalidValueError(f"stream {stream!r}: timestamp {t} ns does not fit int64 nanoseconds")
        return int(t)
    if not np.isfinite(t) or abs(float(t)) >= _MAX_SECONDS:
        raise InvalidValueError(f"stream {stream!r}: timestamp must be finite seconds within int64 nanoseconds, "
                                f"got {t!r}")
    return int(round(float(t) * 1e9))


def many_ns(stream: str, t: Any, n: int) -> np.ndarray:
    """``t`` (``(n,)`` float seconds or integer nanoseconds) as int64 nanoseconds ``(n,)``. A list or
    tuple of Python ints is nanoseconds (each must fit int64), of floats (any float in it) seconds.

    Raises:
        InvalidValueError: wrong shape, not numbers (bool included), NaN or infinite, nanoseconds out
            of int64 (names the stream and the first bad index).
    """
    if isinstance(t, (list, tuple)) and t and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                                                  for v in t):
        for i, v in enumerate(t):  # before NumPy turns an int beyond int64 into float64 (then "seconds")
            if not _I64.min <= int(v) <= _I64.max:
                raise InvalidValueError(f"stream {stream!r}: timestamp at index {i} ({int(v)} ns) does not fit "
                                        "int64 nanoseconds")
        t = np.array([int(v) for v in t], np.int64)
    arr = np.asarray(t)
    if arr.shape != (n,):
        raise InvalidValueError(f"stream {stream!r}: timestamps must have shape ({n},) (one per value), "
                                f"got {arr.shape}")
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and n and int(arr.max()) > _I64.max:
            bad = int(np.argmax(arr > _I64.max))
            raise InvalidValueError(f"stream {stream!r}: timestamp at index {bad} ({arr[bad]} ns) does not fit "
                                    "int64 nanoseconds")
        return arr.astype(np.int64, copy=True)
    if arr.dtype.kind != "f":
        raise InvalidValueError(f"stream {stream!r}: timestamps must be float seconds or integer nanoseconds, "
                                f"got dtype {arr.dtype}")
    arr = arr.astype(np.float64)  # float16/float32 seconds: compared and scaled without overflow
    bad = ~np.isfinite(arr) | (np.abs(arr) >= _MAX_SECONDS)
    if bad.any():
        first = int(np.argmax(bad))
        raise InvalidValueError(f"stream {stream!r}: timestamp at index {first} is {float(arr[first])}; timestamps "
                                "must be finite seconds within int64 nanoseconds")
    return np.rint(arr * 1e9).astype(np.int64)


def check_order(stream: str, ns: np.ndarray, last: int | None, *, single: bool = False) -> None:
    """Refuse timestamps ``ns`` (int64 ``(n,)``) that decrease, or start before ``last`` (the stream's
    last timestamp in the open episode, ``None`` at its start). Neighbours are compared directly (no
    differences, which wrap around at the ends of int64). ``single``: ``ns`` is one appended sample
    (the message gives its time, not an index).

    Raises:
        InvalidValueError: names the stream, the first bad index and both times.
    """
    if not len(ns):
        return
    if last is not None and ns[0] < last:
        what = f"timestamp {int(ns[0])} ns" if single else f"timestamp at index 0 ({int(ns[0])} ns)"
        raise InvalidValueError(f"stream {stream!r}: {what} is before the stream's last timestamp in this "
                                f"episode ({last} ns); timestamps must not decrease")
    if len(ns) > 1:
        down = ns[1:] < ns[:-1]
        if down.any():
            i = int(np.argmax(down)) + 1
            raise InvalidValueError(f"stream {stream!r}: timestamp at index {i} ({int(ns[i])} ns) is before the "
                                    f"one at index {i - 1} ({int(ns[i - 1])} ns); timestamps must not decrease")


class TimeColumn:
    """One stream's held timestamps (int64 ns), in memory, growing by doubling; not thread-safe."""

    def __init__(self) -> None:
        self._data = np.empty(64, np.int64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, ns: np.ndarray) -> None:
        need = self._n + len(ns)
        if need > len(self._data):
            grown = np.empty(max(need, 2 * len(self._data)), np.int64)
            grown[:self._n] = self._data[:self._n]
            self._data = grown
        self._data[self._n:need] = ns
        self._n = need

    def add_one(self, ns: int) -> None:
        if self._n == len(self._data):
            self.add(np.array([ns], np.int64))
            return
        self._data[self._n] = ns
        self._n += 1

    def truncate(self, n: int) -> None:
        self._n = min(self._n, n)

    def view(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """A copy of ``[start, stop)`` (default: every held timestamp)."""
        stop = self._n if stop is None else min(stop, self._n)
        return self._data[start:stop].copy()

    def at(self, i: int) -> int:
        return int(self._data[i])
