"""The writer lock of a folder (a buffer's, or a storage's): one writer at a time, any number of readers.

An advisory ``flock`` on ``writer.lock``: the kernel drops it when the process dies, so a
crashed writer never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from trajstore.errors import LockedError

LOCK_FILE = "writer.lock"


class WriterLock:
    """Held from :meth:`acquire` until :meth:`release` (or process exit).

    ``also``: folders whose locks are taken with this one, all or none: the folders that own
    this one (a storage opened on its own inside a buffer also holds the buffer's lock, so the
    buffer's writer and it can never write the same files at once).
    """

    def __init__(self, folder: Path, also: tuple[Path, ...] = ()):
        self.path = Path(folder) / LOCK_FILE
        self._fd: int | None = None
        self._pid = os.getpid()
        self._also = [WriterLock(f) for f in also]

    def acquire(self) -> None:
        """Raises:
            LockedError: another process (or another open buffer here) is writing this folder or
                a folder that owns it.
            OSError: a lock file cannot be made or written (a full disk); no lock is held.

        The lock files that exist already are tried first: a folder that is being written makes
        this call fail before it has created any ``writer.lock`` (a refused open leaves no file).
        """
        order = sorted([self, *self._also], key=lambda lock: not lock.path.exists())
        taken: list[WriterLock] = []
        try:
            for lock in order:
                lock._acquire_one()
                taken.append(lock)
        except BaseException:
            for lock in reversed(taken):
                lock._release_one()
            raise

    def _acquire_one(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockedError(f"{self.path.parent} is open for writing elsewhere (another process, or another "
                              "object in this one); open it with read_only=True, or close the writer first") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:  # a full disk: not held, nothing left open
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        self._fd = fd
        self._pid = os.getpid()

    @property
    def held(self) -> bool:
        """True in the process that acquired the lock, until :meth:`release`."""
        return self._fd is not None and os.getpid() == self._pid

    def release(self) -> None:
        for lock in self._also:
            lock._release_one()
        self._release_one()

    def _release_one(self) -> None:
        # A forked child shares the lock: closing its copy of the fd does not unlock the parent.
        if self._fd is not None:
            if os.getpid() == self._pid:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
