"""The fast path of one-step validation (spaces/step_check.py) against the full one (Space.validate)."""

import numpy as np
import pytest

from trajstore.errors import InvalidValueError
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.spaces.step_check import StepCheck, step_check
from trajstore.storages.base import validated_step

SPACE = DictSpace({
    "obs": DictSpace({
        "cam": BoxSpace(0, 255, (4, 5, 3), np.uint8, metadata={"kind": "image"}),
        "joints": BoxSpace(-np.pi, np.pi, (7,), np.float32),
        "vel": BoxSpace(np.full(7, -2.0), np.arange(7, dtype=np.float64), (7,), np.float32),
    }),
    "action": BoxSpace(-1, 1, (2,), np.float32),
    "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
    "count": BoxSpace(0, 9, (3,), np.int16),
})


def step(rng: np.random.Generator) -> dict:
    return {"obs": {"cam": rng.integers(0, 256, (4, 5, 3), dtype=np.uint8),
                    "joints": rng.uniform(-3, 3, 7).astype(np.float32),
                    "vel": rng.uniform(-2, 0, 7).astype(np.float32)},
            "action": rng.uniform(-1, 1, 2).astype(np.float32),
            "reward": np.float32(rng.normal()).reshape(()),
            "count": rng.integers(0, 10, 3).astype(np.int16)}


def test_fast_path_returns_the_full_validations_leaves():
    rng = np.random.default_rng(0)
    check = StepCheck(SPACE, check_bounds=True)
    for _ in range(20):
        s = step(rng)
        fast = check.leaves(s)
        assert fast is not None
        slow = [np.asarray(v)[None] for v in (SPACE.validate(s)["obs"]["cam"], s["obs"]["joints"],
                                              s["obs"]["vel"], s["action"], s["reward"], s["count"])]
        assert [(a.shape, a.dtype) for a in fast] == [(a.shape, a.dtype) for a in slow]
        assert all(np.array_equal(a, b) for a, b in zip(fast, slow))
        assert fast[1].base is s["obs"]["joints"]  # a view: no copy before staging


@pytest.mark.parametrize("change, leaf", [
    (lambda s: s["obs"].__setitem__("joints", np.full(7, 3.5, np.float32)), "obs/joints"),
    (lambda s: s["obs"]["vel"].__setitem__(6, 6.5), "obs/vel"),  # bound of its own element (6)
    (lambda s: s["obs"]["vel"].__setitem__(0, -2.5), "obs/vel"),
    (lambda s: s.__setitem__("reward", np.float32(np.nan).reshape(())), "reward"),  # unbounded: NaN still refused
    (lambda s: s["count"].__setitem__(1, 10), "count"),
])
def test_values_outside_the_bounds_fall_back_to_the_full_validation(change, leaf):
    s = step(np.random.default_rng(1))
    change(s)
    assert step_check(SPACE, True).leaves(s) is None
    with pytest.raises(InvalidValueError, match=leaf):
        validated_step(SPACE, s)
    fast = step_check(SPACE, False).leaves(s)  # check_bounds=False stores them as they are
    assert fast is not None and np.array_equal(fast[5][0], s["count"], equal_nan=True)


@pytest.mark.parametrize("change", [
    lambda s: s.__setitem__("action", [0.5, 0.5]),  # a list: converted by the full validation
    lambda s: s.__setitem__("action", np.zeros(2, np.float64)),  # cast by the full validation
    lambda s: s.__setitem__("action", np.zeros((1, 2), np.float32)),
    lambda s: s.__setitem__("extra", np.zeros(1)),
    lambda s: s.pop("count"),
    lambda s: s.__setitem__("obs", list(s["obs"].values())),
])
def test_anything_else_falls_back(change):
    s = step(np.random.default_rng(2))
    change(s)
    assert step_check(SPACE, True).leaves(s) is None


def test_the_full_validation_still_casts_what_the_fast_path_refuses():
    s = step(np.random.default_rng(3))
    s["action"] = [0.25, -0.5]
    leaves = validated_step(SPACE, s)
    assert leaves[3].dtype == np.float32 and leaves[3].tolist() == [[0.25, -0.5]]


def test_spaces_with_other_leaves_and_single_leaf_spaces():
    flagged = DictSpace({"x": BoxSpace(0, 1, (2,), np.float32), "done": BinarySpace()})
    assert not StepCheck(flagged, True).enabled  # BinarySpace takes 0/1 ints: the full validation
    single = BoxSpace(-1, 1, (3,), np.float32)
    got = step_check(single, True).leaves(np.zeros(3, np.float32))
    assert got is not None and got[0].shape == (1, 3)
    assert step_check(single, True).leaves(np.full(3, 2, np.float32)) is None
