"""The commit: data first, then metadata. Owns what ``trajstore.json`` says (the committed view).

A commit flushes the storage and the final observations written since the last one, appends the newly closed episodes to the episode log, writes
``stats.json`` when the statistics cover the view and the priority sets' next generation files
(:mod:`~trajstore.replay_buffer.priorities`; these are independent writes, each ending in an fsync,
run at once by :func:`~trajstore._fs.in_parallel`), then replaces ``trajstore.json``
atomically. A crash leaves the last committed state.

The rule that keeps a ring crash-safe while it overwrites slots (:func:`view_before_overwrite`):
before the writer overwrites the slots of committed steps, a view without them is committed.
"""

from __future__ import annotations

from pathlib import Path

from trajstore._fs import in_parallel
from trajstore.replay_buffer.episode_log import EpisodeLog
from trajstore.replay_buffer.final_observations import FinalObservations
from trajstore.replay_buffer.metadata import write_meta
from trajstore.replay_buffer.priorities import PriorityKeeper
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.stats_keeper import StatsKeeper
from trajstore.replay_buffer.view import View
from trajstore.spaces import Space
from trajstore.storages.base import SpaceStorage


def drop_ahead(capacity: int) -> int:
    """Steps a full ring drops from the committed metadata at a time before overwriting them:
    an eighth of the capacity, at least 1, at most 1024 (one extra metadata write per that many steps)."""
    return min(1024, max(1, capacity // 8))


def view_before_overwrite(committed: View, appended_after: int) -> View | None:
    """The committed view to write before a ring write of steps numbered up to ``appended_after``.

    That write overwrites the slots of steps older than ``appended_after - capacity``. If the
    metadata on disk still named them, a crash before the next flush would leave it naming slots
    that hold other steps' data. So the committed view is first shrunk (a subset of what is
    already durable: no data flush needed) by :func:`drop_ahead` steps at a time. The price: a
    crash of a writer whose ring is full can lose that many of the oldest steps as well as the
    unflushed ones. Returns ``None`` when the committed view does not need to change.
    """
    ring = committed.ring
    cap = ring.capacity
    assert cap is not None
    needed = appended_after - cap  # steps older than this get overwritten
    if needed <= ring.first_step:
        return None
    oldest = min(ring.appended, max(needed, ring.first_step + drop_ahead(cap)))
    episodes = committed.episodes.snapshot()
    episodes.drop_before(oldest)
    # Not ``oldest % cap``: a discard longer than the count rewinds step numbers past the slots.
    head = (ring.head + oldest - ring.first_step) % cap
    return View(RingState(cap, ring.appended - oldest, head, ring.appended), episodes)


class Committer:
    """Commits a writer's views to its folder (or, in memory, only flushes the storage).

    Attributes:
        committed: the view ``trajstore.json`` holds now (a snapshot: later appends do not reach it).
        commits: the number of the last commit; each commit writes the next one first in the file, so that
            readers' change signatures never repeat (:func:`~trajstore.replay_buffer.metadata.file_signature`).
    """

    def __init__(self, folder: Path | None, space: Space, storage: SpaceStorage, log: EpisodeLog | None,
                 stats: StatsKeeper, finals: FinalObservations, committed: View, *, check_bounds: bool,
                 commits: int = 0, priorities: PriorityKeeper | None = None):
        self.folder, self.space, self.storage, self.log = folder, space, storage, log
        self.priorities = priorities if priorities is not None else PriorityKeeper(folder)
        self.stats, self.finals, self.check_bounds = stats, finals, check_bounds
        self.commits = commits  # the number of the last commit (trajstore.json's "commit"): counted up by each
        self.committed = View(committed.ring, committed.episodes.snapshot())

    def commit(self, view: View, *, own: bool = True, flush_storage: bool = False) -> None:
        """Make ``view`` what the folder says: after the storage (if ``flush_storage``), the episode log
        and the statistics are durable, ``trajstore.json`` is replaced.

        ``own``: ``view`` is the writer's own table (the log may compact), not a ring's shrunk view.
        """
        if self.folder is None or self.log is None:
            if flush_storage:
                self.storage.flush()
            if own:
                self.finals.flush()
            return
        committed = View(view.ring, view.episodes.snapshot())
        log, folder, finals = self.log, self.folder, self.finals

        def flush_data() -> None:
            if flush_storage:
                self.storage.flush()
            if own:  # final observations written since the last commit (a ring's shrunk view names none new)
                finals.flush()

        keeper = self.priorities
        _, position, stats, priorities = in_parallel(
            flush_data,  # first: on this thread (it may fan out)
            lambda: log.prepare(committed.episodes, may_compact=own),  # durable before the metadata names it
            lambda: self.stats.commit(folder, committed.ring),
            # a ring's shrunk view: the files of the last commit (they hold the steps it keeps)
            (lambda: keeper.commit(committed.ring)) if own else keeper.committed)
        episodes = {**committed.episodes.counters_json(), "log": position.to_json()}
        write_meta(folder, self.space, self.storage.type_name, committed.ring, episodes, self.finals.descriptor(),
                   stats, check_bounds=self.check_bounds, commit=self.commits + 1, priorities=priorities)
        self.commits += 1
        log.committed(position)
        self.committed = committed

    def before_overwrite(self, appended_after: int) -> None:
        """A ring is about to write steps numbered up to ``appended_after``: first commit a view without
        the steps whose slots that write reuses (:func:`view_before_overwrite`)."""
        if self.folder is None:
            return
        shrunk = view_before_overwrite(self.committed, appended_after)
        if shrunk is not None:
            self.commit(shrunk, own=False)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
