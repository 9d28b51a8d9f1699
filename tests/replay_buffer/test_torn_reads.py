"""No torn read: readers of a ring that a writer process keeps overwriting get whole steps or a
``StaleReadError``, never a step whose leaves come from different steps.

The ring (:mod:`tests.replay_buffer.torn_reads`) holds 64 steps and wraps several times a second;
every leaf (PNG frame, HDF5 scalar, memmap pair) encodes its step number, so every step read is
checked: its leaves agree with each other and, where the reader knows its view, with the step
number its logical index names (``total_steps - len + i``). ``StaleReadError`` is allowed and
counted; a torn or misplaced step never.

How many reads: a reader that opened a ring while the writer started overwriting its oldest
slots got torn steps, and no ``StaleReadError``, in about 1 read of 750 (between 1/500 and 1/1000)
while ``load_from`` took the metadata's change signature after reading the metadata (a commit in
between left an older view under the newer signature, so the staleness check saw no change).
Catching a rate ``p`` with probability 99% needs ``N >= ln(0.01) / ln(1 - p)`` reads: 3,452 for
``p = 1/750`` (2,301 for 1/500, 4,603 for 1/1000). Each fresh-opening reader here makes
:data:`FRESH_READS` = 3,500 reads: a 99.06% chance at 1/750 (99.91% at 1/500, 97.0% at 1/1000).
This test's ring (commits every 8 steps, a tiny step) tore far more often under that code: 258
and 413 of 3,500 reads in two runs without ``multiprocessing=True``, 88 of 3,500 with it (and
a 20 ms sleep put after the metadata read, in a separate diagnostic run, raised that to 288 and
317 of 500, without and with). With the signature taken first: 0 of 3,500 in every run (and 0 of
500 with the sleep, where 474 and 467 reads raised ``StaleReadError`` instead). The refreshing
reader and the DataLoader workers saw no torn step either way. The file takes 46-51 s on a quiet
2-core machine (each fresh-opening reader about 15 s).

``TRAJSTORE_SOAK=1`` makes every reader read 10 times as often (35,000 reads catch 1/1000 with
probability above 99.99%): with the fix, 0 torn or misplaced steps in 35,000 reads of each
fresh-opening reader and 35,000 rounds of the refreshing one (7.5 min on a loaded machine).
"""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer

from tests.replay_buffer.torn_reads import (CAPACITY, Tally, check_steps, read_fresh, read_refreshing,
                                            write_ring)

SOAK = 10 if os.environ.get("TRAJSTORE_SOAK") == "1" else 1
FRESH_READS = 3500 * SOAK  # see the module docstring
REFRESH_READS = 3500 * SOAK
LOADER_BATCHES = 300 * SOAK  # batches of a whole ring (64 steps) each
MIN_WRAPS = 5  # the ring turned over at least this often while it was read


@pytest.fixture
def live_ring(tmp_path, request):
    """The folder of a ring that a writer process overwrites until the test ends (pausing
    ``request.param`` s after each episode, if parametrized); checks afterwards that the writer closed
    cleanly and wrapped the ring at least :data:`MIN_WRAPS` times meanwhile."""
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    path = tmp_path / "rb"
    writer = ctx.Process(target=write_ring, args=(str(path), ready, stop, getattr(request, "param", 0.0)))
    writer.start()
    try:
        assert ready.wait(120), "the writer did not start"
        with ReplayBuffer.load_from(path) as rb:
            start = rb.total_steps
        yield path
    finally:
        stop.set()
        writer.join(120)
    assert writer.exitcode == 0
    with ReplayBuffer.load_from(path) as rb:
        assert rb.total_steps - start >= MIN_WRAPS * CAPACITY, (start, rb.total_steps)


def in_view_order(step: np.ndarray) -> np.ndarray:
    """The step numbers of the indices 0..63 read from one view starting at ``step[0]`` whose length
    ``c`` is where ``step`` first stops counting up by one (64: it never does)."""
    breaks = np.flatnonzero(np.diff(step) != 1)
    c = int(breaks[0]) + 1 if len(breaks) else len(step)
    return step[0] + np.arange(len(step)) % c


def assert_whole(tally: Tally, reads: int) -> None:
    assert tally.reads == reads
    assert tally.steps > 0
    assert (tally.torn, tally.misplaced) == (0, 0), (
        f"{tally.bad_reads} of {tally.reads} reads returned torn ({tally.torn}) or misplaced ({tally.misplaced}) "
        f"steps ({tally.stale} stale reads): " + "; ".join(tally.examples))


@pytest.mark.slow
@pytest.mark.parametrize("multiprocessing", [False, True])
def test_fresh_readers_of_an_overwritten_ring_get_whole_steps(live_ring, multiprocessing):
    tally = read_fresh(live_ring, FRESH_READS, multiprocessing)
    assert_whole(tally, FRESH_READS)


@pytest.mark.slow
def test_refreshing_reader_of_an_overwritten_ring_gets_whole_steps(live_ring):
    tally = read_refreshing(live_ring, REFRESH_READS)
    assert_whole(tally, REFRESH_READS)


@pytest.mark.slow
@pytest.mark.parametrize("live_ring", [0.02], indirect=True)
def test_dataloader_workers_of_an_overwritten_ring_get_whole_steps(live_ring):
    """Two spawned workers over ``ReplayBufferDataset(path, refresh=True)``, each batch the indices
    0..63: every item's leaves agree, and a batch is one view's steps in order (the dataset wraps the
    indices onto a view shrunk to ``c`` steps: item ``i`` is then the view's step ``i % c``).

    The writer pauses 20 ms after each episode (the ring still wraps about 5 times a second): a batch
    of the whole ring is stale whenever the writer drops the oldest steps while it is read, and the
    dataset gives up (``RuntimeError``) after 16 stale reads in a row, which an unpaused writer of
    this tiny ring can cause on a loaded machine."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset

    dataset = ReplayBufferDataset(live_ring, refresh=True)
    order = [i % CAPACITY for i in range(LOADER_BATCHES * CAPACITY)]
    loader = DataLoader(dataset, batch_size=CAPACITY, sampler=order, num_workers=2,
                        multiprocessing_context="spawn", generator=torch.Generator().manual_seed(0))
    tally = Tally()
    for b, batch in enumerate(loader):
        tally.reads += 1
        batch = {k: v.numpy() for k, v in batch.items()}
        check_steps(batch, in_view_order(batch["step"]), tally, f"batch {b}")
    dataset.buffer.close()
    assert_whole(tally, LOADER_BATCHES)
    assert tally.steps == LOADER_BATCHES * CAPACITY
