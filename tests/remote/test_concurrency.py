"""Many processes at once: reader processes open and read the URL while a push loop publishes a
buffer that a writer keeps recording into (a ring that wraps many times a second, or an unbounded
one). Every read is one whole snapshot: each held episode's steps are the ones that episode recorded
(checked against their step numbers on the lossless leaves), and in a ring whose every leaf encodes
its step number, every step's leaves agree with each other and with its logical index.

``TRAJSTORE_SOAK=1`` makes each reader open the URL 10 times as often. Measured with it (capacity
48): 80 opens of 38 different pushed snapshots, all whole."""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from trajstore.errors import RetriesExhaustedError
from trajstore.remote import push

from trajstore.replay_buffer import ReplayBuffer

from tests.remote.conftest import frame, make_buffer, record, step
from tests.replay_buffer.torn_reads import CAPACITY, Tally, read_view, write_ring

SOAK = 10 if os.environ.get("TRAJSTORE_SOAK") == "1" else 1
ROUNDS = 4 * SOAK  # opens of the URL by each of the two reader processes
URL_ROUNDS = 15 * SOAK  # the same, for the step-encoded ring


LENGTH = 12  # steps of every episode that conftest.record records
#: How push gives up (documented) when the writer reuses the ring's slots faster than it can copy them.
GAVE_UP = "reused the slots being copied"


def push_once(folder, url: str, storage_options: dict) -> None:
    """Push ``folder`` to ``url``; again after a push that gave up because the writer outran its copy
    (on a loaded machine): that push published nothing, the previous snapshot stays."""
    while True:
        try:
            push(folder, url, storage_options)
            return
        except RetriesExhaustedError as exc:
            if GAVE_UP not in str(exc):
                raise


def push_loop(folder, url: str, storage_options: dict, stop: threading.Event, errors: list) -> None:
    """:func:`push_once` until ``stop`` is set; an error goes to ``errors`` and ends the loop."""
    try:
        while not stop.is_set():
            push_once(folder, url, storage_options)
    except BaseException as exc:  # noqa: BLE001  (reported by the test)
        errors.append(exc)


def _read_and_check(url: str, storage_options: dict, rounds: int) -> list[tuple[int, str]]:
    """Open the URL ``rounds`` times; check every step of every held episode against its step number
    on the lossless leaves (memmap, HDF5, 16-bit PNG). Returns ``(steps held, snapshot id)`` of each
    open (runs in a spawned process).

    ``Episode.start`` and ``stop`` are logical positions in the view, not step numbers: the episode
    of task ``e`` recorded the values of ``n = e * 100 + t`` at its steps ``t = 0..11`` and ended at
    logical ``stop``, so logical row ``r`` holds its step ``t = r - (stop - 12)`` (a ring may have
    overwritten its first steps: then ``start > stop - 12``, ``overwritten``).
    """
    from trajstore.replay_buffer import ReplayBuffer

    seen = []
    for _ in range(rounds):
        with ReplayBuffer.load_from(url, storage_options=storage_options) as rb:
            data = rb[:]
            episodes = rb.episodes
            assert [ep.start for ep in episodes[1:]] == [ep.stop for ep in episodes[:-1]]  # they tile the view
            assert not episodes or (episodes[0].start, episodes[-1].stop) == (0, len(rb))
            for ep in episodes:
                assert ep.done, ep  # the writer commits at end_episode only: no open episode is published
                assert len(ep) == LENGTH or (ep.overwritten and ep is episodes[0] and 0 < len(ep) < LENGTH), ep
                e = int(ep.data["task"].split()[1])
                rows = np.arange(ep.start, ep.stop)
                n = e * 100 + rows - (ep.stop - LENGTH)
                where = f"{rb.published_snapshot}: episode {ep}, rows {ep.start}..{ep.stop - 1}"
                np.testing.assert_array_equal(data["action"][rows],  # memmap
                                              np.stack([np.sin(n), np.cos(n)], 1).astype(np.float32), err_msg=where)
                np.testing.assert_array_equal(data["observation"]["joints"][rows],  # HDF5
                                              np.repeat(((n % 50) / 10).astype(np.float32)[:, None], 4, 1),
                                              err_msg=where)
                np.testing.assert_array_equal(data["reward"][rows], (n % 7).astype(np.float32), err_msg=where)
                for row, k in zip(rows, n):  # 16-bit PNG frames from the bucket: exact
                    np.testing.assert_array_equal(data["observation"]["depth"][row], frame(int(k), 0, np.uint16),
                                                  err_msg=where)
            seen.append((len(rb), rb.published_snapshot[1]))
    return seen


