"""``SpaceStorage``: the contract every storage implements.

A storage holds numbered *slots* (``0 .. len-1``) of values of one space. It never decides
where to write: the replay buffer's ring does. It reads and writes whole batches.

Two ways in:

* The public methods :meth:`~SpaceStorage.get`, :meth:`~SpaceStorage.set` and
  :meth:`~SpaceStorage.extend` take a user's index (an int, a slice with step >= 1, a 1-D
  integer array with any order and repeats, or a boolean mask) and values, check both once
  and hand them down.
* The trusted methods :meth:`~SpaceStorage.read`, :meth:`~SpaceStorage.read_leaves`,
  :meth:`~SpaceStorage.write_leaves` and :meth:`~SpaceStorage.extend_leaves` take a
  :class:`~trajstore.storages._selection.Selection` made once at the edge and *leaf lists*:
  one array per leaf of the space, in :func:`trajstore.spaces.tree.leaves` order, each with a
  leading batch axis. The replay buffer and :class:`DictStorage` use these: nothing is
  normalised, validated or re-nested twice.

A storage with a ``cache_path`` owns that folder (:class:`~trajstore._folder.FolderOwner`).
Its ``storage.json`` names its registered type, format version, space, capacity and JSON-only
config, so :meth:`SpaceStorage.load_from` reopens it without importing anything named in a file.

Subclasses declare ``options`` and implement ``_create``, ``_open``, ``get_config``, ``_read``,
``_write``, ``_resize`` and ``__len__``; they may override ``check_space``, ``_check_config``,
``flush``, ``refresh``, ``_close``, ``_after_fork`` and ``_read_some`` (reading a subset of the
leaves), and set the capability flags below.
"""

from __future__ import annotations

import abc
import os
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from trajstore._damage import damaged_file
from trajstore._folder import FolderOwner, fresh_folder, lock_for
from trajstore._fs import read_json, write_json_atomic
from trajstore._lock import WriterLock
from trajstore._registry import Registry
from trajstore._urls import refuse_remote_write
from trajstore.errors import FormatError, InvalidValueError, UnsupportedSpaceError
from trajstore.spaces import Space, space_from_json, tree
from trajstore.spaces.step_check import step_check
from trajstore.storages._options import Option, config_from
from trajstore.storages._selection import Selection, select, span

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


def stored_space(path: Path, stored: Any, expected: Space | None, parsed: Space | None = None) -> Space:
    """The space a folder records, checked against ``expected`` when given.

    The comparison is on the JSON forms, so an owner that knows the space (a buffer reopening
    its storage) pays no parsing. ``parsed``: ``stored`` already parsed, if it was.

    Raises:
        ValueError: ``expected`` differs from the stored space.
        FormatError, UnknownTypeError: the stored JSON is not a space.
    """
    if expected is not None and stored == expected.to_json():
        return expected
    space = parsed if parsed is not None else space_from_json(stored)
    if expected is not None and space != expected:
        raise ValueError(f"{path}: the given space differs from the stored one:\n"
                         f"  given:  {expected!r}\n  stored: {space!r}")
    return space


