"""Breaker: a ring's drop-before-overwrite commit that fails (a full disk while writing the metadata).

That commit runs in ``extend`` (a full block is handed over) and in ``flush``/``end_episode`` (the
partial one). When it failed, the block was lost but the steps stayed counted as appended, so the
next blocks were written at the slots of other step numbers: the writer, its readers and the folder
after a reopen served misplaced steps (whole, but not the steps their indices name).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.replay_buffer import torn_reads as tr
from trajstore.replay_buffer import ReplayBuffer, commit

CAP = 128


def _check_all(rb: ReplayBuffer, where: str) -> None:
    n = len(rb)
    tally = tr.Tally()
    first = rb.total_steps - n
    if n:
        tr.check_steps(rb[np.arange(n)], np.arange(first, first + n), tally, where)
    assert tally.torn == 0 and tally.misplaced == 0, tally.examples


@pytest.fixture
def failing_metadata(monkeypatch):
    """``fail["once"] = True`` makes the next metadata write raise ENOSPC."""
    original = commit.write_meta
    fail = {"once": False}

    def write_meta(*args, **kwargs):
        if fail["once"]:
            fail["once"] = False
            raise OSError(28, "No space left on device (injected)")
        return original(*args, **kwargs)

    monkeypatch.setattr(commit, "write_meta", write_meta)
    return fail


@pytest.mark.parametrize("how", ["extend", "end_episode"])
def test_failed_drop_commit_keeps_steps_in_place(tmp_path, failing_metadata, how):
    path = str(tmp_path / "rb")
    rb = ReplayBuffer.create(tr.DictStorage, tr.space(), cache_path=path, capacity=CAP, **tr.storage_kwargs())
    rb.extend(tr.steps(0, CAP))
    rb.end_episode()
    rb.extend(tr.steps(CAP, 10))  # staged
    failing_metadata["once"] = True
    with pytest.raises(OSError, match="No space"):
        if how == "extend":
            rb.extend(tr.steps(CAP + 10, 100))  # completes a block: its drop commit fails; 46 rows stay staged
        else:
            rb.end_episode()  # the partial block's drop commit fails
    _check_all(rb, "writer after the failure")
    n = rb.total_steps
    rb.extend(tr.steps(n, 70))
    rb.end_episode()
    _check_all(rb, "writer after more steps")
    reader = ReplayBuffer.load_from(path)
    _check_all(reader, "reader")
    reader.close()
    rb.close()
    reopened = ReplayBuffer.load_from(path, read_only=False)
    _check_all(reopened, "reopened")
    reopened.extend(tr.steps(reopened.total_steps, 20))
    reopened.end_episode()
    _check_all(reopened, "reopened and continued")
    reopened.close()
