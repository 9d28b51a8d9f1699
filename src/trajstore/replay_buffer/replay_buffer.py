"""``ReplayBuffer``: a ring or unbounded buffer of steps over one :class:`SpaceStorage`.

The folder at ``cache_path`` describes itself::

    trajstore.json   format version, space, storage type and folder, ring state, episode counters
    episodes.000000.log   the closed episodes, appended at each commit (episode_log.py)
    writer.lock      held by the one writer process
    storage/         the storage (for the usual DictStorage: one sub-folder per sub-storage)
    final_observations/   the episodes' final observations, once one was stored (final_observations.py)

Data first, then metadata: :meth:`ReplayBuffer.flush` flushes the storage, appends the newly
closed episodes to the log, then replaces ``trajstore.json`` atomically, so a crash leaves the
last flushed state. Readers see what
was flushed; steps appended after the last flush are not visible to other processes.

The episode methods (``end_episode``, ``discard_episode``, ``episodes``, ``final_observation``,
...) are in :mod:`~trajstore.replay_buffer.episode_api`, ``sample``, ``select_episodes`` and
``split_episodes`` in :mod:`~trajstore.replay_buffer.sampling_api`, ``sample_windows`` in
:mod:`~trajstore.replay_buffer.window_api`, ``sample_transitions`` in
:mod:`~trajstore.replay_buffer.transition_api`; ``stats()`` is in
:mod:`~trajstore.replay_buffer.stats_api` (``stats.json``, committed with the metadata).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any


from trajstore._damage import damaged_file
from trajstore._folder import FolderOwner, fresh_folder, lock_for
from trajstore._fs import in_parallel
from trajstore._lock import WriterLock
from trajstore._urls import local_path, refuse_remote_write
from trajstore.errors import FormatError, LockedError, StaleReadError
from trajstore.replay_buffer import remote_open
from trajstore.replay_buffer.episode_api import EpisodeMethods
from trajstore.replay_buffer.sampling_api import SamplingMethods
from trajstore.replay_buffer.transition_api import TransitionMethods
from trajstore.replay_buffer.window_api import WindowMethods
from trajstore.replay_buffer.write_behind import WriteBehindMethods
from trajstore.replay_buffer.episode_log import EpisodeLog, read_committed
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.final_observations import FinalObservations
from trajstore.replay_buffer.metadata import (META_FILE, STORAGE_DIR, Committed, file_signature, read_meta,
                                              view_before_overwrite, write_meta)
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.staging import BackgroundWriter, StagingArea, WriteStats
from trajstore.replay_buffer.stale_reads import read_may_be_stale
from trajstore.replay_buffer.stats_api import StatsMethods
from trajstore.replay_buffer.stats_keeper import StatsKeeper
from trajstore.spaces import Space, space_from_json
from trajstore.storages._payload import PayloadSource
from trajstore.storages._selection import select
from trajstore.storages.base import (STORAGE_TYPES, SpaceStorage, check_capacity, validated_batch, validated_for,
                                     validated_step)

#: A sampler on a live ring redraws when the writer overwrote what it was reading; give up after this many.
MAX_READ_ATTEMPTS = 16


class ReplayBuffer(WriteBehindMethods, EpisodeMethods, SamplingMethods, WindowMethods, TransitionMethods,
                   StatsMethods, FolderOwner):
    """Steps of ``space`` in a ring (``capacity=int``) or an unbounded buffer (``capacity=None``).

    Index with an int (negative counts from the newest), a slice, a 1-D integer array (any
    order, repeats allowed) or a boolean mask; logical index 0 is the oldest step held. An int
    gives one step (leaves of the space's shape); anything else gives a batch with a leading
    axis ``N``. Values come back with the space's dtypes, so ``space.contains(rb[i])`` holds (unless
    the buffer was made with ``check_bounds=False``, which stores values outside the bounds as they are).

    Build one with :meth:`create` or :meth:`load_from`; use it as a context manager to close it.

    Other processes: open with ``load_from(path, read_only=True, multiprocessing=True)`` and call
    :meth:`refresh` to see what the writer has flushed since. A reader of a buffer that is being
    written never gets a torn step: the writer drops steps from the metadata before reusing their
    slots (a ring overwriting its oldest steps, :meth:`discard_episode`), and a read that raced such
    a reuse raises
    :class:`~trajstore.errors.StaleReadError` (:meth:`sample`, :meth:`sample_windows` and the
    torch dataset draw again by themselves).

    One pass down: every request is checked once here (the index becomes a
    :class:`~trajstore.storages._selection.Selection`, a value becomes validated leaf arrays)
    and handed to the storage's trusted methods.
    """

    def __init__(self, storage: SpaceStorage, *, ring: RingState, episodes: EpisodeTable,
                 cache_path: Path | None, read_only: bool, multiprocessing: bool, lock: WriterLock | None,
                 check_bounds: bool = True, log: EpisodeLog | None = None):
        self.storage = storage
        self._log = log  # the episode log (episode_log.py); None in memory
        #: Whether appended values must lie inside the space's bounds (and not be NaN); see :meth:`create`.
        self.check_bounds = check_bounds
        self.space: Space = storage.space
        self._ring = ring
        self._episodes = episodes
        self._finals = FinalObservations(self.space, folder=cache_path, capacity=ring.capacity, read_only=read_only,
                                         multiprocessing=multiprocessing)
        self._init_owner(cache_path, read_only=read_only, multiprocessing=multiprocessing, lock=lock,
                         owns_lock=True)
        self._meta_signature: tuple[int, int, int] | None = None
        self._stats = StatsKeeper(self.space)  # normalisation statistics (stats_keeper.py)
        # What the metadata file says; ring writes shrink it before overwriting (see _drop_before_overwrite).
        self._committed = Committed.of(ring, episodes)
        # Write-behind (writers only): _ring counts staged steps too; _planned is the ring after the
        # blocks handed to the background writer; the rest sit in _staging.
        self._planned = self._written = ring  # _written: the ring after the blocks the writer thread wrote
        self._staging: StagingArea | None = None
        self._writer: BackgroundWriter | None = None
        self.write_stats = WriteStats()
        self._remote: Any = None  # a buffer opened from a URL: its RemoteFolder (remote_open.py)

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(cls, storage_cls: type[SpaceStorage], space: Space, *, cache_path: str | os.PathLike | None = None,
               capacity: int | None = None, multiprocessing: bool = False, check_bounds: bool = True,
               **storage_kwargs: Any) -> "ReplayBuffer":
        """A new, empty buffer.

        Every argument (the storage's options included) is checked before the folder is made.

        Args:
            storage_cls: the storage class, usually ``DictStorage`` with the keyword arguments of
                :func:`~trajstore.storages.dict_storage_kwargs_from_space`.
            space: the space of one step.
            cache_path: a new (or empty) folder; ``None`` keeps everything in memory.
            capacity: ring size in steps (the oldest are overwritten), or ``None`` to grow.
            multiprocessing: let other processes (DataLoader workers) read while this one writes.
            check_bounds: ``True`` (default): ``append``, ``extend``, ``set_at`` and
                ``end_episode(final_observation=...)`` refuse a value outside a leaf's bounds or NaN
                with ``InvalidValueError`` (so ``space.contains(rb[i])`` holds). ``False``: such values
                are stored as they are (sensors overshoot their declared ranges). A property of the
                folder, kept in ``trajstore.json``: every later writer behaves the same, and the check
                stays within the one validation pass of :meth:`BoxSpace.validate`.
            **storage_kwargs: passed to ``storage_cls.create``.

        Raises:
            ValueError: capacity 0, negative or not an int; options the storage refuses.
            TypeError: ``space`` is not a trajstore Space, or an option the storage does not declare.
            StorageExistsError: ``cache_path`` is a file or a non-empty folder.
            UnsupportedSpaceError: the storage cannot take ``space``.
        """
        refuse_remote_write(cache_path, "ReplayBuffer.create")
        capacity = check_capacity(capacity)
        if not isinstance(check_bounds, bool):
            raise TypeError(f"check_bounds must be a bool, got {check_bounds!r}")
        if not isinstance(space, Space):
            raise TypeError(f"space must be a trajstore Space, got {type(space).__name__}")
        if not (isinstance(storage_cls, type) and issubclass(storage_cls, SpaceStorage)):
            raise TypeError(f"storage_cls must be a SpaceStorage subclass, got {storage_cls!r}")
        plan = storage_cls.prepare(space, capacity=capacity, cache_path=cache_path, **storage_kwargs)
        with fresh_folder(cache_path) as (path, lock):
            storage = storage_cls._create_owned(space, capacity=capacity, path=path / STORAGE_DIR if path else None,
                                                plan=plan, multiprocessing=multiprocessing, lock=lock)
            log = EpisodeLog.start(path) if path is not None else None
            rb = cls(storage, ring=RingState(capacity), episodes=EpisodeTable(), cache_path=path, read_only=False,
                     multiprocessing=multiprocessing, lock=lock, check_bounds=check_bounds, log=log)
            rb._stats.start(rb._ring)
            rb._write_meta()
        return rb

    @classmethod
    def load_from(cls, cache_path: str | os.PathLike, *, read_only: bool = True, multiprocessing: bool = False,
                  storage_options: dict[str, Any] | None = None,
                  cache_dir: str | os.PathLike | None = None, payload: PayloadSource | None = None) -> "ReplayBuffer":
        """Reopen a buffer folder; the space, storage layout and episodes come from the folder.

        ``cache_path`` may be a URL: ``file://`` opens the local folder; any other fsspec URL
        (``s3://bucket/path``, ``gs://...``) opens a buffer published there by ``trajstore push``,
        read-only, with ``storage_options`` passed to fsspec (endpoint, credentials) and its small
        files fetched once into a temporary mirror folder (or ``cache_dir/<snapshot hash>/``, kept);
        camera frames are then read by byte-range requests (see :mod:`trajstore.remote.mirror`).
        A local folder that holds a pushed copy (a manifest, no ``trajstore.json``) opens the same way.
        ``storage_options`` and ``cache_dir`` do nothing for a buffer folder on local disk.
        ``payload``: the source of the folder's payload files when they are not in it (a
        :class:`~trajstore.storages._payload.PayloadSource` of the buffer folder; read-only), else
        ``None``: a URL's opener gives it (:mod:`~trajstore.replay_buffer.remote_open`).

        A writer (``read_only=False``) ends an episode that the last writer left open (it crashed,
        or closed without ``end_episode``) as *interrupted* and commits that at once, so the
        fragment is never merged into the next episode (``Episode.interrupted``, ``done=False``).
        A reader sees such a fragment as the open episode.

        A folder of an older format version (1 or 2, episodes kept in ``trajstore.json``) opens as it is
        for reading; a writer migrates it to version 3 (the episode log) at once and atomically, see
        :mod:`~trajstore.replay_buffer.metadata`.

        Raises:
            FormatError: not a trajstore buffer folder, a newer format version, or a missing or damaged
                file (the message names it, or the storage folder holding it).
            UnknownTypeError: the folder names a storage type this trajstore does not know.
            LockedError: ``read_only=False`` while another process is writing.
            ReadOnlyError: ``read_only=False`` with a URL of object storage (nothing is fetched).
        """
        if remote_open.is_url(cache_path):  # the URL opener gives a folder and its payload source
            return remote_open.load_url(cls, cache_path, read_only=read_only, multiprocessing=multiprocessing,
                                        storage_options=storage_options, cache_dir=cache_dir)
        path = Path(local_path(cache_path))
        read_meta(path)  # not a buffer folder: a FormatError before anything else
        lock = log = None
        try:
            lock = lock_for(path, read_only)
            meta, episodes, log = read_committed(path, read_only=read_only)
            if log is None and not read_only:  # format 1 or 2: migrated below
                log = EpisodeLog.start(path)
            with damaged_file(path / META_FILE):
                space = space_from_json(meta["space"])
                ring = RingState.from_json(meta["ring"])
                episodes.check_within(ring)
                if meta["storage"]["dir"] != STORAGE_DIR:
                    raise FormatError(f"unexpected storage folder {meta['storage']['dir']!r}")
                storage_cls = STORAGE_TYPES.get(meta["storage"]["type"])
                check_bounds = meta.get("check_bounds", True)
                if not isinstance(check_bounds, bool):
                    raise FormatError(f"check_bounds must be true or false, got {check_bounds!r}")
            storage = storage_cls._load_owned(path / STORAGE_DIR, space, capacity=ring.capacity, read_only=read_only,
                                              multiprocessing=multiprocessing, lock=lock,
                                              payload=remote_open.payload_of(payload, STORAGE_DIR))
            rb = cls(storage, ring=ring, episodes=episodes, cache_path=path, read_only=read_only,
                     multiprocessing=multiprocessing, lock=lock, check_bounds=check_bounds, log=log)
            try:
                rb._meta_signature = file_signature(path)
                if not read_only:
                    rb._stats.adopt(path, meta, ring)
                if len(storage) < ring.count:
                    raise FormatError(f"{path / META_FILE} records {ring.count} steps but the storage holds "
                                      f"{len(storage)}{short_parts(storage, ring.count)}")
                rb._finals.open(meta, lock, rb._episodes.final_count, payload=payload)
                if not read_only:
                    rb._end_interrupted_episode()
                    if rb._log.position is None:  # type: ignore[union-attr]
                        rb._write_meta(rb._committed)  # migrate: the log, then trajstore.json of this version
            except BaseException:
                storage.close()
                rb._finals.close()
                raise
        except (OSError, KeyError, TypeError, ValueError) as exc:
            if log is not None:
                log.close()
            if lock is not None:
                lock.release()
            if isinstance(exc, (FormatError, LockedError)):
                raise
            # What is left: the metadata's space or capacity differs from a storage's own (ValueError).
            raise FormatError(f"{path / META_FILE} does not match the files it names: {type(exc).__name__}: "
                              f"{exc}") from exc
        except BaseException:
            if log is not None:
                log.close()
            if lock is not None:
                lock.release()
            raise
        return rb

    def _write_meta(self, committed: Committed | None = None, *, flush_storage: bool = False) -> None:
        """Atomically replace the metadata file with ``committed`` (default: the current state), after
        ``stats.json`` when the statistics cover it; keep the statistics of an episode boundary.

        ``flush_storage``: flush the storage first. The storage flush, the episode log's append and the
        statistics file are independent writes, each ending in an fsync: they run at the same time
        (:func:`~trajstore._fs.in_parallel`), and the metadata is written once all three are durable.
        """
        if committed is None and not self._episodes.is_open(self._ring.appended):
            self._stats.mark_boundary(self._ring)
        if self.cache_path is None:
            if flush_storage:
                self.storage.flush()
            return
        own = committed is None  # the writer's own table, not a ring's shrunk view: the log may compact
        committed = committed or Committed.of(self._ring, self._episodes)
        assert self._log is not None
        log, folder, ring = self._log, self.cache_path, committed.ring
        _, position, stats = in_parallel(
            self.storage.flush if flush_storage else lambda: None,  # first: on this thread (it may fan out)
            lambda: log.prepare(committed.episodes, may_compact=own),  # durable before the metadata names it
            lambda: self._stats.commit(folder, ring))
        episodes = {**committed.episodes.counters_json(), "log": position.to_json()}
        write_meta(self.cache_path, self.space, self.storage.type_name, committed.ring, episodes,
                   self._finals.descriptor(), stats, check_bounds=self.check_bounds)
        self._log.committed(position)
        self._committed = committed

    def _drop_before_overwrite(self, appended_after: int) -> None:
        """Before the ring overwrites slots, drop their steps from the committed metadata
        (see :func:`~trajstore.replay_buffer.metadata.view_before_overwrite`)."""
        view = view_before_overwrite(self._committed, appended_after)
        if view is not None:
            self._write_meta(view)

    def flush(self) -> None:
        """Make every step so far durable and visible to readers: staged steps are written, the
        storage is flushed (fsync), then the metadata is replaced atomically.

        Raises:
            OSError, ...: a background write failed; nothing of it is committed (see :meth:`append`).
        """
        self._check_writable()
        self._write_staged()
        self._write_meta(flush_storage=True)

    def close(self) -> None:
        """Flush (if writable), close the storage and release the writer lock. Idempotent.

        Raises:
            OSError, ValueError, ...: a background write failed (the buffer is closed all the same;
                the steps of that write and later ones are not committed).
        """
        if self.closed:
            return
        try:
            if not self.read_only and os.getpid() == self._pid:
                self.flush()
        finally:
            try:
                if self._writer is not None:
                    self._writer.close()
                self.storage.close()
                self._finals.close()
                if self._log is not None:
                    self._log.close()
                if self._remote is not None:
                    self._remote.close()
            finally:
                self._release_lock()
                self.closed = True

    def __del__(self) -> None:
        # Losing steps silently is worse than a warning; flushing here is unsafe at interpreter exit.
        if getattr(self, "closed", True) or self.read_only or os.getpid() != self._pid or self.cache_path is None:
            return
        lost = self._ring.appended - self._committed.ring.appended
        if lost > 0:
            warnings.warn(f"ReplayBuffer at {self.cache_path} was not closed: {lost} steps appended since the last "
                          "flush() are lost; use `with ReplayBuffer...` or call close()", stacklevel=2)

    def _reopen_args(self) -> tuple[Any, ...]:
        if self._remote is not None:  # opened from a URL: the same snapshot, by the opener (remote_open.py)
            return (_reopen_url, (self._remote.reopen_kwargs(), self.multiprocessing))
        return (_reopen, (str(self.cache_path), self.multiprocessing))

    # -- writing ---------------------------------------------------------------------------
    def append(self, step: Any) -> None:
        """Append one step (a value of ``space``).

        The step is validated, copied into a staging block and written behind by a background
        thread (see :mod:`~trajstore.replay_buffer.staging`); :meth:`flush` or :meth:`end_episode`
        make it durable. Waits while staging is full (``write_stats.blocked_seconds``).

        Raises:
            InvalidValueError: names the leaf and what was expected (a value outside the leaf's bounds
                or NaN: the first offending index and value, unless ``check_bounds=False``); nothing is staged.
            ReadOnlyError: the buffer was opened read-only.
            OSError, ...: an earlier background write failed (its note names the leaf); the
                buffer rolled back to before that write.
        """
        self._check_writable()
        self._extend_leaves(validated_step(self.space, step, check_bounds=self.check_bounds), 1)

    def extend(self, batch: Any) -> None:
        """Append ``N`` steps: every leaf has a leading axis ``N``.

        The whole batch is validated first; on a bad leaf nothing is written.

        Raises:
            InvalidValueError: names the leaf and what was expected.
            ReadOnlyError: the buffer was opened read-only.
        """
        self._check_writable()
        self._extend_leaves(*validated_batch(self.space, batch, check_bounds=self.check_bounds))

    def set_at(self, index: Any, value: Any) -> None:
        """Overwrite held steps at logical ``index`` (same index kinds as reading).

        Not crash-atomic: these steps are already committed, so a crash before the next flush can
        leave some leaves of them new and others old. Prefer appending corrected steps.

        Raises:
            InvalidValueError: ``value`` does not fit the space or the index size; nothing is written.
        """
        self._check_writable()
        sel = select(index, len(self))
        leaves = validated_for(self.space, value, sel, check_bounds=self.check_bounds)
        self._write_staged()
        self.storage.write(self._ring.slots_of(sel), leaves)

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        self._check_open()
        return self._ring.count

    @property
    def capacity(self) -> int | None:
        return self._ring.capacity

    @property
    def published_snapshot(self) -> tuple[str, str] | None:
        """``(url, snapshot id)`` of a buffer opened from a URL (the pushed snapshot it reads), else ``None``."""
        return None if self._remote is None else (self._remote.url, self._remote.snapshot)

    @property
    def total_steps(self) -> int:
        """Steps appended since creation, including those the ring has overwritten."""
        return self._ring.appended

    def get_at(self, index: Any) -> Any:
        """Steps at logical ``index``; see the class docstring for index kinds and shapes.

        Raises:
            IndexError, TypeError, ValueError: a bad index.
            FormatError: a damaged file (the message names it, or its storage folder).
            StaleReadError: (an ``IndexError``) a reader raced the writer reusing the slots of requested
                steps (a ring overwriting its oldest steps, or ``discard_episode``); no torn data is
                returned, index again.
        """
        self._check_open()
        if not self.read_only:
            self._write_staged()  # the writer reads its own staged steps
        view, view_episodes = self._ring, self._episodes
        sel = select(index, view.count)
        try:
            data = self.storage.read(view.slots_of(sel))
        except FormatError as exc:
            # What looks like damage may be slots the writer was rewriting: a StaleReadError (index
            # again) only if the view moved so that it could be; a damaged file is not retried.
            if len(sel.slots):
                self._check_not_stale(view, view_episodes, int(sel.slots[0]), int(sel.slots[-1]), exc)
            raise
        if len(sel.slots):
            self._check_not_stale(view, view_episodes, int(sel.slots[0]), int(sel.slots[-1]))
        return data

    def _check_not_stale(self, view: RingState, view_episodes: EpisodeTable, first: int, last: int,
                         cause: BaseException | None = None) -> None:
        """After reading logical ``first..last`` under ``view`` (which raised ``cause``, if given): raise if a
        writer may have reused those slots.

        Raises:
            StaleReadError: see :meth:`get_at`.
        """
        if not self._reads_race_a_writer() or not self.refresh():
            return
        # The writer committed while we read. It commits a view without steps *before* it reuses
        # their slots, so what we read is whole unless one of its steps left the view (stale_reads).
        if not read_may_be_stale(view, view_episodes, self._ring, self._episodes, first, last):
            return
        raise StaleReadError(f"the writer of {self.cache_path} overwrote or discarded steps while they were read; "
                             f"the view is refreshed (now {self._ring.count} steps from step number "
                             f"{self._ring.first_step}): index again") from cause

    def __getitem__(self, index: Any) -> Any:
        return self.get_at(index)

    def _reads_race_a_writer(self) -> bool:
        """A reader of a folder: the writer may reuse slots while we read them (a ring's overwrite, a discard)."""
        return self.read_only and self.cache_path is not None

    def _draw_and_read(self, draw: Any, read: Any = None) -> Any:
        """``read(draw())`` (default read: :meth:`get_at`); draw again only after a real race with the writer.

        Only :class:`StaleReadError` is retried (the writer reused slots while they were read; the view
        is refreshed by then). Any other error (a damaged file, a bad index) is raised as it is.
        """
        read = read or self.get_at
        for _ in range(MAX_READ_ATTEMPTS):
            try:
                return read(draw())
            except StaleReadError:
                continue
        raise RuntimeError(f"the writer of {self.cache_path} reused the slots being read {MAX_READ_ATTEMPTS} times "
                           "in a row while sampling")

    # -- other processes -------------------------------------------------------------------
    def refresh(self) -> bool:
        """Re-read what the writer has flushed (for read-only buffers). Returns True if anything changed."""
        self._check_open()
        if self.cache_path is None or not self.read_only:
            return False
        now = file_signature(self.cache_path)
        if now == self._meta_signature:
            return False
        meta, episodes, self._log = read_committed(self.cache_path, read_only=True, log=self._log,
                                                   previous=self._episodes)  # only the new log records
        self.storage.refresh()  # after reading the metadata: the storage holds at least what it names
        with damaged_file(self.cache_path / META_FILE):
            ring = RingState.from_json(meta["ring"])
            episodes.check_within(ring)
        self._ring, self._episodes = ring, episodes
        self._finals.refresh(meta, self._episodes.final_count)
        self._meta_signature = now
        return True

    def _after_fork(self) -> None:
        # A forked child reads what was flushed (FolderOwner made it read-only and let go of the lock);
        # the parent's staged steps and its writer thread are not the child's.
        self._staging, self._writer = None, None
        if self.cache_path is None:  # in memory: the child sees what the writer thread had written
            self._ring = self._planned = self._written
            self._episodes.forget_after(self._written.appended)
        if self.cache_path is not None:
            if self._log is not None and not self._log.read_only:
                self._log.close()  # the parent's: this process's copy of the descriptor only
                self._log = None
            self._meta_signature = None
            self.refresh()

    def __repr__(self) -> str:
        return (f"ReplayBuffer({self.cache_path or 'memory'}, steps={self._ring.count}, capacity={self.capacity}, "
                f"episodes={self._episodes.count(self._ring.appended)}, storage={type(self.storage).__name__})")


def short_parts(storage: SpaceStorage, count: int) -> str:
    """``" (<folder>: <n> slots, ...)"``: the sub-storages of a DictStorage holding fewer than ``count`` slots."""
    parts = [f"{sub.cache_path}: {len(sub)}" for sub in getattr(storage, "storages", {}).values() if len(sub) < count]
    return f" ({', '.join(parts)} slots)" if parts else ""


def _reopen(path: str, multiprocessing: bool) -> ReplayBuffer:
    return ReplayBuffer.load_from(path, read_only=True, multiprocessing=multiprocessing)


def _reopen_url(reopen_kwargs: dict[str, Any], multiprocessing: bool) -> ReplayBuffer:
    return remote_open.reopen_url(reopen_kwargs, multiprocessing)