def test_the_check_passes_a_quiet_ring_and_fails_a_misplaced_step(tmp_path, bucket_url, storage_options):
    """The check of the test below on a ring no one writes: 5 episodes of 12 steps in 48 slots hold
    steps 12..59 (logical 0..47, the first episode gone); then one step of another episode."""
    rb = make_buffer(tmp_path / "rb", capacity=48, episodes=5)
    rb.flush()
    assert (rb.total_steps - len(rb), [(ep.start, ep.stop) for ep in rb.episodes]) == (
        12, [(0, 12), (12, 24), (24, 36), (36, 48)])
    push(tmp_path / "rb", bucket_url, storage_options)
    assert [n for n, _ in _read_and_check(bucket_url, storage_options, 1)] == [48]
    rb.set_at(20, step(100 * 1 + 8, False))  # logical 20: step 8 of task 2, now with the values of task 1
    rb.close()
    push(tmp_path / "rb", bucket_url, storage_options)
    with pytest.raises(AssertionError, match="rows 12..23"):
        _read_and_check(bucket_url, storage_options, 1)


@pytest.mark.parametrize("capacity", [None, 48])
def test_readers_in_processes_while_pushes_loop_over_a_recording_buffer(tmp_path, bucket_url, storage_options,
                                                                        capacity):
    rb = make_buffer(tmp_path / "rb", capacity=capacity, episodes=3)
    push(tmp_path / "rb", bucket_url, storage_options)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            e = 10
            # 12-step episodes every 50 ms (240 Hz, faster than a robot's control loop): the ring of 48
            # steps still turns over many times a second. Unthrottled, a writer reuses the ring's slots
            # faster than a push can copy them, and push gives up with a RetriesExhaustedError (documented; on a
            # loaded machine this pace can do it too: push_loop then pushes again).
            while not stop.wait(0.05):
                record(rb, e, 1)
                e += 1
        except BaseException as exc:  # noqa: BLE001  (reported by the test below)
            errors.append(exc)

    threads = [threading.Thread(target=writer),
               threading.Thread(target=push_loop, args=(tmp_path / "rb", bucket_url, storage_options, stop, errors))]
    for thread in threads:
        thread.start()
    try:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = [f.result(timeout=300) for f in
                       [pool.submit(_read_and_check, bucket_url, storage_options, ROUNDS) for _ in range(2)]]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        rb.close()
    assert not errors, errors
    assert all(len(r) == ROUNDS and all(0 < n <= (capacity or 10**9) for n, _ in r) for r in results)
    assert len({snapshot for r in results for _, snapshot in r}) >= 2  # pushes replaced the snapshot being read


def _read_url_steps(url: str, storage_options: dict, rounds: int) -> tuple[Tally, list[str]]:
    """Open the URL ``rounds`` times, read every step and check it (``torn_reads.read_view``: its leaves
    agree with each other and with the step number of its logical index). Returns the tally and the
    snapshot ids read (runs in a spawned process)."""
    from trajstore.replay_buffer import ReplayBuffer

    tally, snapshots = Tally(), []
    for r in range(rounds):
        with ReplayBuffer.load_from(url, storage_options=storage_options) as rb:
            read_view(rb, tally, f"open {r} of {rb.published_snapshot}")
            snapshots.append(rb.published_snapshot[1])
    return tally, snapshots


def test_url_readers_during_pushes_of_an_overwritten_ring_get_whole_steps(tmp_path, bucket_url, storage_options):
    """A writer process overwrites a 64-step ring (every leaf, PNG frame, HDF5 and memmap, encodes its
    step number; 8-step episodes with a 100 ms pause, so the ring wraps about once a second), a push
    loop publishes it, and two reader processes open the URL and check every step they read."""
    ctx = multiprocessing.get_context("spawn")
    ready, stop_writer = ctx.Event(), ctx.Event()
    path = tmp_path / "rb"
    writer = ctx.Process(target=write_ring, args=(str(path), ready, stop_writer, 0.1))
    writer.start()
    stop = threading.Event()
    errors: list[BaseException] = []
    thread = threading.Thread(target=push_loop, args=(path, bucket_url, storage_options, stop, errors))
    try:
        assert ready.wait(120), "the writer did not start"
        push_once(path, bucket_url, storage_options)
        with ReplayBuffer.load_from(path) as rb:
            start = rb.total_steps
        thread.start()
        with ProcessPoolExecutor(2, mp_context=ctx) as pool:
            results = [f.result(timeout=300) for f in
                       [pool.submit(_read_url_steps, bucket_url, storage_options, URL_ROUNDS) for _ in range(2)]]
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        stop_writer.set()
        writer.join(120)
    assert not errors, errors
    assert writer.exitcode == 0
    with ReplayBuffer.load_from(path) as rb:
        assert rb.total_steps - start >= 2 * CAPACITY  # the ring turned over while it was pushed and read
    tally = Tally()
    for part, _ in results:
        tally.add(part)
    snapshots = {s for _, seen in results for s in seen}
    assert tally.reads == 2 * URL_ROUNDS and tally.stale == 0  # a pushed snapshot never changes
    assert tally.steps > 0 and len(snapshots) >= 2, (tally, snapshots)
    assert (tally.torn, tally.misplaced) == (0, 0), (
        f"{tally.bad_reads} of {tally.reads} reads of {len(snapshots)} snapshots returned torn ({tally.torn}) or "
        f"misplaced ({tally.misplaced}) steps: " + "; ".join(tally.examples))
