"""Write-behind: steps are staged in RAM and written to the storage on a background thread.

:class:`StagingArea` copies validated steps into preallocated per-leaf blocks; a full block
(or the partial one, at a flush) becomes one storage write per leaf. :class:`BackgroundWriter`
runs those writes in order on one thread, with a bounded queue: when it is full, the caller
waits (backpressure, never a silent drop) and the time it waited is counted. The first error
of a write is kept and raised by the caller at its next call; the failed job and every later one
are held, in order, not dropped: :meth:`BackgroundWriter.retry` runs them again (a full disk that
was freed), so a failed write loses nothing. Storage writes address slots, so running one again
is safe.

Codec work (JPEG, PNG, video) and h5py calls then overlap with the caller's control loop;
libjpeg-turbo, zlib and libav release the GIL. No job runs while the process forks (a fork
hook waits for the running one), so a child never inherits a half-done write or a held lock.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: Target bytes of one block: large enough that a block write costs little per step, small
#: enough that a flush waits for little. A block holds at least 1 and at most BLOCK_MAX_STEPS steps.
#: 4 MiB: the fixed cost of a block (an HDF5 write per low-dim leaf, the statistics' NumPy calls,
#: the codec pool's hand-off) is ~1 ms; at 1 MiB a 128x128 camera step (49 KB) made blocks of 21
#: steps, at 4 MiB they are 64 (the append workload of ``benchmarks/append.py``, in-process: CPU per
#: step 405-435 -> 322-356 us, two runs each).
BLOCK_BYTES = 4 << 20
BLOCK_MAX_STEPS = 64
#: Staged bytes allowed beyond the block being filled; ``append`` waits when they are exceeded.
MAX_PENDING_BYTES = 256 << 20


@dataclass
class WriteStats:
    """What write-behind has done since the buffer was opened.

    Attributes:
        blocks_written: storage writes completed by the background thread.
        steps_written: steps in those writes.
        blocked_seconds: time ``append``/``extend`` waited for room in the queue (s).
        flush_wait_seconds: time ``flush``/``end_episode``/reads waited for pending writes (s).
        block_steps: steps per block for this buffer's space.
        max_pending_blocks: blocks that may wait in the queue before ``append`` blocks.
    """

    blocks_written: int = 0
    steps_written: int = 0
    blocked_seconds: float = 0.0
    flush_wait_seconds: float = 0.0
    block_steps: int = 0
    max_pending_blocks: int = 0


def block_steps_for(step_bytes: int) -> int:
    """Steps per block for steps of ``step_bytes`` bytes (see :data:`BLOCK_BYTES`)."""
    return int(min(BLOCK_MAX_STEPS, max(1, BLOCK_BYTES // max(1, step_bytes))))


class StagingArea:
    """Per-leaf blocks of ``block_steps`` rows; rows are copies, so callers may reuse their arrays."""

    def __init__(self, leaf_templates: list[tuple[tuple[int, ...], np.dtype]], block_steps: int):
        self._templates = leaf_templates
        self.block_steps = block_steps
        self._blocks: list[np.ndarray] | None = None
        self.n = 0  # rows filled in the current block

    def add(self, leaves: list[np.ndarray], n: int) -> list[tuple[list[np.ndarray], int]]:
        """Stage ``n`` rows per leaf; returns the blocks that became full (leaf arrays, rows)."""
        full: list[tuple[list[np.ndarray], int]] = []
        done = 0
        while done < n:
            if self.n == 0 and n - done >= self.block_steps:  # a whole block: one copy of the slice
                k = n - done
                full.append(([np.array(v[done:done + k]) for v in leaves], k))
                done += k
                continue
            if self._blocks is None:
                self._blocks = [np.empty((self.block_steps, *shape), dtype) for shape, dtype in self._templates]
            k = min(n - done, self.block_steps - self.n)
            for block, v in zip(self._blocks, leaves):
                block[self.n:self.n + k] = v[done:done + k]
            self.n += k
            done += k
            if self.n == self.block_steps:
                full.append((self._blocks, self.n))
                self._blocks, self.n = None, 0
        return full

    def rows_leaving(self, n: int) -> int:
        """How many of ``n`` rows :meth:`add` would hand over in full blocks now (the rest stay staged)."""
        if self.n == 0:
            return n if n >= self.block_steps else 0
        room = self.block_steps - self.n
        if n < room:
            return 0
        rest = n - room
        return room + (rest if rest >= self.block_steps else 0)

    def take(self) -> tuple[list[np.ndarray], int] | None:
        """The partial block (its filled rows), or None; the area is empty afterwards."""
        if self.n == 0:
            return None
        blocks, n = self._blocks, self.n
        self._blocks, self.n = None, 0
        return [b[:n] for b in blocks], n  # type: ignore[union-attr]

    def clear(self) -> None:
        self._blocks, self.n = None, 0


class BackgroundWriter:
    """Runs jobs in submission order on one daemon thread; keeps the first error.

    At most ``max_pending`` blocks wait: a job weighs the blocks it holds (an ``extend`` of many steps is one
    job of many blocks), and :meth:`submit` waits while the queued weight would pass the limit (a job heavier
    than the limit waits for an empty queue), so pending bytes stay near ``MAX_PENDING_BYTES``."""

    def __init__(self, max_pending: int, stats: WriteStats):
        self._queue: queue.Queue = queue.Queue()
        self._max_pending = max(1, max_pending)
        self._pending = 0  # blocks queued or running
        self._room = threading.Condition()
        self._stats = stats
        self._running = threading.Lock()  # held while a job runs (and across a fork)
        self.failure: BaseException | None = None
        self.failed_tag: object = None  # what the failed job was submitted with
        self._held: list[tuple[Callable[[], int], object, int]] = []  # the failed job and later ones, in order
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def submit(self, job: Callable[[], int], tag: object = None, weight: int = 1, *, wait: bool = True) -> None:
        """Queue ``job`` (it returns the steps it wrote) of ``weight`` blocks; waits while the queue is full
        (``wait=False``: queue it at once, for jobs whose data is held already). An exception while waiting
        (a Ctrl-C) queues the job anyway, then goes on: the caller's bookkeeping counts it as handed over."""
        if self._thread is None:
            self._thread = threading.Thread(target=_run, args=(self._queue, weakref.ref(self)),
                                            name="trajstore-writer", daemon=True)
            self._thread.start()
            _LIVE.add(self)
        weight = max(1, int(weight))
        with self._room:
            try:
                if wait and not self._fits(weight):
                    start = time.perf_counter()
                    try:
                        self._room.wait_for(lambda: self._fits(weight))
                    finally:
                        self._stats.blocked_seconds += time.perf_counter() - start
            finally:  # also when the wait is interrupted: the job is queued, never dropped
                self._pending += weight
                self._queue.put((job, tag, weight))

    def _fits(self, weight: int) -> bool:
        return self._pending == 0 or self._pending + weight <= self._max_pending

    def _release(self, weight: int) -> None:
        with self._room:
            self._pending -= weight
            self._room.notify_all()

    def drain(self) -> None:
        """Wait until every queued job has run (or been skipped after a failure)."""
        if self._thread is None:
            return
        start = time.perf_counter()
        self._queue.join()
        self._stats.flush_wait_seconds += time.perf_counter() - start

    @property
    def held(self) -> int:
        """Jobs held after a failure (the failed one and every later one), waiting for :meth:`retry`."""
        return len(self._held)

    def retry(self) -> None:
        """After a failure: queue the held jobs again, in order (call after :meth:`drain`). The next
        failure is kept as the first was."""
        held, self._held = self._held, []
        self.failure, self.failed_tag = None, None
        for job, tag, weight in held:
            self.submit(job, tag, weight, wait=False)  # their data is held already: waiting frees nothing

    def close(self) -> None:
        """Finish queued jobs and stop the thread. Idempotent."""
        if self._thread is not None and os.getpid() == self._pid:
            self._queue.put(None)
            self._thread.join()
        self._thread = None
        _LIVE.discard(self)

    def _execute(self, job: Callable[[], int], tag: object, weight: int) -> None:
        try:
            self._run_job(job, tag, weight)
        finally:
            self._release(weight)

    def _run_job(self, job: Callable[[], int], tag: object, weight: int) -> None:
        if self.failure is not None:
            self._held.append((job, tag, weight))  # after a failure nothing later is written before it is
            return
        with self._running:
            try:
                steps = job()
            except BaseException as exc:  # kept for the caller's next call
                self.failure, self.failed_tag = exc, tag
                self._held.append((job, tag, weight))
                return
        self._stats.blocks_written += 1
        self._stats.steps_written += steps

    def forget_after_fork(self) -> None:
        """In a forked child: the thread does not exist here; drop everything queued."""
        self._thread = None
        self._held = []
        self._queue = queue.Queue()
        self._pending, self._room = 0, threading.Condition()
        self._pid = os.getpid()
        _LIVE.discard(self)


def _run(jobs: queue.Queue, owner: "weakref.ref[BackgroundWriter]") -> None:
    while True:
        item = jobs.get()
        try:
            if item is None:
                return
            writer = owner()
            if writer is not None:
                writer._execute(*item)
            del writer
        finally:
            del item
            jobs.task_done()


#: Writers whose thread runs in this process (see the fork hooks below).
_LIVE: "weakref.WeakSet[BackgroundWriter]" = weakref.WeakSet()
_HELD: list[BackgroundWriter] = []


def _before_fork() -> None:
    for writer in list(_LIVE):  # wait for the running job; none starts until after the fork
        writer._running.acquire()
        _HELD.append(writer)


def _after_fork_in_parent() -> None:
    while _HELD:
        _HELD.pop()._running.release()


def _after_fork_in_child() -> None:
    while _HELD:
        writer = _HELD.pop()
        writer._running = threading.Lock()
        writer.forget_after_fork()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
