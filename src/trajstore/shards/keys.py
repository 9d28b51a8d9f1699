"""Episode keys across the shards of a dataset: one key is committed once in the whole dataset.

Each shard's writer checks ``end_episode(episode_key=)`` against its own keys
(:mod:`~trajstore.replay_buffer.episode_keys`) and, through :class:`DatasetKeys`, against the keys the
other shards have committed. The check and the commit run under an exclusive ``flock`` of the dataset's
``keys.lock``: two writers cannot both find a key absent and commit it. The kernel drops the lock when its
process dies, so a writer killed mid-commit never blocks the others; its commit is whole or absent (the
buffer's atomic metadata replace), and the next writer to take the lock sees which.

The other shards are read through read-only buffers kept open and refreshed under the lock; only the
episodes they closed since the last check are scanned (their log lines, not parsed one by one), so a
commit costs ``O(shards + new episodes)``.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from trajstore.errors import LockedError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.data_columns import MISSING
from trajstore.replay_buffer.episode_keys import KEY_FIELD
from trajstore.shards.layout import KEYS_LOCK, SHARDS_DIR, shard_names


class _ShardKeys:
    """The keys of one other shard, read so far."""

    def __init__(self, folder: Path):
        self.reader = ReplayBuffer.load_from(folder)
        self.keys: set[str] = set()
        self.scanned = 0  # closed episodes (positions) whose keys are in ``keys``; shards never drop episodes

    def update(self) -> set[str]:
        self.reader.refresh()
        episodes = self.reader.episodes
        closed = len(episodes)
        if closed and not (episodes[-1].done or episodes[-1].interrupted):
            closed -= 1  # the open episode has no data yet
        if closed > self.scanned:
            values = episodes.data_values(KEY_FIELD, start=self.scanned)[:closed - self.scanned]
            self.keys.update(v for v in values if v is not MISSING and isinstance(v, str))
            self.scanned = closed
        return self.keys

    def close(self) -> None:
        self.reader.close()


#: Seconds a keyed commit waits for another writer's commit (milliseconds, normally).
LOCK_TIMEOUT = 60.0


def _wait_for(fd: int, lock: Path) -> None:
    deadline, pause = time.monotonic() + LOCK_TIMEOUT, 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise LockedError(f"{lock}: another writer of the dataset has held the key lock for "
                                  f"{LOCK_TIMEOUT:.0f} s (stopped in its commit?); this episode was not "
                                  "committed: end_episode may be called again") from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


class DatasetKeys:
    """The :class:`~trajstore.replay_buffer.episode_keys.KeyGuard` of shard ``own`` of the dataset at ``root``."""

    def __init__(self, root: Path, own: str):
        self._root, self._own = Path(root), own
        self._others: dict[str, _ShardKeys] = {}

    def committed_elsewhere(self, key: str) -> bool:
        """Whether another shard has committed ``key`` (as seen now; take :meth:`claim` to act on it)."""
        for name in shard_names(self._root):
            if name == self._own:
                continue
            if name not in self._others:
                self._others[name] = _ShardKeys(self._root / SHARDS_DIR / name)
            if key in self._others[name].update():
                return True
        return False

    @contextmanager
    def claim(self, key: str) -> Iterator[bool]:
        """Held (exclusive ``flock`` of ``keys.lock``) while the shard commits ``key``; yields whether
        another shard has committed it already.

        Raises:
            LockedError: the lock stayed held for :data:`LOCK_TIMEOUT` seconds (a writer stopped in its
                commit: SIGSTOP, a debugger); nothing was committed.
        """
        lock = self._root / KEYS_LOCK
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            _wait_for(fd, lock)
            yield self.committed_elsewhere(key)
        finally:
            os.close(fd)  # drops the flock

    def close(self) -> None:
        for shard in self._others.values():
            shard.close()
        self._others.clear()
