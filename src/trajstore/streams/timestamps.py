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
    """``t`` (``(n,)`` float seconds or integer nanoseconds) as int64 nanoseconds ``(n,)``.

    Raises:
        InvalidValueError: wrong shape, not numbers (bool included), NaN or infinite (names the stream and
            the first bad index).
    """
    arr = np.asarray(t)
    if arr.shape != (n,):
        raise InvalidValueError(f"stream {stream!r}: timestamps must have shape ({n},) (one per value), "
                                f"got {arr.shape}")
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and n and int(arr.max()) > _I64.max:
            bad = int(np.argmax(arr > _I64.max))
            raise InvalidValueError(f"stream {stream!r}: timestamp {bad} ({arr[bad]} ns) does not fit int64")
        return arr.astype(np.int64, copy=True)
    if arr.dtype.kind != "f":
        raise InvalidValueError(f"stream {stream!r}: timestamps must be float seconds or integer nanoseconds, "
                                f"got dtype {arr.dtype}")
    bad = ~np.isfinite(arr) | (np.abs(arr) >= _MAX_SECONDS)
    if bad.any():
        first = int(np.argmax(bad))
        raise InvalidValueError(f"stream {stream!r}: timestamp {first} is {float(arr[first])}; timestamps must be "
                                "finite seconds within int64 nanoseconds")
    return np.rint(arr.astype(np.float64) * 1e9).astype(np.int64)


def check_order(stream: str, ns: np.ndarray, last: int | None) -> None:
    """Refuse timestamps ``ns`` (int64 ``(n,)``) that decrease, or start before ``last`` (the stream's
    last timestamp in the open episode, ``None`` at its start).

    Raises:
        InvalidValueError: names the stream, the first bad index and both times.
    """
    if not len(ns):
        return
    if last is not None and ns[0] < last:
        raise InvalidValueError(f"stream {stream!r}: timestamp 0 ({int(ns[0])} ns) is before the stream's last "
                                f"timestamp in this episode ({last} ns); timestamps must not decrease")
    if len(ns) > 1:
        down = np.diff(ns) < 0
        if down.any():
            i = int(np.argmax(down)) + 1
            raise InvalidValueError(f"stream {stream!r}: timestamp {i} ({int(ns[i])} ns) is before timestamp "
                                    f"{i - 1} ({int(ns[i - 1])} ns); timestamps must not decrease")


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
