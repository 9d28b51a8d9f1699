"""Write-behind: appends are staged and written on a background thread; flush/end_episode are
the durability points; staging is bounded; a background error surfaces at the next call."""

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer import staging
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, ImageStorage, dict_storage_kwargs_from_space


def step_space():
    return DictSpace({
        "observation": DictSpace({
            "pixels": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image"}),
            "state": BoxSpace(-1e9, 1e9, (2,), np.float64),
        }),
        "action": BoxSpace(-1e9, 1e9, (), np.float64),
    })


def step(k):
    """Step number ``k`` as values that encode ``k`` (frames exact through PNG)."""
    return {"observation": {"pixels": np.full((8, 8, 3), k % 251, np.uint8), "state": np.array([k, -k], float)},
            "action": np.float64(k)}


def make(path, capacity=None):
    space = step_space()
    return ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=capacity,
                               **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}}))


def numbers(data):
    """The step number each read step encodes, checked across all leaves (no torn steps)."""
    k = data["action"].astype(np.int64)
    np.testing.assert_array_equal(data["observation"]["state"][:, 0], k)
    np.testing.assert_array_equal(data["observation"]["pixels"][:, 0, 0, 0], k % 251)
    return k.tolist()


READ = """
import json, sys
from trajstore.replay_buffer import ReplayBuffer
with ReplayBuffer.load_from(sys.argv[1]) as rb:
    print(json.dumps({"n": len(rb), "actions": rb[:]["action"].tolist() if len(rb) else [],
                      "episodes": [[e.start, e.stop] for e in rb.episodes]}))
"""


def read_elsewhere(path):
    out = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("capacity", [None, 6])
def test_the_writer_reads_its_staged_steps_and_others_see_them_at_flush(tmp_path, capacity):
    rb = make(tmp_path / "rb", capacity)
    for k in range(9):
        rb.append(step(k))
    assert len(rb) == (9 if capacity is None else 6)
    assert numbers(rb[:]) == list(range(9))[-len(rb):]  # staged steps, read by the writer
    assert read_elsewhere(tmp_path / "rb")["n"] == 0  # nothing committed yet
    rb.flush()
    seen = read_elsewhere(tmp_path / "rb")
    assert seen["actions"] == [float(k) for k in range(9)][-len(rb):]
    rb.close()


def test_end_episode_is_a_durability_point(tmp_path):
    rb = make(tmp_path / "rb")
    for k in range(5):
        rb.append(step(k))
    rb.end_episode()
    assert read_elsewhere(tmp_path / "rb") == {"n": 5, "actions": [0.0, 1.0, 2.0, 3.0, 4.0], "episodes": [[0, 5]]}
    rb.close()


KILLED = """
import os, signal, sys, numpy as np
sys.path.insert(0, {tests!r})
from test_write_behind import make, step
rb = make(sys.argv[1], capacity=None if sys.argv[2] == "none" else int(sys.argv[2]))
k = 0
for episode in range(3):
    for _ in range(7):
        rb.append(step(k)); k += 1
    rb.end_episode()
for _ in range(int(sys.argv[3])):  # staged, some maybe written behind: never committed
    rb.append(step(k)); k += 1
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("capacity, staged", [("none", 5), ("none", 150), ("12", 5), ("12", 40)])
def test_kill_9_with_staged_steps_keeps_exactly_the_committed_ones(tmp_path, capacity, staged):
    script = KILLED.format(tests=os.path.dirname(__file__))
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "rb"), capacity, str(staged)],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        got = numbers(rb[:])
    if capacity == "none":
        assert got == list(range(21))
    else:  # a ring of 12 holds the newest committed steps; a crash may drop up to capacity/8 more
        assert got == list(range(21 - len(got), 21)) and len(got) >= 12 - max(1, 12 // 8)
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:  # and it goes on
        rb.append(step(1000))
        rb.end_episode()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert numbers(rb[-1:]) == [1000]


def test_a_background_error_surfaces_at_each_call_until_the_held_steps_are_written(tmp_path, monkeypatch):
    rb = make(tmp_path / "rb")
    for k in range(4):
        rb.append(step(k))
    rb.end_episode()
    original = ImageStorage._write

    def disk_full(self, sel, leaves):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ImageStorage, "_write", disk_full)
    for k in range(4, 7):
        rb.append(step(k))
    with pytest.raises(OSError, match="No space") as failure:
        rb.flush()
    assert "(writing leaf 'observation/pixels': ImageStorage at " in str(failure.value)  # names the leaf
    assert failure.value.errno == 28 and isinstance(failure.value.__cause__, OSError)
    for call in (rb.flush, rb.end_episode, lambda: rb.append(step(7)), lambda: rb[:]):
        with pytest.raises(OSError, match="No space"):  # still failing: nothing returns ok, nothing is dropped
            call()
    assert read_elsewhere(tmp_path / "rb")["actions"] == [0.0, 1.0, 2.0, 3.0]  # only what was committed
    monkeypatch.setattr(ImageStorage, "_write", original)
    assert len(rb) == 7 and numbers(rb[:]) == [0, 1, 2, 3, 4, 5, 6]  # the held steps were written again
    assert [(e.start, e.stop, e.done) for e in rb.episodes] == [(0, 4, True), (4, 7, False)]
    rb.append(step(7))  # the failed append(step(7)) above appended nothing
    rb.end_episode()
    rb.close()
    assert read_elsewhere(tmp_path / "rb")["actions"] == [float(k) for k in range(8)]


@pytest.mark.slow
def test_staging_is_bounded_append_waits_for_room(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BLOCK_BYTES", 1)  # one step per block
    monkeypatch.setattr(staging, "MAX_PENDING_BYTES", 1)  # one block may wait
    monkeypatch.setattr("trajstore.replay_buffer.writer.MAX_PENDING_BYTES", 1)
    rb = make(tmp_path / "rb")
    gate, entered = threading.Event(), threading.Event()
    original = ImageStorage._write

    def held(self, sel, leaves):
        entered.set()
        gate.wait(30)
        original(self, sel, leaves)

    monkeypatch.setattr(ImageStorage, "_write", held)
    rb.append(step(0))  # block 0: taken by the writer thread, which waits at the gate
    assert entered.wait(30)
    rb.append(step(1))  # block 1: waits in the queue (its one place)
    appender = threading.Thread(target=rb.append, args=(step(2),))
    appender.start()
    appender.join(0.5)
    assert appender.is_alive()  # no room: append waits rather than growing the queue or dropping
    gate.set()
    appender.join(30)
    assert not appender.is_alive()
    rb.flush()
    assert numbers(rb[:]) == [0, 1, 2]
    assert rb.write_stats.blocked_seconds > 0 and rb.write_stats.steps_written == 3
    rb.close()


def test_a_job_of_many_blocks_counts_as_many_in_the_pending_limit():
    """An extend of many steps is one job holding many blocks: the writer's limit counts its blocks, so a
    second heavy job waits for room (one job per batch let GBs pile up behind a slow write)."""
    writer = staging.BackgroundWriter(4, staging.WriteStats())
    release, queued, ran = threading.Event(), threading.Event(), []

    def slow() -> int:
        release.wait(30)
        ran.append("slow")
        return 1

    def heavy_second() -> None:
        writer.submit(lambda: ran.append("second") or 1, weight=3)
        queued.set()

    try:
        writer.submit(slow, weight=3)
        second = threading.Thread(target=heavy_second)
        second.start()
        assert not queued.wait(0.5)  # 3 + 3 blocks > 4: the second job waits while the first is pending
        release.set()
        second.join(30)
        assert queued.is_set()
        writer.drain()
        assert ran == ["slow", "second"]
        writer.submit(lambda: 1, weight=10)  # heavier than the limit: runs alone, does not wait forever
        writer.drain()
    finally:
        release.set()
        writer.close()


class _Interrupt(BaseException):
    """Stands for a Ctrl-C (a BaseException raised by a signal handler) without touching pytest's own."""


