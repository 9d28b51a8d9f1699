"""``SpaceStorage``: the contract every storage implements.

A storage holds numbered *slots* (physical positions ``0 .. len-1``) of values of one
space. It never decides where to write: the replay buffer's ring does. It reads and
writes whole batches: :meth:`get` and :meth:`set` take an int, a slice (step >= 1), a
1-D integer array (unsorted and repeated entries allowed) or a boolean mask.

A storage with a ``cache_path`` owns that folder. Its ``storage.json`` names its
registered type, format version, space, capacity and JSON-only config, so
:meth:`SpaceStorage.load_from` can reopen it without importing anything named in a file.

Subclasses implement ``_create``, ``_open``, ``get_config``, ``_read``, ``_write``,
``_resize`` and ``__len__``; they may override ``check_space``, ``flush``, ``refresh``,
``_close`` and ``_after_fork``, and set the capability flags below.
"""

from __future__ import annotations

import abc
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from trajstore._lock import WriterLock
from trajstore._registry import Registry
from trajstore.errors import FormatError, InvalidValueError, ReadOnlyError, UnsupportedSpaceError
from trajstore.spaces import Space, map_leaves, space_from_json
from trajstore.storages._files import make_fresh_dir, read_json, remove_made, write_json_atomic
from trajstore.storages._index import Selection, last_writes, normalize_index

#: Registry of storage type names (``"hdf5"``, ``"image"``, ``"dict"``, ...).
STORAGE_TYPES: Registry = Registry("storage")

#: Name of the descriptor file inside every storage folder.
STORAGE_FILE = "storage.json"


def check_capacity(capacity: Any) -> int | None:
    """``None`` (unbounded) or a positive int.

    Raises:
        ValueError: 0, a negative number, or a non-integer.
    """
    if capacity is None:
        return None
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity must be None (unbounded) or an int >= 1, got {capacity!r}")
    return int(capacity)


