"""The writer of a buffer: staging, ring transitions, background block writes, rollback, episodes, commits.

One :class:`BufferWriter` per writable buffer owns every piece of state that changes as steps are
appended. Its ring states, one per role, each moved forward in one place:

* :attr:`~BufferWriter.appended`: every step appended, the staged ones included (what ``len`` counts
  and what the writer's own reads see, after :meth:`~BufferWriter.drain`);
* :attr:`~BufferWriter.submitted`: after the blocks handed to the background thread (a block's slots
  are planned once, when it is submitted);
* :attr:`~BufferWriter.written`: after the blocks the background thread wrote;
* ``committer.committed``: what the folder says (:mod:`~trajstore.replay_buffer.commit`).

A step is validated by the buffer (the edge), copied into a staging block
(:mod:`~trajstore.replay_buffer.staging`), and written behind as one storage write per leaf.

A failed write loses nothing and no later call hides it: the failed block and every later one
stay held (in RAM, in order), ``appended`` keeps them, and each later call that needs them written
(``extend``, ``flush``, ``end_episode``, reads of the writer's view, ``close``) first writes them
again; while that fails (the disk is still full) it raises and commits nothing, and once it
succeeds (space was freed) the steps are written and committed like any others, whatever the
storage. A ring's commit that must precede a block's write (:func:`~trajstore.replay_buffer.commit.
view_before_overwrite`) is made before the steps leave staging: when it fails, ``extend`` raises
with nothing of its batch staged, and ``flush`` keeps the partial block staged.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from trajstore._lock import WriterLock
from trajstore.replay_buffer.commit import Committer
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.final_observations import FinalObservations
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.staging import MAX_PENDING_BYTES, BackgroundWriter, StagingArea, WriteStats, \
    block_steps_for
from trajstore.replay_buffer.stats_keeper import StatsKeeper
from trajstore.replay_buffer.view import View
from trajstore.spaces import Space, tree
from trajstore.storages._selection import Selection, span
from trajstore.storages.base import SpaceStorage


class BufferWriter:
    """Appends, episodes and commits of one writable buffer (see the module docstring).

    Attributes:
        appended, submitted, written: the ring states of the module docstring.
        episodes: the live episode table (closed episodes, the open one's start).
        stats: the statistics accumulated as blocks are written.
        write_stats: what write-behind has done (:class:`~trajstore.replay_buffer.staging.WriteStats`).
    """

    def __init__(self, storage: SpaceStorage, space: Space, committer: Committer, view: View,
                 finals: FinalObservations, stats: StatsKeeper, lock: WriterLock | None):
        self.storage, self.space, self.committer, self.finals, self.stats = storage, space, committer, finals, stats
        self._lock = lock
        self.appended = self.submitted = self.written = view.ring
        self.episodes: EpisodeTable = view.episodes
        self.write_stats = WriteStats()
        self._slots = len(storage)  # slots the storage holds (unbounded: may exceed the count after a crash)
        self._staging: StagingArea | None = None
        self._thread: BackgroundWriter | None = None

    @property
    def priorities(self) -> Any:
        """The :class:`~trajstore.replay_buffer.priorities.PriorityKeeper` of the writer's priority sets."""
        return self.committer.priorities

    def view(self) -> View:
        """The writer's own view: every step appended (call :meth:`drain` before reading through it)."""
        return View(self.appended, self.episodes)

    # -- appending -------------------------------------------------------------------------
    def extend(self, leaves: list[np.ndarray], n: int) -> None:
        """Stage ``n`` validated steps (one array per leaf, leading axis ``n``); full blocks go to the
        background thread.

        Raises:
            OSError, ...: held blocks of a failed write still fail, or a ring's commit before the
                overwrite failed; nothing of these ``n`` steps is staged.
        """
        self.retry_held()
        if n == 0:
            return
        staging = self._staging or self._start()
        leaving = staging.rows_leaving(n)
        if leaving and self.appended.capacity is not None:
            # Metadata first, before the steps leave staging: a failure leaves this call without effect.
            self.committer.before_overwrite(self.appended.appended + leaving)
        full = staging.add(leaves, n)
        try:
            for i, (block, rows) in enumerate(full):
                self._submit(block, rows)
        except BaseException:  # a Ctrl-C while waiting for room: the blocks are out of staging, so hand them all
            for block, rows in full[i + 1:]:  # over and count the steps before it goes on (no gap in the ring)
                self._submit(block, rows, wait=False)
            self._advance(n)
            raise
        self._advance(n)

    def _advance(self, n: int) -> None:
        """Count ``n`` steps handed over (staged or submitted) as appended."""
        self.episodes.on_extend(self.appended.appended)
        self.appended = self.appended.advanced(n)
        if self.appended.first_step:  # nothing to drop before step 0 (a buffer that never overwrote)
            self.episodes.drop_before(self.appended.first_step)

    def _start(self) -> StagingArea:
        templates = [(tuple(leaf.shape), np.dtype(leaf.dtype)) for _, leaf in tree.leaves(self.space)]
        step_bytes = sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for shape, dtype in templates)
        block = block_steps_for(step_bytes)
        self._staging = StagingArea(templates, block)
        max_pending = max(1, MAX_PENDING_BYTES // max(1, block * step_bytes))
        self.write_stats.block_steps, self.write_stats.max_pending_blocks = block, max_pending
        self._thread = BackgroundWriter(max_pending, self.write_stats)
        return self._staging

    def _submit(self, leaves: list[np.ndarray], n: int, *, wait: bool = True) -> None:
        """Hand a block of ``n`` steps (the next after :attr:`submitted`) to the background thread (a
        ring's commit before the overwrite was made by the caller)."""
        before = self.submitted
        after, runs = before.plan_extend(n)  # the block's slots, planned once
        self.submitted = after

        def job() -> int:
            self._write_block(leaves, n, before, runs)
            self.written = after
            self.stats.on_written(before, after, leaves, n)  # the steps that reached the storage
            return n

        assert self._thread is not None  # started with the staging area
        weight = -(-n // self._staging.block_steps)  # the blocks it holds
        self._thread.submit(job, tag=(before, n), weight=weight, wait=wait)

    def _write_block(self, leaves: list[np.ndarray], n: int, before: RingState, runs: list) -> None:
        """On the background thread: one storage write per leaf (two for a ring that wraps)."""
        if before.capacity is None:
            # Slots past the committed count (left by a crash, or a discard) are reused before growing.
            count = before.count
            reuse = max(0, min(n, self._slots - count))
            if reuse:
                self.storage.write_leaves(span(count, count + reuse), [v[:reuse] for v in leaves])
            if reuse < n:
                self.storage.extend_leaves([v[reuse:] for v in leaves], n - reuse)
                self._slots = count + n
        else:
            for rows, slots in runs:
                self.storage.write_leaves(span(slots.start, slots.stop), [v[rows] for v in leaves])

    def drain(self) -> None:
        """Hand the partial block over and wait until every staged step is written.

        Raises:
            OSError, ...: a write failed (held blocks are written again first; see the module
                docstring), or a ring's commit before the overwrite failed (the partial block stays
                staged). Nothing appended is dropped.
        """
        if self._thread is None or self._staging is None:
            return
        self.retry_held()
        if self._staging.n and self.appended.capacity is not None:
            self.committer.before_overwrite(self.appended.appended)  # the partial block stays staged if this fails
        partial = self._staging.take()
        if partial is not None:
            self._submit(*partial)
        self._thread.drain()
        if self._thread.failure is not None:
            raise self._thread.failure

    def retry_held(self) -> None:
        """After a failed write: write the held blocks again, in order; raise if that fails again."""
        thread = self._thread
        if thread is None or thread.failure is None:
            return
        thread.drain()  # the blocks queued after the failure are held, not written
        self._slots = len(self.storage)  # a failed extend left the storage's length as it was
        thread.retry()
        thread.drain()
        if thread.failure is not None:
            raise thread.failure

    def set_at(self, logical: Selection, leaves: list[np.ndarray]) -> None:
        """Overwrite held steps (validated leaves) at a logical selection of the writer's view."""
        self.drain()
        self.stats.on_overwrite()  # before the write: a failed write leaves no statistics of the old values
        self.storage.write(self.appended.slots_of(logical), leaves)

    # -- episodes and commits --------------------------------------------------------------
    def end_episode(self, final: list[np.ndarray] | None, data: dict[str, Any], interrupted: bool, *,
                    flush: bool = True) -> None:
        """Close the open episode with its checked JSON ``data`` and validated ``final`` observation, and
        commit it with its steps (durable when this returns). With ``flush=False``: O(1), no wait for the
        background thread and no fsync; the boundary is kept in memory, the steps keep batching in the
        staged blocks, and the next commit (``flush``, ``end_episode``, ``close``) writes, flushes and
        commits them with the final observations; a crash before it loses exactly those episodes.

        All or nothing: when it raises, the episode is still open (nothing of it committed, its steps
        held), and ``end_episode`` may be called again with the same arguments.

        Raises:
            ValueError: data or a final observation but no step appended since the last episode ended.
            OSError, ...: a write or the commit failed (see the module docstring).
        """
        if (data or final is not None) and not self.episodes.is_open(self.appended.appended):
            given = sorted(data) + (["final_observation"] if final is not None else [])
            raise ValueError(f"end_episode got {given} but there is no episode to end: no step was appended "
                             "since the last end_episode")
        if not flush:
            # O(1), no wait: the boundary is a step number in the table; the staged steps keep batching
            # across it and are written, flushed and committed at the next commit. Only a failed
            # background write surfaces here (written again first, as by drain).
            self.retry_held()
            self._write_final(final)
            self.episodes.end_episode(self.appended.appended, data=data, with_final=final is not None,
                                      interrupted=interrupted)
            return
        self.drain()  # a failed background write surfaces before the episode is closed
        self._write_final(final)
        before = self.episodes.snapshot()
        self.episodes.end_episode(self.appended.appended, data=data, with_final=final is not None,
                                  interrupted=interrupted)
        try:
            self.commit(flush_storage=True)
        except BaseException:
            self.episodes = before  # still open: a retry closes it again (the log rewrites what was not named)
            raise

    def _write_final(self, final: list[np.ndarray] | None) -> None:
        """Write (not flush: the commit does) the closing episode's final observation into slot
        ``final_count`` (again if a retry: nothing names it until the commit). A ring first commits a
        view without the episodes whose steps the staged ones overwrite: the slot may be one of theirs."""
        if final is None:
            return
        if self.appended.capacity is not None:
            self.committer.before_overwrite(self.appended.appended)
        self.finals.write(self.episodes.final_count, final, layout_of=self.storage, lock=self._lock)

    def discard_episode(self) -> int:
        """Drop the open episode's steps (committed at once); returns how many."""
        self.drain()  # staged steps of the episode reach their slots first: nothing is written after the rewind
        n = self.episodes.discard_open(self.appended.appended)
        if n:
            before = self.appended
            self.appended = self.submitted = self.written = self.appended.rewind(n)
            self.committer.priorities.discarded(before, self.appended)
            self.stats.on_rewind(self.appended)
            # Episodes closed with flush=False before it are committed too: their steps are flushed first.
            self.commit(flush_storage=self.unflushed() > 0)
        return n

    def end_interrupted_episode(self) -> None:
        """Close (and commit) the episode a dead writer left open, as interrupted."""
        if self.episodes.end_episode(self.appended.appended, interrupted=True):
            self.episodes.drop_before(self.appended.first_step)
            self.commit()

    def commit(self, *, own: bool = True, flush_storage: bool = False) -> None:
        """Commit the writer's view (the staged steps must have been drained); keep the statistics of an
        episode boundary for a later discard."""
        if not self.episodes.is_open(self.appended.appended):
            self.stats.mark_boundary(self.appended)
        self.committer.commit(self.view(), own=own, flush_storage=flush_storage)

    def flush(self) -> None:
        """Every step appended so far durable and committed."""
        self.drain()
        self.commit(flush_storage=True)

    def unflushed(self) -> int:
        """Steps appended since the last commit."""
        return self.appended.appended - self.committer.committed.ring.appended

    def warn_unflushed(self, folder: Any) -> None:
        """Warn (a buffer dropped without ``close``) that the steps since the last commit are lost."""
        lost = self.unflushed()
        if folder is not None and lost > 0:
            warnings.warn(f"ReplayBuffer at {folder} was not closed: {lost} steps appended since the last flush() "
                          "are lost; use `with ReplayBuffer...` or call close()", stacklevel=3)

    def close(self) -> None:
        """Stop the background thread (after the jobs queued) and close the episode log."""
        if self._thread is not None:
            self._thread.close()
        self.committer.close()

    def forked_view(self) -> View:
        """In a forked child of an in-memory writer: the steps the background thread had written."""
        self.episodes.forget_after(self.written.appended)
        return View(self.written, self.episodes)


class WriterViews:
    """The writer's reads: under its own view, after its staged steps are written. Never races."""

    races_writer = False

    def __init__(self, writer: BufferWriter | None, name: str):
        assert writer is not None  # a buffer without a folder view has a writer
        self._writer, self.name = writer, name

    def current(self) -> View:
        self._writer.drain()  # the writer reads its own staged steps
        return self._writer.view()

    def latest(self) -> View:
        return self._writer.view()

    def refresh(self) -> bool:
        return False