def _batch(k0, n):
    ks = np.arange(k0, k0 + n)
    return {"observation": {"pixels": np.broadcast_to((ks % 251).astype(np.uint8)[:, None, None, None], (n, 8, 8, 3)),
                            "state": np.stack([ks, -ks], axis=1).astype(float)}, "action": ks.astype(float)}


@pytest.mark.parametrize("capacity", [None, 10_000])
def test_an_interrupt_while_waiting_for_room_keeps_every_step_of_the_call(tmp_path, monkeypatch, capacity):
    """A Ctrl-C that lands while ``extend`` waits for the writer (or while a retry re-queues held blocks) used to
    drop blocks already out of staging: a ring then had a gap of zeros, an unbounded folder would not reopen."""
    import signal
    import time

    from trajstore.replay_buffer import writer as writer_module

    rb = make(tmp_path / "rb", capacity=capacity)
    block = staging.block_steps_for(8 * 8 * 3 + 3 * 8)
    monkeypatch.setattr(writer_module, "MAX_PENDING_BYTES", 1)  # one block may wait
    for name in ("write_leaves", "extend_leaves"):  # a slow disk (a ring writes in place, a growing buffer appends)
        real = getattr(DictStorage, name)
        monkeypatch.setattr(DictStorage, name, lambda self, *a, _real=real, **k: (time.sleep(0.3), _real(self, *a, **k))[1])
    try:
        rb.extend(_batch(0, 2 * block))
        previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(_Interrupt()))
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        try:
            rb.extend(_batch(2 * block, 3 * block))  # waits for room behind the slow writes: interrupted there
            interrupted = False
        except _Interrupt:
            interrupted = True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert interrupted and len(rb) == 5 * block  # the interrupted call's steps were all handed over
        rb.extend(_batch(5 * block, 7))
        rb.flush()
        assert numbers(rb[:]) == list(range(5 * block + 7))
    finally:
        rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as back:
        assert numbers(back[:]) == list(range(5 * block + 7))


def test_a_retry_requeues_every_held_job_without_waiting_for_room():
    """Held jobs hold their data already: re-queueing them must not wait (an interrupt in that wait lost the
    jobs not yet re-queued: the next flush committed zeros)."""
    writer = staging.BackgroundWriter(1, staging.WriteStats())
    ran, fail = [], [True]

    def job(k):
        def run() -> int:
            if fail[0]:
                fail[0] = False
                raise OSError(28, "No space left on device")
            ran.append(k)
            return 1
        return run

    try:
        for k in range(3):
            writer.submit(job(k), weight=1)
        writer.drain()
        assert writer.held == 3 and ran == []
        release = threading.Event()
        writer.submit(lambda: release.wait(30) and 0, weight=1)  # a slow job fills the queue's room
        done = threading.Event()
        threading.Thread(target=lambda: (writer.retry(), done.set()), daemon=True).start()
        assert done.wait(10)  # returned while the slow job still holds the room: nothing waited
        release.set()
        writer.drain()
        assert ran == [0, 1, 2] and writer.held == 0
    finally:
        release.set()
        writer.close()
