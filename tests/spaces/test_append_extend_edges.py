"""Text and bool leaves: one step (as ``append`` validates it) and a batch of the same values (as
``extend`` does) accept and refuse the same values, and give the same arrays."""

import numpy as np
import pytest

from trajstore.errors import InvalidValueError
from trajstore.spaces import BinarySpace, DictSpace, TextSpace
from trajstore.storages.base import validated_batch, validated_step

TEXT = TextSpace(6, min_length=0)
SPACE = DictSpace({"text": TEXT, "flag": BinarySpace(), "flags": BinarySpace((2,))})
GOOD = {"text": "ok", "flag": True, "flags": np.array([True, False])}


def outcome(fn):
    try:
        return "ok", fn()
    except InvalidValueError as exc:
        return "refused", str(exc)


def step_and_batch(leaf: str, value):
    """``(outcome of the step, outcome of a batch of 2 of it)``; accepted values as the step's row."""
    step = outcome(lambda: validated_step(SPACE, {**GOOD, leaf: value}))
    batch = outcome(lambda: validated_batch(SPACE, {k: [v, v] for k, v in {**GOOD, leaf: value}.items()})[0])
    return step, batch


@pytest.mark.parametrize("value", [
    "", "x" * 6, "x" * 7, "é🍎\u0301", "trail  ", "tab\tnl\n", np.str_("np"), np.array("zero-d"),
    np.array("", dtype="<U6"), b"bytes", np.bytes_(b"nb"), np.array(b"nb"), "a\x00b", "\x00", "a\ud800b",
    5, None, np.array(["one"]), ["o", "k"],
])
def test_text_step_and_batch_agree(value):
    (s_kind, s_out), (b_kind, b_out) = step_and_batch("text", value)
    assert s_kind == b_kind, (s_out, b_out)
    if s_kind == "refused":
        assert s_out == b_out and "'text'" in s_out
        return
    i = list(SPACE.spaces).index("text")
    assert s_out[i].dtype == b_out[i].dtype == np.dtype("<U6")  # the leaf's dtype, not the value's length
    assert s_out[i].tolist() == b_out[i][:1].tolist() == [str(np.asarray(value).item())]


@pytest.mark.parametrize("leaf, value", [
    ("flag", True), ("flag", np.False_), ("flag", 1), ("flag", 0), ("flag", np.int8(1)), ("flag", np.array(1)),
    ("flag", 2), ("flag", -1), ("flag", 1.0), ("flag", np.float32(0)), ("flag", "1"), ("flag", None),
    ("flag", [True]), ("flags", np.array([0, 1], np.int8)), ("flags", [0, 1]), ("flags", (True, False)),
    ("flags", [True, 2]), ("flags", np.array([1.0, 0.0])), ("flags", [True]),
])
def test_bool_step_and_batch_agree(leaf, value):
    (s_kind, s_out), (b_kind, b_out) = step_and_batch(leaf, value)
    assert s_kind == b_kind, (s_out, b_out)
    i = list(SPACE.spaces).index(leaf)
    if s_kind == "refused":
        assert f"'{leaf}'" in s_out and f"'{leaf}'" in b_out
        if "shape" not in s_out:  # a shape error names the batch axis in a batch
            assert s_out == b_out
        return
    assert s_out[i].dtype == b_out[i].dtype == np.dtype(bool)
    assert s_out[i].tolist() == b_out[i][:1].tolist() == [np.asarray(value).astype(bool).tolist()]


def test_refusals_say_what_is_wrong():
    assert "lone surrogate '\\ud800' at index 1" in step_and_batch("text", "a\ud800b")[0][1]
    assert "got int64 value 2" in step_and_batch("flags", [True, 2])[1][1]
    assert "NUL" in step_and_batch("text", "\x00")[0][1]
