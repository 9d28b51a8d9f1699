"""``FrameCache``: recently decoded video frames of one process, bounded in bytes.

Keys are ``(segment file id, frame number)``: segment files are never rewritten and file ids
never reused, so a cached frame can never go stale. A :class:`VideoStorage` keeps one per
process (a forked DataLoader worker starts with an empty one of its own) and puts every frame
it decodes there; a read takes what it finds there instead of decoding it again. The bound
is :data:`~trajstore.storages.frames.video.FRAME_CACHE_BYTES` (32 MiB, about 680 frames of
128x128 or 36 of 480x640; 0 turns it off); the least recently used frames go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np


class FrameCache:
    """An LRU of uint8 frames ``(H, W, 3)`` holding at most ``max_bytes`` bytes of frame data.

    Thread-safe. Stored frames are private copies: callers may change what they put or got.

    Args:
        max_bytes: the bound (>= 0; 0 keeps nothing).
    """

    def __init__(self, max_bytes: int):
        if max_bytes < 0:
            raise ValueError(f"expected max_bytes >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.nbytes = 0  # bytes held now
        self._frames: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._frames)

    def take(self, file_id: int, numbers: list[int], out: np.ndarray, rows: list[int]) -> list[int]:
        """Copy the cached frames ``numbers`` of ``file_id`` into ``out[rows]``; returns the
        positions (into ``numbers``) of those it did not hold."""
        missing = []
        if not self._frames:
            return list(range(len(numbers)))
        with self._lock:
            for i, (n, r) in enumerate(zip(numbers, rows)):
                frame = self._frames.get((file_id, n))
                if frame is None:
                    missing.append(i)
                else:
                    self._frames.move_to_end((file_id, n))
                    out[r] = frame
        return missing

    def put(self, file_id: int, numbers: list[int], frames: np.ndarray, rows: list[int]) -> None:
        """Keep copies of ``frames[rows]`` as frames ``numbers`` of ``file_id``, evicting the oldest."""
        if self.max_bytes == 0:
            return
        with self._lock:
            for n, r in zip(numbers, rows):
                frame = frames[r]
                if frame.nbytes > self.max_bytes:
                    return
                old = self._frames.pop((file_id, n), None)
                if old is not None:
                    self.nbytes -= old.nbytes
                self._frames[(file_id, n)] = frame.copy()
                self.nbytes += frame.nbytes
                while self.nbytes > self.max_bytes:
                    self.nbytes -= self._frames.popitem(last=False)[1].nbytes

    def drop_file(self, file_id: int) -> None:
        """Forget the frames of ``file_id`` (its segment is being deleted)."""
        with self._lock:
            for key in [k for k in self._frames if k[0] == file_id]:
                self.nbytes -= self._frames.pop(key).nbytes

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()
            self.nbytes = 0
