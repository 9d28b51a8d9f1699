"""Many processes at once: reader processes open and read the URL while a push loop publishes a
ring that a writer keeps recording into. Every read is one whole snapshot: each held episode's
steps are the ones that episode recorded (checked against the step numbers, lossless leaves)."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from trajstore.remote import push

from tests.remote.conftest import frame, make_buffer, record


def _read_and_check(url: str, storage_options: dict, rounds: int) -> list[int]:
    """Open the URL ``rounds`` times; check every held episode against its step numbers. Returns the
    step counts seen (runs in a spawned process)."""
    from trajstore.replay_buffer import ReplayBuffer

    seen = []
    for _ in range(rounds):
        with ReplayBuffer.load_from(url, storage_options=storage_options) as rb:
            data = rb[:]
            first = rb.total_steps - len(rb)
            for ep in rb.episodes:
                if ep.data.get("task") is None:
                    continue
                e = int(ep.data["task"].split()[1])
                held = np.arange(max(ep.start, first), ep.stop)
                t = held - ep.start
                n = e * 100 + t
                rows = held - first
                np.testing.assert_array_equal(data["action"][rows],
                                              np.stack([np.sin(n), np.cos(n)], 1).astype(np.float32))
                for row, k in zip(rows, n):  # 16-bit PNG frames from the bucket: exact
                    np.testing.assert_array_equal(data["observation"]["depth"][row], frame(int(k), 0, np.uint16))
            seen.append(len(rb))
    return seen


@pytest.mark.parametrize("capacity", [
    None,
    pytest.param(48, marks=pytest.mark.xfail(strict=False, reason=(
        "known race, not fixed yet: about 1 run in 10, a reader of a push of a live ring that wraps many "
        "times a second saw another episode's actions (memmap leaf) in one whole episode"))),
])
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
            # faster than a push can copy them, and push gives up with a FormatError (documented).
            while not stop.wait(0.05):
                record(rb, e, 1)
                e += 1
        except BaseException as exc:  # noqa: BLE001  (reported by the test below)
            errors.append(exc)

    def pusher() -> None:
        try:
            while not stop.is_set():
                push(tmp_path / "rb", bucket_url, storage_options)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=pusher)]
    for thread in threads:
        thread.start()
    try:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = [f.result(timeout=300) for f in
                       [pool.submit(_read_and_check, bucket_url, storage_options, 4) for _ in range(2)]]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        rb.close()
    assert not errors, errors
    assert all(len(r) == 4 and all(0 < n <= (capacity or 10**9) for n in r) for r in results)
