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
leaves), and set the capability flags of
:class:`~trajstore.storages._storage_class.StorageClass`. A storage whose folder holds *payload* files
(big, read by byte range or whole) declares them in ``payload_files`` (and the ones its index points
to in ``referenced_payload``), and takes their source at open (``takes_payload``): that is all
:mod:`trajstore.remote` knows of it (:func:`trajstore.storages.files.list_files`).
"""

from __future__ import annotations

import abc
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from trajstore._damage import damaged_file
from trajstore.damage import DamagedFile
from trajstore._folder import FolderOwner
from trajstore._lock import WriterLock
from trajstore.spaces import Space, tree
from trajstore.storages._opening import STORAGE_FILE, STORAGE_TYPES, reopen_read_only
from trajstore.storages._options import Option, int_in, one_of, optional, positive_int, positive_number
from trajstore.storages._selection import Selection, select, span
from trajstore.storages._storage_class import StorageClass
from trajstore.storages._validation import (check_capacity, stored_space, validated_batch, validated_for,
                                            validated_step)

__all__ = ["STORAGE_FILE", "STORAGE_TYPES", "SpaceStorage", "Option", "int_in", "one_of", "optional", "positive_int",
           "positive_number", "check_capacity", "stored_space", "validated_batch",
           "validated_for", "validated_step"]


class SpaceStorage(StorageClass, FolderOwner):
    """Slots holding values of ``space``; see the module docstring for the contract (its class side,
    declarations, ``create`` and ``load_from``, is :class:`~trajstore.storages._storage_class.StorageClass`).

    Attributes:
        space: the space of one slot.
        capacity: number of slots, or ``None`` when the storage grows with :meth:`extend`.
        cache_path, read_only, multiprocessing, closed: see :class:`~trajstore._folder.FolderOwner`.
    """

    def __init__(self, space: Space, *, capacity: int | None, cache_path: Path | None,
                 read_only: bool = False, multiprocessing: bool = False, lock: WriterLock | None = None):
        self.space = space
        self.capacity = capacity
        self._init_owner(cache_path, read_only=read_only, multiprocessing=multiprocessing, lock=lock,
                         owns_lock=False)

    def descriptor(self) -> dict[str, Any]:
        """The JSON content of ``storage.json``."""
        return {"type": self.type_name, "format_version": self.format_version, "space": self.space.to_json(),
                "capacity": self.capacity, "config": self.get_config()}

    @abc.abstractmethod
    def get_config(self) -> dict[str, Any]:
        """JSON-only options needed to reopen the storage (e.g. ``{"format": "JPEG", "quality": 90}``)."""

    @property
    def lossless(self) -> bool:
        """Whether :meth:`get` returns exactly what :meth:`set` was given (False for JPEG, video)."""
        return True

    def unwritten(self, slots: np.ndarray) -> int:
        """How many of ``slots`` (int64 ``(N,)``, in range) no payload was ever written for, so that a read
        gives zeros (an index that lost records); 0 for a storage that keeps no index of its payload."""
        return 0

    def damaged_files(self) -> list[DamagedFile]:
        """The payload files this storage points to that cannot be read (missing at open), each with the
        slots whose values it held (:class:`~trajstore.damage.DamagedFile`); ``[]`` when none is, and for
        a storage without payload files. A composite lists those of its :meth:`parts`. Only a read-only
        open gets this far with damage (a writer's open refuses it); reading a damaged slot raises
        ``FormatError`` naming the file."""
        return [d for part in self.parts().values() for d in part.damaged_files()]

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

    def read_leaves_in_order(self, sel: Selection, which: Sequence[int] | None = None) -> list[np.ndarray]:
        """Leaf arrays in ``sel``'s requested order: rows ``sel.slots[sel.order]``, ``(sel.size, ...)`` each
        (``sel.scalar`` is not applied: the leading axis stays). ``which``: as :meth:`read_leaves`.

        This default is :meth:`read_leaves` then ``[sel.order]``; a storage that can decode each row
        straight into its requested place overrides it (``ImageStorage``: no copy of the whole batch),
        and ``DictStorage`` passes it on to each sub-storage. Raises: as :meth:`read_leaves`.
        """
        leaves = self.read_leaves(sel, which)
        if sel.order is not None:
            leaves = [v[sel.order] for v in leaves]
        return leaves

    def read(self, sel: Selection) -> Any:
        """The value at a selection, in the requested order and nesting (see :meth:`get`)."""
        leaves = self.read_leaves_in_order(sel)
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
        return (reopen_read_only, (self.type_name, str(self.cache_path), self.multiprocessing))

    def __repr__(self) -> str:
        where = self.cache_path or "memory"
        return f"{type(self).__name__}({where}, slots={len(self)}, capacity={self.capacity})"
