"""``StorageClass``: the class side of the storage contract (:class:`~trajstore.storages.base.SpaceStorage`).

What a storage type declares and does before an instance exists: its registered name, format
version, capability flags and options; which spaces it takes; which of its files are payload; how a
new folder is checked and made (``prepare``/``create``) and how an existing one is reopened from its
``storage.json`` (``load_from``, with the payload source given explicitly). The slots themselves
(reads, writes, state) are the instance side, in :mod:`trajstore.storages.base`.
"""

from __future__ import annotations

import abc
import os
from pathlib import Path
from typing import Any, ClassVar, Mapping

from trajstore._damage import damaged_file
from trajstore._folder import constructor, fresh_folder, lock_for
from trajstore._fs import write_json_atomic
from trajstore._lock import WriterLock
from trajstore._suggest import check_keywords
from trajstore.damage import DamagedDataError
from trajstore._urls import refuse_remote_write
from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import Space
from trajstore.storages._opening import STORAGE_FILE, read_descriptor
from trajstore.storages._options import Option, config_from
from trajstore.storages._payload import PayloadSource
from trajstore.storages._validation import check_capacity


class StorageClass(abc.ABC):
    """Class attributes and class methods every storage has; see the module docstring."""

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
    #: Globs (``fnmatch``, ``/``-separated, relative to the storage folder) of the storage's *payload*
    #: files: big files read by byte range or whole, written once or append-only, which a published
    #: copy keeps in object storage and reads on demand (``("chunks/*.bin",)`` for images). Every other
    #: file of the folder is *small* (metadata, indexes, HDF5, memmap data): a published copy fetches
    #: it at open. :func:`trajstore.storages.files.list_files` classifies a folder by these.
    payload_files: ClassVar[tuple[str, ...]] = ()
    #: ``_open`` takes ``payload=``: the :class:`~trajstore.storages._payload.PayloadSource` of the
    #: storage's folder, or ``None`` for local disk. True for a storage with payload files and for a
    #: composite (it hands each part the source of the part's folder).
    takes_payload: ClassVar[bool] = False

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
    def create_keywords(cls) -> tuple[str, ...]:
        """The keywords :meth:`create` takes besides ``capacity``, ``cache_path`` and ``multiprocessing``:
        the declared options' names (a composite storage names its own); for the messages that suggest
        the closest name to a misspelt one (:mod:`trajstore._suggest`)."""
        return tuple(o.name for o in cls.options)

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

    @constructor  # a classmethod that refuses to be called on an instance
    def create(cls, space: Space, *, capacity: int | None = None, cache_path: str | os.PathLike | None = None,
               multiprocessing: bool = False, **options: Any) -> Any:
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
            TypeError: an option the storage does not declare (the message suggests the closest keyword).
            UnsupportedSpaceError: the storage cannot take ``space``.
            StorageExistsError: ``cache_path`` is a file or a non-empty folder.
        """
        check_keywords(options, ("capacity", "cache_path", "multiprocessing", *cls.create_keywords()),
                       passed_to=f"{cls.__name__}.create")
        plan = cls.prepare(space, capacity=capacity, cache_path=cache_path, **options)
        with fresh_folder(cache_path) as (path, lock):
            storage = cls._create_owned(space, capacity=check_capacity(capacity), path=path, plan=plan,
                                        multiprocessing=multiprocessing, lock=lock)
        storage._owns_lock = True
        return storage

    @classmethod
    def _create_owned(cls, space: Space, *, capacity: int | None, path: Path | None, plan: Any,
                      multiprocessing: bool, lock: WriterLock | None) -> Any:
        """Create in ``path`` (made if missing) under a writer lock held by the caller; no checks."""
        if path is not None:
            path.mkdir(exist_ok=True)
        storage = cls._create(space, capacity=capacity, path=path, config=plan, multiprocessing=multiprocessing,
                              lock=lock)
        if path is not None:
            write_json_atomic(path / STORAGE_FILE, storage.descriptor())
        return storage

    @classmethod
    def referenced_payload(cls, path: Path) -> list[str]:
        """The payload files (relative to ``path``, ``/``-separated) that the small files of the storage
        folder ``path`` point to: what a copy of the folder must also hold. ``[]`` by default.

        Raises:
            FormatError: a small file that names them (an index) is missing or damaged.
        """
        return []

    @constructor  # a classmethod that refuses to be called on an instance
    def load_from(cls, path: str | os.PathLike, space: Space | None = None, *, capacity: Any = "stored",
                  read_only: bool = True, multiprocessing: bool = False,
                  payload: PayloadSource | None = None) -> Any:
        """Reopen a storage folder written by :meth:`create`.

        Called on ``SpaceStorage`` itself, the type is looked up by the registered name in
        ``storage.json``; called on a subclass, the name must match it. A writer takes the
        folder's ``writer.lock``.

        Args:
            space, capacity: if given, must equal what the folder records (a check, not an override).
            payload: where the payload files of the folder are read from (a
                :class:`~trajstore.storages._payload.PayloadSource` of ``path``: a folder whose payload
                stays in object storage), or ``None`` (default) for the folder's own files on disk.

        Raises:
            FormatError: no/corrupt ``storage.json``, another storage type, a newer format version, or a
                missing or damaged file of the storage (the message names it, or the storage folder). A
                read-only open of a folder whose payload files are missing succeeds
                (:meth:`~trajstore.storages.base.SpaceStorage.damaged_files` lists them); a writer's is
                refused, nothing written.
            UnknownTypeError: the recorded type is not registered.
            ValueError: ``space`` or ``capacity`` differ from the recorded ones.
            LockedError: ``read_only=False`` while another writer holds the folder.
            ValueError: a ``payload`` source with ``read_only=False``.
        """
        path = Path(path)
        lock = lock_for(path, read_only) if (path / STORAGE_FILE).exists() else None
        try:
            storage = cls._load_owned(path, space, capacity=capacity, read_only=read_only,
                                      multiprocessing=multiprocessing, lock=lock, payload=payload)
            if not read_only:
                refuse_damaged(storage)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        storage._owns_lock = True
        return storage

    @classmethod
    def _load_owned(cls, path: Path, space: Space | None, *, capacity: Any, read_only: bool,
                    multiprocessing: bool, lock: WriterLock | None,
                    payload: PayloadSource | None = None) -> Any:
        """Reopen ``path``; a writer's lock is held by the caller (this storage's or its owner's).
        ``payload``: the source of the folder's payload files, or ``None`` (local disk).

        Damage is reported where it is found: ``storage.json`` while it is parsed, the storage's own
        files while ``_open`` reads them (:func:`~trajstore._damage.damaged_file`). A space or
        capacity that differs from the given one is a ``ValueError`` (the caller's to word: a
        buffer's metadata names them).
        """
        if payload is not None and not read_only:
            raise ValueError(f"{path}: a storage whose payload files are read from {payload!r} opens read-only")
        registered = cls if getattr(cls, "type_name", None) is not None else None  # SpaceStorage itself: any type
        target, the_space, stored_capacity, desc = read_descriptor(path, registered, space, capacity)
        with damaged_file(path):
            config = target._config_for_open(path, the_space, desc.get("config", {}))
            extra = {"payload": payload} if target.takes_payload else {}
            return target._open(path, the_space, capacity=stored_capacity, config=config, read_only=read_only,
                                multiprocessing=multiprocessing, lock=lock, **extra)

    @classmethod
    def _config_for_open(cls, path: Path, space: Space, stored: Any) -> Any:
        """The stored config, checked by the same declared options as at create."""
        try:
            if not isinstance(stored, dict):
                raise TypeError(f"expected a JSON object, got {stored!r:.100}")
            return cls._check_config(space, config_from(cls.__name__, cls.options, stored))
        except (TypeError, ValueError) as exc:
            raise FormatError(f"{path}: bad {cls.__name__} config in {STORAGE_FILE}: {exc}") from None

    @classmethod
    @abc.abstractmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, config: Any,
                multiprocessing: bool, lock: WriterLock | None) -> Any:
        """Make the files (``path`` exists and is empty) and return the open storage.

        ``config`` is what :meth:`prepare` returned; ``lock`` is the writer lock held for this folder.
        """

    @classmethod
    @abc.abstractmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: Any, read_only: bool,
              multiprocessing: bool, lock: WriterLock | None) -> Any:
        """Open existing files; ``config`` is the checked stored config (:meth:`_config_for_open`).

        A storage with :attr:`takes_payload` also takes ``payload=`` (see :meth:`load_from`)."""


def refuse_damaged(storage: Any) -> None:
    """Close ``storage`` (opened for writing) and raise if payload files it points to are missing or truncated.

    Raises:
        DamagedDataError: (a ``FormatError``) names the files (up to 5) and how many slots they held.
    """
    damaged = storage.damaged_files()
    if not damaged:
        return
    storage.close()
    listed = ", ".join(f"{d.path} ({d.problem})" for d in damaged[:5]) + (", ..." if len(damaged) > 5 else "")
    slots = sum(len(d.slots) for d in damaged)
    raise DamagedDataError(f"{storage.cache_path}: {len(damaged)} payload file(s) are missing or truncated "
                           f"({slots} slot(s) "
                           f"cannot be read): {listed}; a writer refuses the folder: open it read-only to read "
                           "the rest")
