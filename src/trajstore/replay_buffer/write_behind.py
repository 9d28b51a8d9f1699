"""The write-behind half of :class:`~trajstore.replay_buffer.ReplayBuffer`: staging validated
steps, handing full blocks to the background writer, waiting for them, and rolling back after a
failed background write. The staging area and the writer thread are in
:mod:`~trajstore.replay_buffer.staging`; this mixin holds no state of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.staging import MAX_PENDING_BYTES, BackgroundWriter, StagingArea, block_steps_for
from trajstore.spaces import tree
from trajstore.storages._selection import span

if TYPE_CHECKING:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer


class WriteBehindMethods:
    """Staging and background writes of a :class:`~trajstore.replay_buffer.ReplayBuffer` writer."""

    def _extend_leaves(self: "ReplayBuffer", leaves: list[np.ndarray], n: int) -> None:
        """Stage ``n`` validated steps; full blocks go to the background writer."""
        self._raise_background_failure()
        if n == 0:
            return
        if self._staging is None:
            self._start_write_behind()
        for block, rows in self._staging.add(leaves, n):  # type: ignore[union-attr]
            self._submit(block, rows)
        self._episodes.on_extend(self._ring.appended)
        self._ring, _ = self._ring.plan_extend(n)
        if self._ring.first_step:  # nothing to drop before step 0 (a buffer that never overwrote)
            self._episodes.drop_before(self._ring.first_step)

    def _start_write_behind(self: "ReplayBuffer") -> None:
        templates = [(tuple(leaf.shape), np.dtype(leaf.dtype)) for _, leaf in tree.leaves(self.space)]
        step_bytes = sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for shape, dtype in templates)
        block = block_steps_for(step_bytes)
        self._staging = StagingArea(templates, block)
        max_pending = max(1, MAX_PENDING_BYTES // max(1, block * step_bytes))
        self.write_stats.block_steps, self.write_stats.max_pending_blocks = block, max_pending
        self._writer = BackgroundWriter(max_pending, self.write_stats)

    def _submit(self: "ReplayBuffer", leaves: list[np.ndarray], n: int) -> None:
        """Hand a block of ``n`` steps (the next after ``_planned``) to the background writer."""
        before = self._planned
        after, runs = before.plan_extend(n)
        if before.capacity is not None and self.cache_path is not None:
            self._drop_before_overwrite(after.appended)  # metadata first, on this thread
        self._planned = after

        def job() -> int:
            self._write_block(leaves, n, before, runs)
            self._written = after
            self._stats.on_written(before, after, leaves, n)  # the steps that reached the storage
            return n

        self._writer.submit(job, tag=(before, n))  # type: ignore[union-attr]

    def _write_block(self: "ReplayBuffer", leaves: list[np.ndarray], n: int, before: RingState, runs: list) -> int:
        """On the background thread: one storage write per leaf (two for a ring that wraps)."""
        if before.capacity is None:
            # Slots past the committed count (left by a crash) are reused before growing.
            count = before.count
            reuse = max(0, min(n, len(self.storage) - count))
            if reuse:
                self.storage.write_leaves(span(count, count + reuse), [v[:reuse] for v in leaves])
            if reuse < n:
                self.storage.extend_leaves([v[reuse:] for v in leaves], n - reuse)
        else:
            for rows, slots in runs:
                self.storage.write_leaves(span(slots.start, slots.stop), [v[rows] for v in leaves])
        return n

    def _write_staged(self: "ReplayBuffer") -> None:
        """Hand the partial block over and wait until every staged step is written; raise a failure."""
        if self._writer is None:
            return
        partial = self._staging.take()  # type: ignore[union-attr]
        if partial is not None and self._writer.failure is None:
            self._submit(*partial)
        self._writer.drain()
        self._raise_background_failure()

    def _raise_background_failure(self: "ReplayBuffer") -> None:
        """A background write failed: roll this writer back to before it, then raise its error."""
        writer = self._writer
        if writer is None or writer.failure is None:
            return
        writer.drain()  # later jobs are skipped; let them pass
        failure, (before, n) = writer.failure, writer.failed_tag
        writer.clear_failure()
        self._staging.clear()  # type: ignore[union-attr]
        self._ring = self._planned = self._written = before  # type: ignore[assignment]
        self._episodes.forget_after(before.appended)  # type: ignore[union-attr]
        if before.capacity is not None:  # type: ignore[union-attr]
            # The failed write may have overwritten some leaves of the oldest steps and not others
            # (a full disk in the middle): stop serving them. Nothing newer was touched.
            self._forget_before(before.appended + n - before.capacity)  # type: ignore
        raise failure

    def _forget_before(self: "ReplayBuffer", oldest: int) -> None:
        """Drop held steps older than step number ``oldest`` from this writer's view."""
        ring = self._ring
        oldest = min(ring.appended, max(oldest, ring.first_step))
        self._ring = self._planned = self._written = RingState(
            ring.capacity, ring.appended - oldest, oldest % ring.capacity if ring.capacity else 0, ring.appended)
        self._episodes.drop_before(oldest)