class SpaceStorage(abc.ABC):
    """Slots holding values of ``space``; see the module docstring for the contract.

    Attributes:
        space: the space of one slot.
        capacity: number of slots, or ``None`` when the storage grows with :meth:`extend`.
        cache_path: the folder the storage owns, or ``None`` for an in-memory storage.
        read_only: writes raise :class:`~trajstore.errors.ReadOnlyError`.
        multiprocessing: the storage may be read from other processes while it is written;
            file handles are opened per process.
    """

    type_name: ClassVar[str]
    #: Version of this storage's on-disk format; bump it when the layout changes.
    format_version: ClassVar[int] = 1
    #: The storage writes files of its own, so ``create`` needs a ``cache_path``.
    requires_cache_path: ClassVar[bool] = False
    #: ``set`` on an already written slot is cheap (False for video: it re-encodes).
    supports_overwrite: ClassVar[bool] = True
    #: Metadata keys of the space that the router passes as keyword arguments (video: ``fps``).
    kwargs_from_metadata: ClassVar[tuple[str, ...]] = ()

    def __init__(self, space: Space, *, capacity: int | None, cache_path: Path | None,
                 read_only: bool = False, multiprocessing: bool = False):
        self.space = space
        self.capacity = capacity
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.read_only = read_only
        self.multiprocessing = multiprocessing
        self.closed = False
        self._pid = os.getpid()
        self._lock: WriterLock | None = None  # held by a writer with a cache_path

    # -- what the storage can take -----------------------------------------------------------
    @classmethod
    def check_space(cls, space: Space) -> None:
        """Raise :class:`UnsupportedSpaceError` (with the reason) if this storage cannot store ``space``."""

    @classmethod
    def accepts(cls, space: Space) -> bool:
        """True if :meth:`check_space` passes: the question the metadata router asks."""
        try:
            cls.check_space(space)
        except UnsupportedSpaceError:
            return False
        return True

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(cls, space: Space, *, capacity: int | None = None, cache_path: str | os.PathLike | None = None,
               multiprocessing: bool = False, **kwargs: Any) -> "SpaceStorage":
        """A new, empty storage.

        Args:
            space: the space of one slot.
            capacity: number of slots (all exist from the start), or ``None`` to grow with :meth:`extend`.
            cache_path: a folder to create (an existing empty folder is accepted); ``None`` keeps
                the data in memory where the storage supports it.
            multiprocessing: allow other processes to read while this one writes.
            **kwargs: storage-specific options (see each storage).

        Raises:
            ValueError: a bad capacity, or no ``cache_path`` for a storage that writes files.
            UnsupportedSpaceError: the storage cannot take ``space``.
            StorageExistsError: ``cache_path`` is a file or a non-empty folder.
        """
        capacity = check_capacity(capacity)
        cls.check_space(space)
        if cache_path is None and cls.requires_cache_path:
            raise ValueError(f"{cls.__name__} writes files, so it needs a cache_path")
        existed = cache_path is not None and Path(cache_path).exists()
        path = make_fresh_dir(cache_path) if cache_path is not None else None
        lock = None
        try:
            if path is not None:
                lock = WriterLock(path)
                lock.acquire()
            storage = cls._create(space, capacity=capacity, path=path, multiprocessing=multiprocessing, **kwargs)
            if path is not None:
                write_json_atomic(path / STORAGE_FILE, storage.descriptor())
        except BaseException:
            if lock is not None:
                lock.release()
            if path is not None:
                remove_made(path, existed)
            raise
        storage._lock = lock
        return storage

    @classmethod
    def load_from(cls, path: str | os.PathLike, space: Space | None = None, *, capacity: Any = "stored",
                  read_only: bool = True, multiprocessing: bool = False) -> "SpaceStorage":
        """Reopen a storage folder written by :meth:`create`.

        Called on ``SpaceStorage`` itself, the type is looked up by the registered name in
        ``storage.json``; called on a subclass, the name must match it.

        Args:
            space, capacity: if given, must equal what the folder records (a check, not an override).

        Raises:
            FormatError: no/corrupt ``storage.json``, another storage type, or a newer format version.
            UnknownTypeError: the recorded type is not registered.
            ValueError: ``space`` or ``capacity`` differ from the recorded ones.
        """
        path = Path(path)
        desc = read_json(path / STORAGE_FILE, "storage descriptor")
        if not isinstance(desc, dict) or "type" not in desc:
            raise FormatError(f"{path / STORAGE_FILE} has no 'type' field")
        target = STORAGE_TYPES.get(desc["type"]) if cls is SpaceStorage else cls
        if desc["type"] != target.type_name:
            raise FormatError(f"{path} holds a {desc['type']!r} storage, not {target.type_name!r}")
        if int(desc.get("format_version", 0)) > target.format_version:
            raise FormatError(f"{path}: format version {desc.get('format_version')} is newer than this "
                              f"trajstore reads ({target.format_version}); upgrade trajstore")
        stored_space = space_from_json(desc["space"])
        if space is not None and space != stored_space:
            raise ValueError(f"{path}: the given space differs from the stored one:\n"
                             f"  given:  {space!r}\n  stored: {stored_space!r}")
        stored_capacity = desc.get("capacity")
        if capacity != "stored" and check_capacity(capacity) != stored_capacity:
            raise ValueError(f"{path}: capacity {capacity!r} differs from the stored {stored_capacity!r}")
        lock = None
        if not read_only:  # one writer per folder, also when a storage is opened on its own
            lock = WriterLock(path)
            lock.acquire()
        try:
            storage = target._open(path, stored_space, capacity=stored_capacity, config=desc.get("config", {}),
                                   read_only=read_only, multiprocessing=multiprocessing)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        storage._lock = lock
        return storage

    def descriptor(self) -> dict[str, Any]:
        """The JSON content of ``storage.json``."""
        return {"type": self.type_name, "format_version": self.format_version, "space": self.space.to_json(),
                "capacity": self.capacity, "config": self.get_config()}

    @classmethod
    @abc.abstractmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, multiprocessing: bool,
                **kwargs: Any) -> "SpaceStorage":
        """Make the files (``path`` exists and is empty) and return the open storage."""

    @classmethod
    @abc.abstractmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: dict[str, Any],
              read_only: bool, multiprocessing: bool) -> "SpaceStorage":
        """Open existing files; ``config`` is what :meth:`get_config` returned at create time."""

    @abc.abstractmethod
    def get_config(self) -> dict[str, Any]:
        """JSON-only options needed to reopen the storage (e.g. ``{"format": "JPEG", "quality": 95}``)."""

    @property
    def lossless(self) -> bool:
        """Whether :meth:`get` returns exactly what :meth:`set` was given (False for JPEG, video)."""
        return True

    # -- slots -----------------------------------------------------------------------------
    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of slots: ``capacity``, or the number appended so far when unbounded."""

    @abc.abstractmethod
    def _read(self, positions: np.ndarray) -> Any:
        """Batched value at sorted unique ``positions`` (int64, shape ``(M,)``)."""

    @abc.abstractmethod
    def _write(self, positions: np.ndarray, value: Any) -> None:
        """Write a validated batched value at sorted unique ``positions``."""

    @abc.abstractmethod
    def _resize(self, length: int) -> None:
        """Grow an unbounded storage to ``length`` slots (new slots are written right after)."""

    def get(self, index: Any) -> Any:
        """Values at ``index``: one value for an int, else a batch with a leading axis ``N``.

        Raises:
            IndexError, TypeError, ValueError: a bad index (see :func:`normalize_index`).
        """
        self._check_open()
        sel = normalize_index(index, len(self))
        batch = self._read(sel.positions)
        return self._finish_read(sel, batch)

    def __getitem__(self, index: Any) -> Any:
        return self.get(index)

    def set(self, index: Any, value: Any) -> None:
        """Write ``value`` at ``index`` (one value for an int, else a batch of the index's size).

        The whole value is validated before anything is written; for repeated indices the last wins.

        Raises:
            ReadOnlyError: the storage was opened read-only.
            InvalidValueError: ``value`` does not fit the space (names the leaf) or the index size.
        """
        self._check_writable()
        sel = normalize_index(index, len(self))
        batch = self._validate(value, sel)
        rows = last_writes(sel)
        if rows is not None:
            batch = map_leaves(self.space, batch, lambda v: v[rows])
        if len(sel.positions):
            self._write(sel.positions, batch)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.set(index, value)

    def extend(self, value: Any) -> slice:
        """Append a batch to an unbounded storage; returns the slice of the new slots.

        Raises:
            TypeError: the storage has a fixed capacity (use :meth:`set`).
            ReadOnlyError, InvalidValueError: as :meth:`set`.
        """
        self._check_writable()
        if self.capacity is not None:
            raise TypeError(f"{type(self).__name__} has a fixed capacity of {self.capacity}; write slots with set()")
        batch = self.space.validate(value, batched=True)
        n = _batch_len(self.space, batch)
        start = len(self)
        if n:
            self._resize(start + n)
            self._write(np.arange(start, start + n, dtype=np.int64), batch)
        return slice(start, start + n)

    def _validate(self, value: Any, sel: Selection) -> Any:
        if sel.scalar:
            one = self.space.validate(value, batched=False)
            return map_leaves(self.space, one, lambda v: np.asarray(v, dtype=getattr(v, "dtype", None))[None])
        batch = self.space.validate(value, batched=True)
        n = _batch_len(self.space, batch)
        if n != sel.size:
            raise InvalidValueError(f"index selects {sel.size} slots but the value has a batch of {n}")
        return batch

    def _finish_read(self, sel: Selection, batch: Any) -> Any:
        if sel.inverse is not None:
            batch = map_leaves(self.space, batch, lambda v: v[sel.inverse])
        if sel.scalar:
            return map_leaves(self.space, batch, lambda v: v[0])
        return batch

    # -- state -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Make every write so far durable on disk (fsync where the format allows)."""

    def refresh(self) -> None:
        """See what another process has flushed since this one opened (readers of a live writer)."""

    def close(self) -> None:
        """Flush (if writable) and release files; further use raises ``ValueError``. Idempotent."""
        if self.closed:
            return
        if os.getpid() != self._pid:
            self._check_open()  # a forked child: drop the parent's handles first, never flush them
        try:
            if not self.read_only:
                self.flush()
            self._close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            self.closed = True

    def _close(self) -> None:
        """Release handles; called once by :meth:`close`."""

    def _after_fork(self) -> None:
        """Drop handles inherited from the parent without closing them, and reopen read-only."""

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{type(self).__name__} at {self.cache_path} is closed")
        if os.getpid() != self._pid:
            # A forked child never writes through its parent's handles.
            self._pid = os.getpid()
            self.read_only = True
            self._after_fork()

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"{type(self).__name__} at {self.cache_path} is read-only; "
                                "open it with read_only=False to write")

    def __enter__(self) -> "SpaceStorage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Any:
        """Pickle as a reference to the folder; the copy reopens it read-only in the new process."""
        if self.cache_path is None:
            raise TypeError(f"an in-memory {type(self).__name__} cannot be pickled or sent to another "
                            "process; create it with a cache_path")
        return (_reopen, (self.type_name, str(self.cache_path), self.multiprocessing))

    def __repr__(self) -> str:
        where = self.cache_path or "memory"
        return f"{type(self).__name__}({where}, slots={len(self)}, capacity={self.capacity})"


def _reopen(type_name: str, path: str, multiprocessing: bool) -> SpaceStorage:
    return STORAGE_TYPES.get(type_name).load_from(path, read_only=True, multiprocessing=multiprocessing)


def _batch_len(space: Space, batch: Any) -> int:
    from trajstore.spaces import check_batch_size

    return check_batch_size(space, batch)
