"""A payload file shorter than its index needs is damaged at open, like a missing one.

Three episodes of one-frame JPEG chunks (``chunk_bytes=1``) and one of video segments; the file holding
a step of episode 1 is cut (to 0 bytes, or to part of its length: a lost tail). A read-only open warns
and ``rb.damaged`` names the file as ``"truncated: N bytes, index needs M"``; the samplers and the
torch dataset skip episode 1 without reading it; a writer refuses the folder. A chunk *longer* than
its index (bytes appended but not indexed) is not damage.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.storages import SpaceStorage
from trajstore.storages.frames._slot_index import SlotIndex

from tests.replay_buffer.test_damaged_payload import LENGTHS, PIXELS, build, file_of

EPISODE_1 = set(range(LENGTHS[0], LENGTHS[0] + LENGTHS[1]))


def needed_bytes(path, target):
    """The furthest byte of ``target`` (a chunk) that the pixels index points to."""
    index = SlotIndex.open(path / "storage" / "observation.pixels")
    try:
        rows = index.table
        fid = int(target.stem)
        rows = rows[rows[:, 0] == fid]
        return int((rows[:, 1] + rows[:, 2]).max())
    finally:
        index.close()


@pytest.mark.parametrize("keep", [0, 7])
def test_a_truncated_image_chunk_is_reported_at_open_and_skipped(tmp_path, keep):
    path = tmp_path / "rb"
    written = build(path, "JPEG")
    target = file_of(path, "JPEG", LENGTHS[0] + 2)
    need = needed_bytes(path, target)
    os.truncate(target, keep)
    with pytest.warns(DamagedBufferWarning, match=r"1 step\(s\) of 1 episode\(s\) \[1\]"):
        rb = ReplayBuffer.load_from(path)
    with rb:
        (part,) = rb.damaged.parts
        assert (part.path, part.part, part.problem, part.episodes, part.steps) == (
            str(target), PIXELS, f"truncated: {keep} bytes, index needs {need}", (1,), 1)
        with pytest.raises(DamagedDataError, match=f"{target}: payload file is damaged \\(truncated"):
            rb[LENGTHS[0] + 2]
        np.testing.assert_array_equal(rb[0]["observation"]["pixels"], written[0]["observation"]["pixels"][0])
        t = rb.sample_transitions(300, rng=np.random.default_rng(0), on_damaged="skip")
        assert not set(t["index"].tolist()) & EPISODE_1
        batch = rb.sample(300, rng=np.random.default_rng(0), on_damaged="skip")
        assert len(batch["action"]) == 300
        with pytest.raises(DamagedDataError):
            rb.sample(300, rng=np.random.default_rng(0))
        pytest.importorskip("torch")
        from trajstore.training.torch import ReplayBufferDataset

        ds = ReplayBufferDataset(rb, on_damaged="skip")
        assert len(ds) == sum(LENGTHS) - LENGTHS[1]
        for i in range(len(ds)):
            ds[i]
    with pytest.raises(DamagedDataError, match="truncated"):
        ReplayBuffer.load_from(path, read_only=False)


def test_a_chunk_longer_than_its_index_is_not_damage(tmp_path):
    path = tmp_path / "rb"
    build(path, "JPEG")
    target = file_of(path, "JPEG", LENGTHS[0] + 2)
    with open(target, "ab") as f:
        f.write(b"appended, not indexed")
    with ReplayBuffer.load_from(path, read_only=False) as rb:
        assert not rb.damaged
    with ReplayBuffer.load_from(path) as rb:
        assert not rb.damaged


def test_an_empty_video_segment_is_reported_at_open(tmp_path):
    path = tmp_path / "rb"
    build(path, "video")
    target = file_of(path, "video", LENGTHS[0] + 2)
    os.truncate(target, 0)
    with SpaceStorage.load_from(path / "storage" / "observation.pixels") as storage:
        (file,) = storage.damaged_files()
        assert (file.path, file.problem) == (str(target), "truncated: 0 bytes, index needs 1")
    with pytest.raises(DamagedDataError, match="truncated"):
        ReplayBuffer.load_from(path, read_only=False)
