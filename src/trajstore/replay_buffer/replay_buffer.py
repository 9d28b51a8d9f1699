"""``ReplayBuffer``: a ring or unbounded buffer of steps over one :class:`SpaceStorage`; a facade.

The folder describes itself (``trajstore.json``, the episode log, ``writer.lock``, ``storage/``,
``final_observations/``; see the README's "On disk"). The buffer is a facade over parts that own
their state and do not reach into each other: the **view** (:mod:`~trajstore.replay_buffer.view`:
one consistent snapshot of ring and episodes, one staleness rule, one retry policy), the **writer**
(:mod:`~trajstore.replay_buffer.writer`, :mod:`~trajstore.replay_buffer.commit`: staging, the ring
state of each role, background block writes, commits), the **reads** over the view
(:mod:`~trajstore.replay_buffer.reads`, :mod:`~trajstore.replay_buffer.transitions`, with the one
sampler module :mod:`~trajstore.replay_buffer.samplers`) and the **statistics**
(:mod:`~trajstore.replay_buffer.statistics`). The training methods are in the base
:class:`~trajstore.replay_buffer.training_api.TrainingAPI`, the episode accessors in the base
:class:`~trajstore.replay_buffer.episode_access.EpisodeAccess`; :mod:`~trajstore.replay_buffer.opening`
makes and opens the parts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trajstore._folder import FolderOwner, fresh_folder, lock_for
from trajstore._suggest import check_keywords, suggests_keywords
from trajstore._urls import local_path, refuse_remote_write
from trajstore.damage import Damage
from trajstore.replay_buffer import remote_open
from trajstore.replay_buffer.remote_open import RemoteOrigin
from trajstore.replay_buffer.damage_report import damage_in
from trajstore.replay_buffer.episode_access import EpisodeAccess
from trajstore.replay_buffer.episode_keys import EpisodeKeys
from trajstore.replay_buffer.leaf_stats import check_leaves
from trajstore.replay_buffer.metadata import read_meta
from trajstore.replay_buffer.opening import (BufferParts, close_parts, forked_views, new_parts, open_parts,
                                             reopen_folder)
from trajstore.replay_buffer.reads import BufferReads
from trajstore.replay_buffer.staging import WriteStats
from trajstore.replay_buffer.statistics import BufferStatistics
from trajstore.replay_buffer.priorities import FolderPriorities, check_name
from trajstore.replay_buffer.rl_api import ReinforcementAPI
from trajstore.replay_buffer.view import View, Views
from trajstore.replay_buffer.writer import WriterViews
from trajstore.replay_buffer.writing_api import WritingAPI
from trajstore.spaces import Space
from trajstore.storages._payload import PayloadSource
from trajstore.storages.base import SpaceStorage, check_capacity

#: ``ReplayBuffer.create``'s own keywords, listed first in the message about an unknown one.
_CREATE_KEYWORDS = ("cache_path", "capacity", "multiprocessing", "check_bounds", "priorities")


class ReplayBuffer(EpisodeAccess, WritingAPI, RemoteOrigin, ReinforcementAPI, FolderOwner):
    """Steps of ``space`` in a ring (``capacity=int``) or an unbounded buffer (``capacity=None``).

    Index with an int (negative counts from the newest), a slice, a 1-D integer array (any order,
    repeats allowed) or a boolean mask; logical index 0 is the oldest step held. An int gives one
    step (leaves of the space's shape), anything else a batch with a leading axis ``N``, in the
    space's dtypes. Build one with :meth:`create` or :meth:`load_from`; close it (or use ``with``).

    Other processes open the folder with ``load_from(path)`` and call :meth:`refresh` to see what the
    writer has flushed since. A read never returns a torn step: one that raced the writer reusing
    slots raises :class:`~trajstore.errors.StaleReadError` (index again); the samplers and the torch
    dataset draw again by themselves (:mod:`~trajstore.replay_buffer.view`). Every request is checked
    once here and handed down as a trusted selection and validated leaf arrays.
    """

    def __init__(self, parts: BufferParts, *, cache_path: Path | None, read_only: bool, multiprocessing: bool,
                 lock: Any):
        self.storage: SpaceStorage = parts.storage
        self.space: Space = parts.storage.space
        #: Whether appended values must lie inside the space's bounds (and not be NaN); see :meth:`create`.
        self.check_bounds = parts.check_bounds
        self._finals = parts.finals
        self._writer = parts.writer
        self._folder_view = parts.folder_view
        self._init_owner(cache_path, read_only=read_only, multiprocessing=multiprocessing, lock=lock, owns_lock=True)
        name = str(cache_path or "memory")
        self._views: Views = parts.folder_view if parts.folder_view is not None else WriterViews(
            parts.writer, name)
        self._reader = BufferReads(self.storage, self.space, self._finals, self._views)
        self._stats = BufferStatistics(self.space, parts.stats, self._reader)
        self._prio = parts.priorities  # the priority sets the draws use (rl_api.py)
        self._remote: Any = None  # a buffer opened from a URL: its RemoteFolder (remote_open.py)
        self._damage: tuple[View, Damage] | None = None  # rb.damaged of the view it was computed for
        self._keys = EpisodeKeys()  # end_episode(episode_key=): the keys held

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(cls, storage_cls: type[SpaceStorage], space: Space, *, cache_path: str | os.PathLike | None = None,
               capacity: int | None = None, multiprocessing: bool = False, check_bounds: bool = True,
               priorities: tuple[str, ...] = (), **storage_kwargs: Any) -> "ReplayBuffer":
        """A new, empty buffer; every argument (the storage's options included) is checked before the
        folder is made.

        Args:
            storage_cls: the storage class, usually ``DictStorage`` with the keyword arguments of
                :func:`~trajstore.storages.dict_storage_kwargs_from_space`.
            space: the space of one step.
            cache_path: a new (or empty) folder; ``None`` keeps everything in memory.
            capacity: ring size in steps (the oldest are overwritten), or ``None`` to grow.
            multiprocessing: let other processes (DataLoader workers) read while this one writes.
            check_bounds: ``True`` (default): values outside a leaf's bounds, or NaN, are refused with
                ``InvalidValueError`` (so ``space.contains(rb[i])`` holds); ``False``: stored as they are
                (sensors overshoot their ranges). Kept in ``trajstore.json`` for every later writer.
            priorities: names of priority sets for prioritized replay (``("td",)``; ``sample(priority=...)``).
            **storage_kwargs: passed to ``storage_cls.create``.

        Raises:
            ValueError: capacity 0, negative or not an int; options the storage refuses.
            TypeError: ``space`` is not a trajstore Space, or a keyword neither this nor the storage's ``create``
                takes (the message names the closest known one: ``"ReplayBuffer.create got an unexpected
                keyword 'capacty' (did you mean 'capacity'?); it takes ..."``).
            StorageExistsError: ``cache_path`` is a file or a non-empty folder.
            UnsupportedSpaceError: the storage cannot take ``space``.
            InvalidValueError: a leaf's ``metadata["stats"]`` is not a reduction it can have
                (:func:`~trajstore.replay_buffer.leaf_stats.reduction`).
        """
        refuse_remote_write(cache_path, "ReplayBuffer.create")
        capacity = check_capacity(capacity)
        if not isinstance(check_bounds, bool):
            raise TypeError(f"check_bounds must be a bool, got {check_bounds!r}")
        if not isinstance(space, Space):
            raise TypeError(f"space must be a trajstore Space, got {type(space).__name__}")
        check_leaves(space)  # a bad "stats" mark in a leaf's metadata
        priorities = tuple(dict.fromkeys(check_name(p) for p in ((priorities,) if isinstance(priorities, str)
                                                                 else priorities)))
        if not (isinstance(storage_cls, type) and issubclass(storage_cls, SpaceStorage)):
            raise TypeError(f"storage_cls must be a SpaceStorage subclass, got {storage_cls!r}")
        check_keywords(storage_kwargs, (*_CREATE_KEYWORDS, *storage_cls.create_keywords()),
                       passed_to="ReplayBuffer.create")
        plan = storage_cls.prepare(space, capacity=capacity, cache_path=cache_path, **storage_kwargs)
        with fresh_folder(cache_path) as (path, lock):
            parts = new_parts(storage_cls, space, capacity=capacity, path=path, plan=plan,
                              multiprocessing=multiprocessing, lock=lock, check_bounds=check_bounds,
                              priorities=priorities)
            return cls(parts, cache_path=path, read_only=False, multiprocessing=multiprocessing, lock=lock)

    @classmethod
    @suggests_keywords
    def load_from(cls, cache_path: str | os.PathLike, *, read_only: bool = True, multiprocessing: bool = False,
                  storage_options: dict[str, Any] | None = None,
                  cache_dir: str | os.PathLike | None = None, payload: PayloadSource | None = None,
                  left_open: str = "interrupted") -> "ReplayBuffer":
        """Reopen a buffer folder; the space, storage layout and episodes come from the folder.

        ``cache_path`` may be a URL: ``file://`` opens the local folder; another fsspec URL
        (``s3://bucket/path``) opens a buffer published there by ``trajstore push``, read-only:
        ``storage_options`` go to fsspec, the small files are fetched once into a temporary mirror
        (or ``cache_dir/<snapshot hash>/``, kept) and frames are read by byte ranges
        (:mod:`trajstore.remote.mirror`). A local folder holding a pushed copy opens the same way.
        ``payload``: the source of the folder's payload files when they are not in it (read-only; a
        URL's opener gives it, :mod:`~trajstore.replay_buffer.remote_open`), else ``None``.

        A writer (``read_only=False``) ends an episode the last writer left open (a crash, a close
        without ``end_episode``) as *interrupted* and commits that at once (``left_open="discard"``: drops
        its steps instead, so an episode is wholly there or absent, for writers that retry by
        ``episode_key``); a reader sees it as the open episode. A folder of format 1 or 2 opens as it is for reading; a writer migrates it to
        version 3 at once and atomically (:mod:`~trajstore.replay_buffer.metadata`).

        A folder whose payload files (image chunks, video segments) are partly missing opens read-only
        with a :class:`~trajstore.damage.DamagedBufferWarning`: :attr:`damaged` lists the files and the
        episodes and steps they held; those steps raise ``FormatError`` naming the file when read, the
        other steps read as usual, and the samplers leave the damaged episodes out or raise, as their
        ``on_damaged=`` says.

        Raises:
            FormatError: not a trajstore buffer folder, a newer format version, or a missing or damaged
                file (the message names it, or the storage folder holding it); ``read_only=False`` on a
                folder with missing payload files (the :attr:`damaged` summary; nothing is written).
            UnknownTypeError: the folder names a storage type this trajstore does not know.
            LockedError: ``read_only=False`` while another process is writing
                (:class:`~trajstore.errors.AlreadyOpenError`: this process has it open).
            ReadOnlyError: ``read_only=False`` with a URL of object storage (nothing is fetched).
            TypeError: an unknown keyword (the message names the closest known one).
            ValueError: ``left_open`` is not ``"interrupted"`` or ``"discard"``.
        """
        if remote_open.is_url(cache_path):  # the URL opener gives a folder and its payload source
            return remote_open.load_url(cls, cache_path, read_only=read_only, multiprocessing=multiprocessing,
                                        storage_options=storage_options, cache_dir=cache_dir)
        if left_open not in ("interrupted", "discard"):
            raise ValueError(f"left_open must be 'interrupted' or 'discard', got {left_open!r}")
        path = Path(local_path(cache_path))
        read_meta(path)  # not a buffer folder: a FormatError before anything else
        lock = lock_for(path, read_only)
        try:
            parts = open_parts(path, read_only=read_only, multiprocessing=multiprocessing, lock=lock, payload=payload,
                               left_open=left_open)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(parts, cache_path=path, read_only=read_only, multiprocessing=multiprocessing, lock=lock)

    def flush(self) -> None:
        """Make every step so far durable and visible to readers: staged steps written, the storage
        flushed (fsync), then the metadata replaced atomically.

        Raises:
            OSError, ...: a write failed (a full disk); nothing is committed by this call and nothing
                appended is dropped: the steps stay held in RAM, and a later ``flush`` (``end_episode``,
                ``close``) writes and commits them once the cause is gone, and raises until then.
        """
        self._writable().flush()

    def close(self, *, discard: bool = False) -> None:
        """Flush (if writable), close the storage and release the writer lock. Idempotent.

        ``discard=True`` (for a buffer whose folder is about to be removed, such as a failed copy's): no
        flush, the steps since the last commit are given up without a warning, and close errors are not
        raised; the buffer is closed.

        Raises:
            OSError, ValueError, ...: the flush failed (a full disk): the buffer stays open, its steps held,
                for ``close`` to be called again once space is freed (exiting keeps the last commit).
        """
        if self.closed:
            return
        if self._writer is not None and os.getpid() == self._pid and not discard:
            self._writer.flush()  # raises with the buffer open: nothing is given up
        try:
            close_parts(self._writer, self.storage, self._finals, self._folder_view, self._remote)
        except Exception:
            if not discard:
                raise
        finally:
            self._keys.close()
            self._release_lock()
            self.closed = True

    def __del__(self) -> None:
        # Losing steps silently is worse than a warning; flushing here is unsafe at interpreter exit.
        writer = getattr(self, "_writer", None)
        if not getattr(self, "closed", True) and writer is not None and os.getpid() == self._pid:
            writer.warn_unflushed(self.cache_path)

    def _reopen_args(self) -> tuple[Any, ...]:
        if self._remote is not None:  # opened from a URL: the same snapshot, by the opener (remote_open.py)
            return (remote_open.reopen_url, (self._remote.reopen_kwargs(), self.multiprocessing))
        return (reopen_folder, (str(self.cache_path), self.multiprocessing))

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._now().count

    @property
    def capacity(self) -> int | None:
        return self._now().ring.capacity

    @property
    def total_steps(self) -> int:
        """Steps appended since creation, including those the ring has overwritten."""
        return self._now().ring.appended

    @property
    def damaged(self) -> Damage:
        """What of the held steps cannot be read because payload files are missing: a
        :class:`~trajstore.damage.Damage` (false when nothing is) listing each file with its part, the
        episode ids and the number of steps it held. Only a read-only buffer can be damaged (a writer's
        open refuses the folder). ``O(1)`` without damage; with damage, ``O(held steps)`` once per view."""
        view = self._now()
        cached = self._damage
        if cached is None or cached[0] is not view:
            cached = self._damage = (view, damage_in(self.storage, self._finals.storage, view))
        return cached[1]

    @property
    def write_stats(self) -> WriteStats:
        """What write-behind has done since the buffer was opened (zeros for a reader)."""
        return self._writer.write_stats if self._writer is not None else WriteStats()

    def get_at(self, index: Any) -> Any:
        """Steps at logical ``index``; see the class docstring for index kinds and shapes.

        Raises:
            IndexError, TypeError, ValueError: a bad index.
            FormatError: a damaged file (the message names it, or its storage folder).
            StaleReadError: (an ``IndexError``) a reader raced the writer reusing the slots read (a ring's
                overwrite, ``discard_episode``); nothing torn is returned: index again.
        """
        return self._reads().steps(index)

    def __getitem__(self, index: Any) -> Any:
        return self.get_at(index)

    @property
    def final_observation_storage(self) -> SpaceStorage | None:
        """The storage of the final observations (for describing a folder), or ``None`` before the first one."""
        return self._finals.storage

    def refresh(self) -> bool:
        """Re-read what the writer has flushed (for read-only buffers). Returns True if anything changed."""
        self._check_open()
        return self._views.refresh()

    def committed_view(self, *, newest: bool = False) -> View:
        """The :class:`~trajstore.replay_buffer.view.View` (ring state and episode table, immutable for a
        reader) that reads use now; ``newest=True``: the newest one the writer committed, not adopted (a
        reader looks at the folder; compare with :func:`~trajstore.replay_buffer.view.is_stale`). For
        wrappers that read several buffers as one (:mod:`trajstore.shards`). A writer's view holds its
        staged steps too."""
        if self._writer is not None:
            return self._now()
        self._check_open()
        return self._views.latest() if newest else self._views.current()

    def range_stats(self) -> Any:
        """The accumulators behind :meth:`stats`: a :class:`~trajstore.replay_buffer.stats_keeper.RangeStats`
        (moments and histograms of each numeric leaf over the held steps), to combine buffers' statistics
        (``LeafAccumulator.merge``). Shared with the buffer: copy before changing it.

        Raises:
            as :meth:`stats`."""
        return self._statistics()

    # -- the parts -------------------------------------------------------------------------
    def _now(self) -> View:
        """The view for counts and episodes (the writer's includes its staged steps)."""
        self._check_open()
        return self._writer.view() if self._writer is not None else self._views.current()

    def _reads(self) -> BufferReads:
        self._check_open()
        return self._reader

    def _statistics(self) -> Any:
        self._check_open()
        if self._writer is not None:
            return self._stats.of_writer(self._writer)
        return self._stats.of_reader(self._folder_view)

    def _priority_source(self) -> Any:
        self._check_open()
        if self._prio is None:
            raise ValueError("prioritized draws in a forked child of an in-memory buffer: give the buffer a folder")
        return self._prio

    def _writable(self) -> Any:
        self._check_writable()
        assert self._writer is not None
        return self._writer

    def _after_fork(self) -> None:
        # A forked child reads what was flushed (FolderOwner made it read-only and let go of the lock);
        # the parent's staged steps and its writer thread are not the child's.
        writer, self._writer = self._writer, None
        self._views, self._folder_view = forked_views(writer, self._views, self._folder_view, self.storage,
                                                      self._finals, self.cache_path)
        self._reader = BufferReads(self.storage, self.space, self._finals, self._views)
        self._stats = BufferStatistics(self.space, self._stats.keeper, self._reader)
        self._prio = FolderPriorities(self._folder_view) if self._folder_view is not None else None

    def __repr__(self) -> str:
        """``ReplayBuffer(<where>, steps=..., ...)``; ``<where>`` is the folder, ``memory``, or for a buffer opened
        from a URL the URL and the snapshot it reads (not the temporary folder of its small files)."""
        view = self._writer.view() if self._writer is not None else self._views.current()
        where = self.cache_path or "memory"
        if self._remote is not None:
            where = f"{self._remote.url}, snapshot={self._remote.snapshot}"
        return (f"ReplayBuffer({where}, steps={view.count}, capacity={view.ring.capacity}, "
                f"episodes={view.episodes.count(view.ring.appended)}, storage={type(self.storage).__name__})")
