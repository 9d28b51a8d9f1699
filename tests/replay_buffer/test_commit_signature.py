"""The metadata's change signature carries a commit number, so that two commits never look alike to a
reader (inode numbers are reused by the next replace; coarse timestamps can repeat)."""

import json

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.metadata import META_FILE, file_signature
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"a": BoxSpace(0, 1, (2,), np.float32)})


def commit_of(folder):
    return json.loads((folder / META_FILE).read_text())["commit"]


def test_every_commit_has_the_next_number_and_a_reopened_writer_continues(tmp_path):
    folder = tmp_path / "rb"
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=folder, capacity=8, **dict_storage_kwargs_from_space(SPACE))
    seen = [file_signature(folder)]
    assert seen[0][3] == commit_of(folder) == 1
    for _ in range(4):  # each end_episode commits; a ring's overwrites commit a shrunk view first
        rb.extend({"a": np.zeros((5, 2), np.float32)})
        rb.end_episode()
        seen.append(file_signature(folder))
    numbers = [s[3] for s in seen]
    assert numbers == sorted(set(numbers)) and numbers[-1] == commit_of(folder) > 5  # drops committed too
    rb.close()  # commits once more
    with ReplayBuffer.load_from(folder, read_only=False) as again:
        again.extend({"a": np.zeros((1, 2), np.float32)})
        again.end_episode()
        assert file_signature(folder)[3] > numbers[-1] + 1


def test_a_folder_without_a_commit_number_signs_with_minus_one(tmp_path):
    folder = tmp_path / "rb"
    ReplayBuffer.create(DictStorage, SPACE, cache_path=folder, **dict_storage_kwargs_from_space(SPACE)).close()
    meta = json.loads((folder / META_FILE).read_text())
    del meta["commit"]  # as trajstore wrote it before the number existed
    (folder / META_FILE).write_text(json.dumps(meta))
    assert file_signature(folder)[3] == -1
    with ReplayBuffer.load_from(folder, read_only=False) as rb:  # a writer starts counting from 0
        rb.extend({"a": np.zeros((1, 2), np.float32)})
        rb.end_episode()
    assert commit_of(folder) >= 1
