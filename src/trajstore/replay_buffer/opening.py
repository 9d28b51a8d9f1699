"""Making and opening a buffer folder: the parts a :class:`~trajstore.replay_buffer.ReplayBuffer` is built of.

A buffer is a storage (its slots), the final observation storage, the statistics keeper, and
either a writer (:class:`~trajstore.replay_buffer.writer.BufferWriter`, which commits) or a
reader's folder view (:class:`~trajstore.replay_buffer.view.FolderView`, which follows the commits);
:class:`BufferParts` holds them. :func:`new_parts` makes them for a new buffer, :func:`open_parts`
for a folder on disk; both check everything before they return and release what they opened when
they fail.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trajstore._damage import damaged_file
from trajstore._lock import WriterLock
from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.errors import FormatError, LockedError
from trajstore.replay_buffer.commit import Committer
from trajstore.replay_buffer.damage_report import damage_in
from trajstore.replay_buffer.episode_log import EpisodeLog
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.final_observations import FinalObservations
from trajstore.replay_buffer.metadata import META_FILE, STORAGE_DIR
from trajstore.replay_buffer.priorities import FolderPriorities, PriorityKeeper, WriterPriorities
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.stats_keeper import StatsKeeper
from trajstore.replay_buffer.view import FixedView, FolderView, View, Views, take_view
from trajstore.replay_buffer.writer import BufferWriter
from trajstore.spaces import Space, space_from_json
from trajstore.storages._payload import PayloadSource, payload_under
from trajstore.storages.base import STORAGE_TYPES, SpaceStorage


@dataclass
class BufferParts:
    """What one open buffer is made of (exactly one of ``writer`` and ``folder_view`` for a folder;
    an in-memory buffer has a writer and no folder view)."""

    storage: SpaceStorage
    finals: FinalObservations
    stats: StatsKeeper
    writer: BufferWriter | None
    folder_view: FolderView | None
    check_bounds: bool
    priorities: Any = None  # the draws' priority source (priorities.WriterPriorities or FolderPriorities)


def new_parts(storage_cls: type[SpaceStorage], space: Space, *, capacity: int | None, path: Path | None,
              plan: Any, multiprocessing: bool, lock: WriterLock | None, check_bounds: bool,
              priorities: tuple[str, ...] = ()) -> BufferParts:
    """The parts of a new, empty buffer in the new folder ``path`` (or in memory), with the priority sets
    ``priorities`` (checked names), committed once."""
    storage = storage_cls._create_owned(space, capacity=capacity, path=path / STORAGE_DIR if path else None,
                                        plan=plan, multiprocessing=multiprocessing, lock=lock)
    log = EpisodeLog.start(path) if path is not None else None
    view = View(RingState(capacity), EpisodeTable())
    finals = FinalObservations(space, folder=path, capacity=capacity, read_only=False, multiprocessing=multiprocessing)
    stats = StatsKeeper(space)
    stats.start(view.ring)
    keeper = PriorityKeeper(path)
    for name in priorities:
        keeper.add(name, view.ring)
    committer = Committer(path, space, storage, log, stats, finals, view, check_bounds=check_bounds,
                          priorities=keeper)
    writer = BufferWriter(storage, space, committer, view, finals, stats, lock)
    writer.commit()
    return BufferParts(storage, finals, stats, writer, None, check_bounds, WriterPriorities(keeper))


def open_parts(path: Path, *, read_only: bool, multiprocessing: bool, lock: WriterLock | None,
               payload: PayloadSource | None = None, left_open: str = "interrupted") -> BufferParts:
    """The parts of the buffer folder ``path``; a writer (``read_only=False``, ``lock`` held) also ends
    the episode a dead writer left open (``left_open="interrupted"``) or discards its steps
    (``"discard"``), and migrates an older format (both committed at once).
    ``payload``: the source of the folder's payload files when they are elsewhere (a URL's mirror).

    A read-only open of a folder whose payload files are missing warns with a
    :class:`~trajstore.damage.DamagedBufferWarning` (the :class:`~trajstore.damage.Damage` summary); a
    writer's open refuses it before writing anything.

    Raises:
        FormatError: a missing or damaged file, or files that disagree (names the file); a writer's open
            of a folder with missing payload files (the damage summary: files, steps, episodes).
        UnknownTypeError: a storage type this trajstore does not know.
    """
    log = storage = finals = None
    try:
        meta, view, log, signature = take_view(path, read_only=read_only)
        if log is None and not read_only:  # format 1 or 2: migrated below
            log = EpisodeLog.start(path)
        with damaged_file(path / META_FILE):
            space = space_from_json(meta["space"])
            if meta["storage"]["dir"] != STORAGE_DIR:
                raise FormatError(f"unexpected storage folder {meta['storage']['dir']!r}")
            storage_cls = STORAGE_TYPES.get(meta["storage"]["type"])
            check_bounds = meta.get("check_bounds", True)
            if not isinstance(check_bounds, bool):
                raise FormatError(f"check_bounds must be true or false, got {check_bounds!r}")
        ring = view.ring
        storage = storage_cls._load_owned(path / STORAGE_DIR, space, capacity=ring.capacity, read_only=read_only,
                                          multiprocessing=multiprocessing, lock=lock,
                                          payload=payload_under(payload, STORAGE_DIR))
        if len(storage) < ring.count:
            raise FormatError(f"{path / META_FILE} records {ring.count} steps but the storage holds "
                              f"{len(storage)}{_short_parts(storage, ring.count)}")
        finals = FinalObservations(space, folder=path, capacity=ring.capacity, read_only=read_only,
                                   multiprocessing=multiprocessing)
        finals.open(meta, lock, view.episodes.final_count, payload=payload)
        stats = StatsKeeper(space)
        damage = damage_in(storage, finals.storage, view)
        if damage and not read_only:
            raise DamagedDataError(f"{path}: {damage.summary()}; a writer refuses a damaged folder (nothing was "
                              "written): open it read-only to read the other episodes, or copy them out with "
                              "`trajstore copy SRC DST --skip-damaged`")
        if damage:
            warnings.warn(DamagedBufferWarning(f"{path}: {damage.summary()}; the other steps read as usual "
                                               "(see ReplayBuffer.damaged, on_damaged= of the samplers)"),
                          stacklevel=3)
        if read_only:
            folder_view = FolderView(path, meta, view, log, signature, _refresher(storage, finals))
            return BufferParts(storage, finals, stats, None, folder_view, check_bounds, FolderPriorities(folder_view))
        stats.adopt(path, meta, ring)
        commits = meta.get("commit", 0)
        if type(commits) is not int or commits < 0:
            raise FormatError(f"{path / META_FILE}: commit must be a whole number >= 0, got {commits!r:.50}")
        keeper = PriorityKeeper.open(path, meta, ring)
        committer = Committer(path, space, storage, log, stats, finals, view, check_bounds=check_bounds,
                              commits=commits, priorities=keeper)
        writer = BufferWriter(storage, space, committer, view, finals, stats, lock)
        if left_open == "discard":
            writer.discard_episode()
        else:
            writer.end_interrupted_episode()
        if log is not None and (log.position is None or log.position.index is None):
            writer.commit(own=False)  # migrate: the log (or its index), then trajstore.json naming it
        return BufferParts(storage, finals, stats, writer, None, check_bounds, WriterPriorities(keeper))
    except BaseException as exc:
        for part in (storage, finals, log):
            if part is not None:
                part.close()
        if not isinstance(exc, (OSError, KeyError, TypeError, ValueError)) or isinstance(exc, (FormatError,
                                                                                              LockedError)):
            raise
        # What is left: the metadata's space or capacity differs from a storage's own (ValueError).
        raise FormatError(f"{path / META_FILE} does not match the files it names: {type(exc).__name__}: "
                          f"{exc}") from exc


def close_parts(*parts: Any) -> None:
    """Close each part given (``None`` for a part the buffer lacks), every one even if an earlier one fails;
    then raise the first failure."""
    failures = []
    for part in parts:
        try:
            if part is not None:
                part.close()
        except BaseException as exc:  # noqa: BLE001 - the others are closed all the same
            failures.append(exc)
    if failures:
        raise failures[0]


def _refresher(storage: SpaceStorage, finals: FinalObservations) -> Callable[[dict[str, Any], View], None]:
    def on_refresh(meta: dict[str, Any], view: View) -> None:
        storage.refresh()  # after reading the metadata: the storage holds at least what it names
        finals.refresh(meta, view.episodes.final_count)

    return on_refresh


def forked_views(writer: BufferWriter | None, views: Views, folder_view: FolderView | None, storage: SpaceStorage,
                 finals: FinalObservations, folder: Path | None) -> tuple[Views, FolderView | None]:
    """The views of a forked child (read-only): an in-memory writer's child sees what the background
    thread had written; a folder's child follows the folder's commits from the last one on."""
    if writer is not None and folder is None:
        return FixedView(writer.forked_view()), None
    if writer is not None:
        writer.committer.close()  # the parent's log: this process's copy of the descriptor only
        folder_view = FolderView(folder, {}, writer.committer.committed, None, None,  # type: ignore[arg-type]
                                 _refresher(storage, finals))
    if folder_view is None:
        return views, None
    folder_view.forget_signature()
    folder_view.refresh()
    return folder_view, folder_view


def _short_parts(storage: SpaceStorage, count: int) -> str:
    """``" (<folder>: <n> slots, ...)"``: the parts of a composite storage holding fewer than ``count`` slots."""
    parts = [f"{sub.cache_path}: {len(sub)}" for sub in storage.parts().values() if len(sub) < count]
    return f" ({', '.join(parts)} slots)" if parts else ""


def reopen_folder(path: str, multiprocessing: bool) -> Any:
    """The unpickling side of a buffer of a local folder: the folder opened read-only in this process."""
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    with warnings.catch_warnings():  # the process that pickled the buffer was warned already
        warnings.simplefilter("ignore", DamagedBufferWarning)
        return ReplayBuffer.load_from(path, read_only=True, multiprocessing=multiprocessing)
