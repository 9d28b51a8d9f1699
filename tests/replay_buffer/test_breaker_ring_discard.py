"""Breaker: a ring's drop-before-overwrite commit after a discard_episode on a full ring.

A discard of an episode longer than the steps the ring holds rewinds the step numbers by more
than the count it takes back (the count stops at 0, ``head`` does not move), so from then on step
``g`` no longer lives in slot ``g % capacity``. The view committed before an overwrite must still
name the slots the steps are in (a reader opening then, or a crash, must see whole, right steps).
"""

from __future__ import annotations

import os

import numpy as np

from tests.replay_buffer import torn_reads as tr
from trajstore.replay_buffer import ReplayBuffer

CAP = 128  # two blocks of 64 steps: an extend of one block submits it (and commits the shrunk view) at once


def _check_all(rb: ReplayBuffer, where: str) -> None:
    n = len(rb)
    assert n > 0
    tally = tr.Tally()
    first = rb.total_steps - n
    tr.check_steps(rb[np.arange(n)], np.arange(first, first + n), tally, where)
    assert tally.torn == 0 and tally.misplaced == 0, tally.examples


def _discard_then_overwrite(path: str) -> ReplayBuffer:
    rb = ReplayBuffer.create(tr.DictStorage, tr.space(), cache_path=path, capacity=CAP, **tr.storage_kwargs())
    rb.extend(tr.steps(0, CAP))
    rb.end_episode()
    rb.extend(tr.steps(CAP, CAP + 3))  # an episode longer than the ring
    assert rb.discard_episode() == CAP + 3
    assert len(rb) == 0
    rb.extend(tr.steps(CAP, CAP))
    rb.end_episode()
    rb.extend(tr.steps(2 * CAP, 64))  # one full block: the view without its overwritten steps is committed first
    return rb


def test_reader_during_overwrite_after_discard_sees_right_steps(tmp_path):
    path = str(tmp_path / "rb")
    rb = _discard_then_overwrite(path)
    try:
        reader = ReplayBuffer.load_from(path)  # what the folder says between the shrunk commit and the flush
        _check_all(reader, "reader after the drop-before-overwrite commit")
        rb.flush()
        reader.refresh()
        _check_all(reader, "reader after flush")
        reader.close()
    finally:
        rb.close()


def test_crash_after_overwrite_after_discard_reopens_whole(tmp_path):
    path = str(tmp_path / "rb")
    pid = os.fork()
    if pid == 0:  # the writer dies with the block written and not flushed
        code = 1
        try:
            rb = _discard_then_overwrite(path)
            rb.write_stats  # noqa: B018
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    reader = ReplayBuffer.load_from(path)
    _check_all(reader, "reopened for reading")
    reader.close()
    rb = ReplayBuffer.load_from(path, read_only=False)
    total = rb.total_steps
    rb.extend(tr.steps(total, 40))
    rb.end_episode()
    _check_all(rb, "writer continued")
    rb.close()
    reader = ReplayBuffer.load_from(path)
    _check_all(reader, "reopened after the new writer")
    reader.close()


def test_failed_write_after_discard_rolls_back_to_right_slots(tmp_path, monkeypatch):
    """The rollback of a failed background write forgets the oldest steps it may have overwritten:
    the view it keeps must name their slots as they are after the discard shifted them."""
    path = str(tmp_path / "rb")
    rb = _discard_then_overwrite(path)
    rb.end_episode()
    storage = rb.storage.storages["pair"]  # the memmap leaf
    original = storage.write_leaves
    calls = {"n": 0}

    def write_leaves(sel, leaves):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(28, "No space left on device (injected)")
        return original(sel, leaves)

    monkeypatch.setattr(storage, "write_leaves", write_leaves)
    rb.extend(tr.steps(rb.total_steps, 10))
    try:
        rb.end_episode()
    except OSError:
        pass
    else:
        raise AssertionError("the failed write was not raised")
    _check_all(rb, "writer after the failed write")
    reader = ReplayBuffer.load_from(path)
    _check_all(reader, "reader after the failed write")
    rb.extend(tr.steps(rb.total_steps, 30))
    rb.end_episode()
    reader.refresh()
    _check_all(reader, "reader after more steps")
    reader.close()
    rb.close()
    reopened = ReplayBuffer.load_from(path)
    _check_all(reopened, "reopened")
    reopened.close()
