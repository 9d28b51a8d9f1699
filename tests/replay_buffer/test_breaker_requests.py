"""Breaker: bad input at window_request / count_anchors / anchors_at / windows_at."""

from __future__ import annotations

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

A = DictSpace({"a": BoxSpace(0, 1, (2,), np.float32), "b": BoxSpace(0, 9, (), np.int64)})
B = DictSpace({"x": BoxSpace(0, 1, (5,), np.float32)})


def _buffer(space, n, episodes):
    rb = ReplayBuffer.create(DictStorage, space, capacity=None, **dict_storage_kwargs_from_space(space))
    for _ in range(episodes):
        rb.extend(space.sample(batch_size=n))
        rb.end_episode()
    return rb


def test_request_of_another_space_is_refused():
    ra, rb = _buffer(A, 30, 3), _buffer(B, 5, 10)
    foreign = ra.window_request({"a": [-1, 0, 1]}, pad=False)
    foreign_eps = rb.window_request({"x": [0, 1]}, episodes=[7, 8])
    for call in (lambda: rb.count_anchors(foreign), lambda: rb.windows_at([0, 1], foreign),
                 lambda: rb.anchors_at([0], foreign), lambda: ra.anchors_at([0], foreign_eps),
                 lambda: ra.windows_at([0], foreign_eps)):
        with pytest.raises(ValueError, match="another space"):
            call()
    own = ra.window_request({"a": [-1, 0, 1]}, pad=False)
    assert ra.count_anchors(own) == 84


@pytest.mark.parametrize("numbers", [[0.5], [True], True, "3", np.array([1.0]), np.zeros((2, 2), np.int64)])
def test_anchor_numbers_must_be_ints(numbers):
    ra = _buffer(A, 30, 3)
    with pytest.raises(TypeError):
        ra.windows_at(numbers, {"a": [0]})
    with pytest.raises(TypeError):
        ra.anchors_at(numbers)


@pytest.mark.parametrize("numbers", [[2**64], np.array([2**63], np.uint64), -1, 90, [89, 90]])
def test_anchor_numbers_out_of_range_are_named(numbers):
    ra = _buffer(A, 30, 3)
    with pytest.raises(IndexError, match=r"\[0, 90\)") as info:
        ra.windows_at(numbers, {"a": [0]})
    assert "-9223372036854775808" not in str(info.value)  # not a wrapped cast


@pytest.mark.parametrize("pad", ["no", None, 0, 1.0])
def test_pad_must_be_a_bool(pad):
    ra = _buffer(A, 30, 3)
    with pytest.raises(TypeError):
        ra.window_request({"a": [0]}, pad=pad)