class SpaceStorage(FolderOwner, abc.ABC):
    """Slots holding values of ``space``; see the module docstring for the contract.

    Attributes:
        space: the space of one slot.
        capacity: number of slots, or ``None`` when the storage grows with :meth:`extend`.
        cache_path, read_only, multiprocessing, closed: see :class:`~trajstore._folder.FolderOwner`.
    """

    type_name: ClassVar[str]
    #: Version of this storage's on-disk format; bump it when the layout changes.
    format_version: ClassVar[int] = 1
    #: The storage writes files of its own, so ``create`` needs a ``cache_path``.
    requires_cache_path: ClassVar[bool] = False
    #: Overwriting an already written slot costs about what writing it did. False for video: a
    #: frame in a finished segment is re-pointed to a new segment, and the old one is kept on
    #: disk until none of its frames is live.
    supports_overwrite: ClassVar[bool] = True
    #: The keyword options of :meth:`create`, declared once (see :mod:`trajstore.storages._options`).
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, space: Space, *, capacity: int | None, cache_path: Path | None,
                 read_only: bool = False, multiprocessing: bool = False, lock: WriterLock | None = None):
        self.space = space
        self.capacity = capacity
        self._init_owner(cache_path, read_only=read_only, multiprocessing=multiprocessing, lock=lock,
                         owns_lock=False)

    # -- what the storage can take -----------------------------------------------------------
    @classmethod
    def check_space(cls, space: Space) -> None:
        """Raise :class:`UnsupportedSpaceError` (with the reason) if this storage cannot store ``space``."""

    @classmethod
    def check_space_with(cls, space: Space, options: Mapping[str, Any] | None = None) -> None:
        """Raise :class:`UnsupportedSpaceError` (with the reason) if ``create(space, **options)`` would
        refuse ``space``: :meth:`check_space`, then the cross checks of :meth:`_check_config` (where
        acceptance depends on an option, e.g. ``ImageStorage`` takes depth frames as PNG only).

        Raises:
            UnsupportedSpaceError: the storage cannot take ``space`` with these options.
            TypeError, ValueError: ``options`` names an undeclared option or a bad value.
        """
        cls.check_space(space)
        cls._check_config(space, config_from(cls.__name__, cls.options, options or {}))

    @classmethod
    def accepts(cls, space: Space, options: Mapping[str, Any] | None = None) -> bool:
        """True if :meth:`check_space_with` passes: the question the metadata router asks.

        Raises:
            TypeError, ValueError: as :meth:`check_space_with`, for bad ``options``.
        """
        try:
            cls.check_space_with(space, options)
        except UnsupportedSpaceError:
            return False
        return True

    @classmethod
    def metadata_options(cls) -> tuple[str, ...]:
        """Options the metadata router may take from a leaf's metadata (``("fps",)`` for video)."""
        return tuple(o.name for o in cls.options if o.from_metadata)

    @classmethod
    def _check_config(cls, space: Space, config: dict[str, Any]) -> dict[str, Any]:
        """Checks across options, or of options against the space; returns the config to store."""
        return config

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def prepare(cls, space: Space, *, capacity: int | None, cache_path: Any, **options: Any) -> Any:
        """Check everything :meth:`create` needs, touching nothing; returns what ``_create`` takes.

        Raises:
            ValueError, TypeError: a bad capacity or option; no ``cache_path`` for a storage that writes files.
            UnsupportedSpaceError: the storage cannot take ``space``.
        """
        refuse_remote_write(cache_path, f"{cls.__name__}.create")
        check_capacity(capacity)
        cls.check_space(space)
        if cache_path is None and cls.requires_cache_path:
            raise ValueError(f"{cls.__name__} writes files, so it needs a cache_path")
        return cls._check_config(space, config_from(cls.__name__, cls.options, options))

    @classmethod
    def create(cls, space: Space, *, capacity: int | None = None, cache_path: str | os.PathLike | None = None,
               multiprocessing: bool = False, **options: Any) -> "SpaceStorage":
        """A new, empty storage.

        Every argument is checked before any folder or file is made.

        Args:
            space: the space of one slot.
            capacity: number of slots (all exist from the start), or ``None`` to grow with :meth:`extend`.
            cache_path: a folder to create (an existing empty folder is accepted); ``None`` keeps
                the data in memory where the storage supports it.
            multiprocessing: allow other processes to read while this one writes.
            **options: the storage's declared ``options`` (see each storage).

        Raises:
            ValueError: a bad capacity or option value, or no ``cache_path`` for a storage that writes files.
            TypeError: an option the storage does not declare.
            UnsupportedSpaceError: the storage cannot take ``space``.
            StorageExistsError: ``cache_path`` is a file or a non-empty folder.
        """
        plan = cls.prepare(space, capacity=capacity, cache_path=cache_path, **options)
        with fresh_folder(cache_path) as (path, lock):
            storage = cls._create_owned(space, capacity=check_capacity(capacity), path=path, plan=plan,
                                        multiprocessing=multiprocessing, lock=lock)
        storage._owns_lock = True
        return storage

    @classmethod
    def _create_owned(cls, space: Space, *, capacity: int | None, path: Path | None, plan: Any,
                      multiprocessing: bool, lock: WriterLock | None) -> "SpaceStorage":
        """Create in ``path`` (made if missing) under a writer lock held by the caller; no checks."""
        if path is not None:
            path.mkdir(exist_ok=True)
        storage = cls._create(space, capacity=capacity, path=path, config=plan, multiprocessing=multiprocessing,
                              lock=lock)
        if path is not None:
            write_json_atomic(path / STORAGE_FILE, storage.descriptor())
        return storage

    @classmethod
    def load_from(cls, path: str | os.PathLike, space: Space | None = None, *, capacity: Any = "stored",
                  read_only: bool = True, multiprocessing: bool = False) -> "SpaceStorage":
        """Reopen a storage folder written by :meth:`create`.

        Called on ``SpaceStorage`` itself, the type is looked up by the registered name in
        ``storage.json``; called on a subclass, the name must match it. A writer takes the
        folder's ``writer.lock``.

        Args:
            space, capacity: if given, must equal what the folder records (a check, not an override).

        Raises:
            FormatError: no/corrupt ``storage.json``, another storage type, a newer format version, or a
                missing or damaged file of the storage (the message names it, or the storage folder).
            UnknownTypeError: the recorded type is not registered.
            ValueError: ``space`` or ``capacity`` differ from the recorded ones.
            LockedError: ``read_only=False`` while another writer holds the folder.
        """
        path = Path(path)
        lock = lock_for(path, read_only) if (path / STORAGE_FILE).exists() else None
        try:
            storage = cls._load_owned(path, space, capacity=capacity, read_only=read_only,
                                      multiprocessing=multiprocessing, lock=lock)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        storage._owns_lock = True
        return storage

    @classmethod
    def _load_owned(cls, path: Path, space: Space | None, *, capacity: Any, read_only: bool,
                    multiprocessing: bool, lock: WriterLock | None) -> "SpaceStorage":
        """Reopen ``path``; a writer's lock is held by the caller (this storage's or its owner's).

        Damage is reported where it is found: ``storage.json`` while it is parsed, the storage's own
        files while ``_open`` reads them (:func:`~trajstore._damage.damaged_file`). A space or
        capacity that differs from the given one is a ``ValueError`` (the caller's to word: a
        buffer's metadata names them).
        """
        with damaged_file(path / STORAGE_FILE):
            desc = read_json(path / STORAGE_FILE, "storage descriptor")
            if not isinstance(desc, dict) or "type" not in desc:
                raise FormatError(f"{path / STORAGE_FILE} has no 'type' field")
            target = STORAGE_TYPES.get(desc["type"]) if cls is SpaceStorage else cls
            if desc["type"] != target.type_name:
                raise FormatError(f"{path} holds a {desc['type']!r} storage, not {target.type_name!r}")
            if int(desc.get("format_version", 0)) > target.format_version:
                raise FormatError(f"{path}: format version {desc.get('format_version')} is newer than this "
                                  f"trajstore reads ({target.format_version}); upgrade trajstore")
            stored = desc.get("space")
            parsed = None if space is not None and stored == space.to_json() else space_from_json(stored)
            stored_capacity = desc.get("capacity")
            if stored_capacity is not None:
                check_capacity(stored_capacity)
        the_space = stored_space(path, stored, space, parsed)
        if capacity != "stored" and check_capacity(capacity) != stored_capacity:
            raise ValueError(f"{path}: capacity {capacity!r} differs from the stored {stored_capacity!r}")
        with damaged_file(path):
            config = target._config_for_open(path, the_space, desc.get("config", {}))
            return target._open(path, the_space, capacity=stored_capacity, config=config, read_only=read_only,
                                multiprocessing=multiprocessing, lock=lock)

    @classmethod
    def _config_for_open(cls, path: Path, space: Space, stored: Any) -> Any:
        """The stored config, checked by the same declared options as at create."""
        try:
            if not isinstance(stored, dict):
                raise TypeError(f"expected a JSON object, got {stored!r:.100}")
            return cls._check_config(space, config_from(cls.__name__, cls.options, stored))
        except (TypeError, ValueError) as exc:
            raise FormatError(f"{path}: bad {cls.__name__} config in {STORAGE_FILE}: {exc}") from None

    def descriptor(self) -> dict[str, Any]:
        """The JSON content of ``storage.json``."""
        return {"type": self.type_name, "format_version": self.format_version, "space": self.space.to_json(),
                "capacity": self.capacity, "config": self.get_config()}

    @classmethod
    @abc.abstractmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, config: Any,
                multiprocessing: bool, lock: WriterLock | None) -> "SpaceStorage":
        """Make the files (``path`` exists and is empty) and return the open storage.

        ``config`` is what :meth:`prepare` returned; ``lock`` is the writer lock held for this folder.
        """

    @classmethod
    @abc.abstractmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: Any, read_only: bool,
              multiprocessing: bool, lock: WriterLock | None) -> "SpaceStorage":
        """Open existing files; ``config`` is the checked stored config (:meth:`_config_for_open`)."""

    @abc.abstractmethod
    def get_config(self) -> dict[str, Any]:
        """JSON-only options needed to reopen the storage (e.g. ``{"format": "JPEG", "quality": 90}``)."""

    @property
    def lossless(self) -> bool:
        """Whether :meth:`get` returns exactly what :meth:`set` was given (False for JPEG, video)."""
        return True

    def parts(self) -> dict[str, "SpaceStorage"]:
        """The storages this one is made of, by key (a composite such as :class:`DictStorage`:
        ``{"observation/pixels": ImageStorage, "*": HDF5Storage}``); ``{}`` for a storage that holds
        its leaves itself. Callers that walk a layout use this, never the composite's attributes."""
        return {}

    # -- slots: the contract ---------------------------------------------------------------
    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of slots: ``capacity``, or the number appended so far when unbounded."""

    @abc.abstractmethod
    def _read(self, sel: Selection) -> list[np.ndarray]:
        """One array per leaf, rows in ``sel.slots`` order (sorted, unique, in range)."""

    @abc.abstractmethod
    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        """Write validated leaf arrays (rows in ``sel.slots`` order) at ``sel.slots``."""

    @abc.abstractmethod
    def _resize(self, length: int) -> None:
        """Set an unbounded storage's length: grow (new slots are written right after) or shrink
        back after a failed write (the slots past ``length`` are forgotten)."""

    # -- trusted paths (the edge has checked everything) ------------------------------------
    def read_leaves(self, sel: Selection, which: Sequence[int] | None = None) -> list[np.ndarray]:
        """Leaf arrays at ``sel.slots`` in slot order (no reordering, no nesting).

        ``which``: positions of the leaves wanted, in :func:`trajstore.spaces.tree.leaves` order,
        increasing and unique (trusted); ``None`` for every leaf. Only those leaves are read where
        the storage keeps leaves apart (:meth:`_read_some`).
        """
        self._check_open()
        if self.cache_path is None:
            return self._read(sel) if which is None else self._read_some(sel, which)
        # The storage's files are parsed here: damage found while reading them is a FormatError
        # naming the storage folder, unless the storage named the file itself.
        with damaged_file(self.cache_path, f"reading {type(self).__name__} slots"):
            return self._read(sel) if which is None else self._read_some(sel, which)

    def _read_some(self, sel: Selection, which: Sequence[int]) -> list[np.ndarray]:
        """The leaves at positions ``which``; this default reads them all and keeps those. A storage
        that can read one leaf without the others overrides it (``DictStorage``, ``HDF5Storage``)."""
        leaves = self._read(sel)
        return [leaves[i] for i in which]

    def read(self, sel: Selection) -> Any:
        """The value at a selection, in the requested order and nesting (see :meth:`get`)."""
        leaves = self.read_leaves(sel)
        if sel.order is not None:
            leaves = [v[sel.order] for v in leaves]
        if sel.scalar:
            leaves = [v[0] for v in leaves]
        return tree.unflatten(self.space, leaves)

    def write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        """Write validated leaf arrays given in the requested order of ``sel`` (last repeat wins)."""
        rows = sel.last_writes()
        if rows is not None:
            leaves = [v[rows] for v in leaves]
        if len(sel.slots):
            self.write_leaves(sel.in_slot_order(), leaves)

    def write_leaves(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        """Write validated leaf arrays whose rows are in ``sel.slots`` order."""
        self._check_writable()
        self._write(sel, leaves)

    def extend_leaves(self, leaves: list[np.ndarray], n: int) -> slice:
        """Append ``n`` validated rows per leaf to an unbounded storage; returns the slice of the new slots.

        A write that fails (a codec error, a full disk) leaves the length as it was.
        """
        self._check_writable()
        if self.capacity is not None:
            raise TypeError(f"{type(self).__name__} has a fixed capacity of {self.capacity}; write slots with set()")
        start = len(self)
        if n:
            self._resize(start + n)
            try:
                self._write(span(start, start + n), leaves)
            except BaseException:
                self._resize(start)
                raise
        return slice(start, start + n)

    # -- the public edge -------------------------------------------------------------------
    def get(self, index: Any) -> Any:
        """Values at ``index``: one value for an int, else a batch with a leading axis ``N``.

        Raises:
            IndexError, TypeError, ValueError: a bad index (see :func:`~trajstore.storages._selection.select`).
        """
        self._check_open()
        return self.read(select(index, len(self)))

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
        sel = select(index, len(self))
        self.write(sel, validated_for(self.space, value, sel))

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
        leaves, n = validated_batch(self.space, value)
        return self.extend_leaves(leaves, n)

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
            self._release_lock()
            self.closed = True

    def _close(self) -> None:
        """Release handles; called once by :meth:`close`."""

    def _reopen_args(self) -> tuple[Any, ...]:
        return (_reopen, (self.type_name, str(self.cache_path), self.multiprocessing))

    def __repr__(self) -> str:
        where = self.cache_path or "memory"
        return f"{type(self).__name__}({where}, slots={len(self)}, capacity={self.capacity})"


def validated_step(space: Space, value: Any, *, check_bounds: bool = True) -> list[np.ndarray]:
    """One value of ``space``, validated, as leaf arrays with a leading axis of 1.

    ``check_bounds=False`` stores values outside a leaf's bounds (and NaN) as they are.

    Raises:
        InvalidValueError: names the leaf and what was expected.
    """
    return step_check(space, check_bounds).validate(value)  # one pass; the full validation where it refuses


def validated_batch(space: Space, value: Any, *, check_bounds: bool = True) -> tuple[list[np.ndarray], int]:
    """A batch of ``space`` (every leaf with the same leading axis ``N``), validated: ``(leaf arrays, N)``.

    Raises:
        InvalidValueError: names the leaf and what was expected, or two leaves whose ``N`` differ.
    """
    leaves = tree.flatten(space, space.validate(value, batched=True, check_bounds=check_bounds))
    return leaves, (len(leaves[0]) if leaves else 0)


def validated_for(space: Space, value: Any, sel: Selection, *, check_bounds: bool = True) -> list[np.ndarray]:
    """``value`` validated for a write at ``sel``: one value for an int index, else a batch of ``sel.size``.

    Raises:
        InvalidValueError: names the leaf and what was expected, or the batch and index sizes.
    """
    if sel.scalar:
        return validated_step(space, value, check_bounds=check_bounds)
    leaves, n = validated_batch(space, value, check_bounds=check_bounds)
    if n != sel.size:
        raise InvalidValueError(f"the index selects {sel.size} slots but the value has a batch of {n}")
    return leaves


def _reopen(type_name: str, path: str, multiprocessing: bool) -> SpaceStorage:
    return STORAGE_TYPES.get(type_name).load_from(path, read_only=True, multiprocessing=multiprocessing)
