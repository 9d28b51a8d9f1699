"""A map-style ``torch.utils.data.Dataset`` over the steps of a replay buffer.

Safe with DataLoader workers, fork or spawn: under spawn the dataset pickles as a
reference to the buffer folder and each worker reopens it read-only; under fork the
buffer notices the new process on first use and reopens its files (an HDF5 handle never
crosses a fork). Create or load the buffer with ``multiprocessing=True`` when a writer may
append while the workers read.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np
from torch.utils.data import Dataset

from trajstore.backends import to_torch
from trajstore.errors import StaleReadError
from trajstore.integrations.normalizer import Normalizer  # re-exported: trajstore.integrations.torch.Normalizer
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.replay_buffer import MAX_READ_ATTEMPTS
from trajstore.spaces import map_leaves


__all__ = ["ReplayBufferDataset", "Normalizer"]


class ReplayBufferDataset(Dataset):
    """Step ``i`` of the buffer as a nested dict of torch tensors (text leaves as ``str``).

    Args:
        buffer: a :class:`ReplayBuffer`, or the path of a buffer folder (opened read-only).
        transform: optional function applied to each step (nested dict of tensors).
        refresh: a live buffer: re-read the writer's flushed state before each ``len()`` and each
            read, in every worker (also with ``persistent_workers``); indices wrap modulo the
            current length, since a ring's view moves while the writer appends.

    ``len(dataset)`` is the number of steps held when it was last refreshed. Given a writer's
    buffer, ``len()`` flushes it first: workers read the folder, which holds only flushed steps.
    Indexing follows the buffer's logical order (0 = oldest). Batched access (``__getitems__``,
    used by DataLoader with automatic batching) reads the whole batch in one buffer call.
    """

    def __init__(self, buffer: ReplayBuffer | str | os.PathLike, *, transform: Callable[[Any], Any] | None = None,
                 multiprocessing: bool = True, refresh: bool = False):
        if not isinstance(buffer, ReplayBuffer):
            buffer = ReplayBuffer.load_from(buffer, read_only=True, multiprocessing=multiprocessing)
        self.buffer = buffer
        self.transform = transform
        self.refresh = refresh

    def __len__(self) -> int:
        if not self.buffer.read_only:
            # Workers reopen the folder and see only what was flushed: flush so they see every step.
            self.buffer.flush()
        elif self.refresh:
            self.buffer.refresh()
        return len(self.buffer)

    def _indices(self, indices: Any) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64)
        if self.refresh:
            # A live buffer: workers see the writer's newest flushed steps. A ring's view moves
            # (and briefly shrinks while the writer overwrites), so indices wrap onto the current one.
            self.buffer.refresh()
            idx = idx % max(1, len(self.buffer))
        return idx

    def __getitem__(self, index: int) -> Any:
        step = to_torch(self._read(index))
        return self.transform(step) if self.transform else step

    def __getitems__(self, indices: list[int]) -> list[Any]:
        batch = self._read(indices)
        return [self._one(batch, i) for i in range(len(indices))]

    def _read(self, indices: Any) -> Any:
        for _ in range(MAX_READ_ATTEMPTS):
            try:
                idx = self._indices(indices)
                return self.buffer[int(idx) if idx.ndim == 0 else idx]
            except StaleReadError:
                if not self.refresh:
                    raise
        raise RuntimeError(f"the writer of {self.buffer.cache_path} kept overwriting the steps being read")

    def _one(self, batch: Any, i: int) -> Any:
        step = to_torch(map_leaves(self.buffer.space, batch, lambda v: v[i]))
        return self.transform(step) if self.transform else step

