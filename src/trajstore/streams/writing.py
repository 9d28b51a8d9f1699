"""One stream of a stream buffer: its sub-buffer (a :class:`~trajstore.replay_buffer.ReplayBuffer` of
``{"timestamp", "value"}`` steps), its lock, and its held timestamps in memory.

Each stream has its own lock, so appends to different streams from different threads run at once;
the sub-buffer writes behind (a background thread), so an append costs about a ``ReplayBuffer.append``.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from trajstore.errors import InvalidValueError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace, Space, check_batch_size
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
from trajstore.streams.timestamps import TimeColumn, check_order, many_ns, one_ns

#: Timestamps read per call when loading a stream's timestamps.
_CHUNK = 1 << 16


def step_space(space: Space) -> DictSpace:
    """The sub-buffer's step space of a stream of ``space``: ``{"timestamp": int64 (), "value": space}``."""
    i64 = np.iinfo(np.int64)
    return DictSpace({"timestamp": BoxSpace(i64.min, i64.max, (), np.int64), "value": space})


def within_stream(message: str) -> str:
    """A sub-buffer's message with its leaf keys made the stream's own: ``leaf 'value/force'`` becomes
    ``leaf 'force'``, and ``leaf 'value'`` (the whole value) goes, the caller naming the stream."""
    message = message.replace("leaf 'value': ", "").replace("keys at 'value' ", "keys ")
    return re.sub(r"'value/([^']*)'", r"'\1'", message)


class Stream:
    """One stream: writes (under its lock) and its timestamps; the buffer owns the episode bookkeeping."""

    def __init__(self, name: str, sub: ReplayBuffer):
        self.name = name
        self.sub = sub
        self.space: Space = sub.space["value"]  # type: ignore[index]
        self.lock = threading.Lock()
        self.times = TimeColumn()
        self.open_start = 0  # first sample of the open episode
        self._ts_request: Any = None

    # -- making and opening ----------------------------------------------------------------
    @classmethod
    def create(cls, name: str, space: Space, folder: Path, *, multiprocessing: bool, check_bounds: bool,
               routing: dict[str, Any]) -> "Stream":
        steps = step_space(space)
        sub = ReplayBuffer.create(DictStorage, steps, cache_path=folder, capacity=None,
                                  multiprocessing=multiprocessing, check_bounds=check_bounds,
                                  **dict_storage_kwargs_from_space(steps, **routing))
        return cls(name, sub)

    @classmethod
    def open(cls, name: str, folder: Path, *, read_only: bool, multiprocessing: bool) -> "Stream":
        sub = ReplayBuffer.load_from(folder, read_only=read_only, multiprocessing=multiprocessing)
        return cls(name, sub)

    def held(self) -> int:
        """Samples the sub-buffer holds (a reader: what it saw at its last refresh)."""
        return len(self.sub)

    def load_times(self, stop: int) -> None:
        """Read the timestamps of samples ``[len(times), stop)`` from the sub-buffer (timestamp leaf only)."""
        if self._ts_request is None:
            self._ts_request = self.sub.window_request(None, leaves=["timestamp"])
        for a in range(len(self.times), stop, _CHUNK):
            numbers = np.arange(a, min(a + _CHUNK, stop), dtype=np.int64)
            data, _ = self.sub.windows_at(numbers, self._ts_request)
            self.times.add(np.asarray(data["timestamp"], np.int64).reshape(-1))

    # -- writing (the caller holds the lock) --------------------------------------------------
    def last_ns(self) -> int | None:
        """The last timestamp in the open episode, ``None`` when it has none."""
        return self.times.at(len(self.times) - 1) if len(self.times) > self.open_start else None

    def append(self, value: Any, t: Any) -> None:
        ns = one_ns(self.name, t)
        n = len(self.times)
        if n > self.open_start and ns < self.times.at(n - 1):
            check_order(self.name, np.array([ns], np.int64), self.times.at(n - 1), single=True)  # raises
        try:
            self.sub.append({"timestamp": np.int64(ns), "value": value})
        except InvalidValueError as exc:
            raise type(exc)(f"stream {self.name!r}: {within_stream(str(exc))}") from None
        self.times.add_one(ns)

    def extend(self, values: Any, t: Any) -> None:
        try:
            n = check_batch_size(self.space, values)
        except (InvalidValueError, TypeError, KeyError, ValueError) as exc:
            raise InvalidValueError(f"stream {self.name!r}: values are not a batch of the stream's space "
                                    f"({type(exc).__name__}: {exc})") from None
        ns = many_ns(self.name, t, n)
        check_order(self.name, ns, self.last_ns())
        try:
            self.sub.extend({"timestamp": ns, "value": values})
        except InvalidValueError as exc:
            raise type(exc)(f"stream {self.name!r}: {within_stream(str(exc))}") from None
        self.times.add(ns)

    def open_count(self) -> int:
        return len(self.times) - self.open_start

    def end(self, interrupted: bool) -> int:
        """End the open episode's sub-episode (not committed: the buffer flushes); returns its sample count."""
        n = self.open_count()
        if n:
            self.sub.end_episode(interrupted=interrupted, flush=False)
        self.open_start = len(self.times)
        return n

    def discard(self) -> int:
        """Drop the open episode's samples (committed at once by the sub-buffer); returns how many."""
        n = self.sub.discard_episode()
        self.times.truncate(self.open_start)
        return n

    def close(self) -> None:
        self.sub.close()
