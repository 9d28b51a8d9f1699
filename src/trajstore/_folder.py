"""One owner per folder: creation, the writer lock, fork detection and pickling by path.

A replay buffer and a storage opened on its own each own their folder through
:class:`FolderOwner`; sub-storages inside it (a :class:`DictStorage`'s children, the
buffer's storage) are *owned*: they share the owner's :class:`~trajstore._lock.WriterLock`
instead of taking one of their own, so one buffer holds one ``writer.lock``.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from trajstore._held_files import refuse_writer_while_read
from trajstore._lock import LOCK_FILE, WriterLock
from trajstore.errors import LockedError, ReadOnlyError, StorageExistsError
from trajstore._fs import make_fresh_dir, remove_made


@contextmanager
def fresh_folder(cache_path: str | os.PathLike | None) -> Iterator[tuple[Path | None, WriterLock | None]]:
    """Make ``cache_path`` a new folder and hold its writer lock; undo both if the body raises.

    Yields ``(None, None)`` for an in-memory object (``cache_path=None``).

    Raises:
        StorageExistsError: ``cache_path`` is a file or a non-empty folder (nothing is touched).
        OSError: the writer lock file cannot be written (a full disk): the folder made is removed again.
    """
    if cache_path is None:
        yield None, None
        return
    path = Path(cache_path)
    existed = path.exists()
    top = path  # the highest folder this call makes (parents included), removed on failure
    while not existed and not top.parent.exists():
        top = top.parent
    path = make_fresh_dir(path)

    def undo() -> None:
        if existed or top == path:
            remove_made(path, existed)
        else:
            remove_made(top, False)

    lock = WriterLock(path)
    try:
        lock.acquire()
    except LockedError:  # another create won the race: its folder is not ours to remove
        raise StorageExistsError(f"{path} is being created by another writer") from None
    except BaseException:  # the lock file could not be written (a full disk): remove what this call made
        if not any(p.name != LOCK_FILE for p in path.iterdir()):
            undo()
        raise
    if any(p.name != LOCK_FILE for p in path.iterdir()):  # made and filled by a writer that has closed
        lock.release()
        raise StorageExistsError(f"{path} already exists and is not an empty folder; load it with load_from")
    try:
        yield path, lock
    except BaseException:  # a failed create (any error, a full disk included) leaves nothing behind
        lock.release()
        undo()
        raise


def owning_folders(path: Path, levels: int = 8) -> tuple[Path, ...]:
    """Folders above ``path`` that hold a buffer or a storage (and so own ``path``), nearest first."""
    out = []
    for parent in list(Path(path).resolve().parents)[:levels]:
        if (parent / "trajstore.json").exists() or (parent / "storage.json").exists():
            out.append(parent)
    return tuple(out)


def lock_for(path: Path, read_only: bool) -> WriterLock | None:
    """The writer lock of ``path``, acquired, for a writer; ``None`` for a reader.

    Raises:
        AlreadyOpenError: this process holds a file of the folder open for reading that a writer
            could not open too (:mod:`trajstore._held_files`); checked before any lock file is made.
        LockedError: another writer holds it.
    """
    if read_only:
        return None
    refuse_writer_while_read(path)
    lock = WriterLock(path, also=owning_folders(path))
    lock.acquire()
    return lock


class constructor(classmethod):
    """A classmethod that builds a new object (``create``, ``load_from``) and refuses to be called
    on an instance: ``rb.load_from(path)`` would return a new buffer and leave ``rb`` as it was,
    which reads like reloading ``rb``. Accessing it on an instance is fine; calling raises.

    Raises:
        TypeError: when called on an instance; names the class to call it on.
    """

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return super().__get__(obj, objtype)
        name, owner = self.__func__.__name__, type(obj).__name__

        def called_on_an_instance(*args: Any, **kwargs: Any) -> Any:
            raise TypeError(f"{owner}.{name} is a constructor: call it on the class, {owner}.{name}(...), not "
                            f"on an instance (it returns a new object and leaves this one unchanged)")

        return called_on_an_instance


#: Class methods of every :class:`FolderOwner` subclass that build new objects (see :class:`constructor`).
CONSTRUCTORS = ("create", "load_from")


class FolderOwner:
    """What a buffer and a storage share: open/closed state, read-only, the lock, fork detection.

    Its constructors (:data:`CONSTRUCTORS`, in every subclass, overrides included) are
    :class:`constructor` descriptors: called on an instance they raise ``TypeError``.

    Attributes:
        cache_path: the folder, or ``None`` in memory.
        read_only: writes raise :class:`~trajstore.errors.ReadOnlyError`.
        multiprocessing: other processes read the folder while this one writes it. Every file
            trajstore writes is safe for concurrent readers either way; the flag is kept in the
            folder so that copies sent to other processes (pickling) reopen the same way, and it
            makes HDF5 readers of a non-SWMR file open in SWMR mode.
        closed: :meth:`close` was called.
    """

    cache_path: Path | None
    read_only: bool
    multiprocessing: bool
    closed: bool

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in CONSTRUCTORS:
            found = cls.__dict__.get(name)
            if isinstance(found, classmethod) and not isinstance(found, constructor):
                setattr(cls, name, constructor(found.__func__))

    def _init_owner(self, cache_path: Path | None, *, read_only: bool, multiprocessing: bool,
                    lock: WriterLock | None, owns_lock: bool) -> None:
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.read_only = read_only
        self.multiprocessing = multiprocessing
        self.closed = False
        self._pid = os.getpid()
        self._lock = lock  # the writer lock of this folder or of the folder that owns it
        self._owns_lock = owns_lock

    @property
    def holds_writer_lock(self) -> bool:
        """True while this object (or the folder that owns it) holds the writer lock, in this process."""
        return self._lock is not None and self._lock.held and not self.read_only

    def _release_lock(self) -> None:
        if self._lock is not None and self._owns_lock:
            self._lock.release()
        self._lock = None

    def _check_open(self) -> None:
        """Raise on a closed object; in a forked child, switch to read-only first (:meth:`_after_fork`)."""
        if self.closed:
            raise ValueError(f"{type(self).__name__} at {self.cache_path or 'memory'} is closed")
        if os.getpid() != self._pid:
            # A forked child never writes through its parent's files and never holds its lock.
            self._pid = os.getpid()
            self.read_only = True
            self._release_lock()
            self._after_fork()

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"{type(self).__name__} at {self.cache_path} is read-only; "
                                "open it with read_only=False to write")

    def _after_fork(self) -> None:
        """In a forked child: drop handles inherited from the parent and see the folder read-only."""

    def _reopen_args(self) -> tuple[Any, ...]:
        """What :meth:`__reduce__` passes to the module-level reopen function."""
        raise NotImplementedError

    def __reduce__(self) -> Any:
        """Pickle as a reference to the folder; the copy reopens it read-only in the new process."""
        if self.cache_path is None:
            raise TypeError(f"an in-memory {type(self).__name__} cannot be pickled or sent to another "
                            "process; create it with a cache_path")
        return self._reopen_args()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()  # type: ignore[attr-defined]
