"""Spaces: validation messages, metadata rules, JSON round trip, gymnasium conversion."""

import json

import numpy as np
import pytest

from trajstore.errors import InvalidValueError, UnknownTypeError
from trajstore.spaces import (BinarySpace, BoxSpace, DictSpace, SpaceMetadata, TextSpace,
                              from_gymnasium, space_from_json, tree)


def step_space():
    return DictSpace({
        "observation": DictSpace({
            "pixels": BoxSpace(0, 255, (8, 6, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 10}),
            "joints": BoxSpace(-np.pi, np.pi, (7,), np.float32, metadata={"units": "rad"}),
        }),
        "action": BoxSpace(-1, 1, (7,), np.float32),
        "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
        "done": BinarySpace(),
        "instruction": TextSpace(32, metadata={"kind": "language"}),
    })


def test_json_round_trip_keeps_metadata_and_order():
    space = step_space()
    text = json.dumps(space.to_json())
    back = space_from_json(json.loads(text))
    assert back == space
    assert list(back.keys()) == ["observation", "action", "reward", "done", "instruction"]
    assert back["observation"]["pixels"].metadata == {"kind": "image", "layout": "HWC", "fps": 10}
    assert back["reward"].low.item() == -np.inf and back["reward"].high.item() == np.inf
    assert back["observation"]["joints"].high[0] == np.float64(np.pi)


def test_equality_counts_metadata():
    a = BoxSpace(0, 1, (2,), metadata={"kind": "image"})
    b = BoxSpace(0, 1, (2,))
    assert a != b
    assert a.without_metadata() == b
    assert a.with_metadata(fps=5).metadata == {"kind": "image", "fps": 5}
    assert a.with_metadata({"x": 1}, replace=True).metadata == {"x": 1}


def test_metadata_is_immutable_and_json_only():
    meta = SpaceMetadata({"kind": "image", "nested": {"a": [1, 2]}})
    with pytest.raises(TypeError):
        meta["kind"] = "x"  # type: ignore[index]
    assert meta["nested"]["a"] == (1, 2)
    assert meta.to_json() == {"kind": "image", "nested": {"a": [1, 2]}}
    with pytest.raises(TypeError, match="not a JSON value"):
        SpaceMetadata({"bad": object()})
    with pytest.raises(TypeError, match="not a str"):
        SpaceMetadata({1: "x"})
    with pytest.raises(ValueError, match="finite"):
        SpaceMetadata({"fps": float("nan")})
    assert hash(SpaceMetadata({"a": [1]})) == hash(SpaceMetadata({"a": (1,)}))


def test_unknown_type_lists_known_names():
    with pytest.raises(UnknownTypeError, match="known types: .*box"):
        space_from_json({"type": "nope"})


def test_sample_is_contained_single_and_batched():
    space = step_space()
    rng = np.random.default_rng(0)
    assert space.contains(space.sample(rng))
    batch = space.sample(rng, batch_size=4)
    valid = space.validate(batch, batched=True)
    assert valid["observation"]["pixels"].shape == (4, 8, 6, 3)
    assert valid["instruction"].dtype == np.dtype("<U32")


@pytest.mark.parametrize("path,value,match", [
    ("observation/pixels", np.zeros((8, 6, 4), np.uint8), r"observation/pixels.*shape \(8, 6, 3\)"),
    ("observation/pixels", np.zeros((8, 6, 3), np.float32), r"observation/pixels.*dtype uint8"),
    ("observation/pixels", np.full((8, 6, 3), 256), r"observation/pixels.*do not fit dtype uint8"),
    ("action", np.zeros(6, np.float32), r"action.*shape \(7,\)"),
    ("done", 2, r"done.*bool"),
    ("instruction", "x" * 33, r"instruction.*0 to 32 characters"),
    ("instruction", 5, r"instruction.*expected str"),
])
def test_validate_names_the_leaf(path, value, match):
    space = step_space()
    good = space.sample(np.random.default_rng(1))
    leaves = tree.flatten(space, good)
    leaves[tree.leaf_paths(space).index(tree.parse_name(path))] = value
    with pytest.raises(InvalidValueError, match=match):
        space.validate(tree.unflatten(space, leaves))


def test_missing_and_extra_keys():
    space = step_space()
    value = space.sample(np.random.default_rng(2))
    del value["reward"]
    value["bonus"] = 1.0
    with pytest.raises(InvalidValueError, match=r"missing \['reward'\], unexpected \['bonus'\]"):
        space.validate(value)


def test_batch_sizes_must_agree():
    space = DictSpace({"a": BoxSpace(0, 1, (2,)), "b": BoxSpace(0, 1, ())})
    with pytest.raises(InvalidValueError, match="different batch sizes"):
        space.validate({"a": np.zeros((3, 2)), "b": np.zeros(4)}, batched=True)


def test_validate_refuses_values_outside_the_bounds_and_nan():
    space = BoxSpace(0, 1, (2,), np.float32)
    assert not space.contains(np.array([0.5, 2.0], np.float32))
    with pytest.raises(InvalidValueError, match=r"'a/b': value 2.0 at index \(1,\) is outside .*\[0.0, 1.0\]"):
        DictSpace({"a": DictSpace({"b": space})}).validate({"a": {"b": np.array([0.5, 2.0])}})
    with pytest.raises(InvalidValueError, match=r"value nan at index \(2, 0\)"):
        space.validate(np.array([[0, 0], [1, 1], [np.nan, 0]]), batched=True)
    assert space.validate(np.array([0.5, 2.0]), check_bounds=False)[1] == 2.0
    assert space.contains(np.float32(0.5) * np.ones(2, np.float32))
    # per-element bounds name the element's own bound
    per = BoxSpace(np.array([0, 10]), np.array([1, 20]), (2,), np.int32)
    with pytest.raises(InvalidValueError, match=r"value 21 at index \(1,\) .*\[10, 20\]"):
        per.validate(np.array([1, 21]))
    # an unbounded float leaf refuses NaN but takes +-inf
    free = BoxSpace(-np.inf, np.inf, (3,), np.float64)
    assert free.contains(np.array([np.inf, -np.inf, 0.0]))
    with pytest.raises(InvalidValueError, match="nan"):
        free.validate(np.array([0.0, np.nan, 1.0]))
    # bounds at the dtype's limits cost no check; float bounds compare in the leaf's dtype
    assert BoxSpace(0, 255, (4,), np.uint8)._bounds is None
    joints = BoxSpace(-np.pi, np.pi, (1000,), np.float32)
    assert joints.contains(joints.sample(np.random.default_rng(0))) and joints.contains(np.float32([np.pi] * 1000))


def test_scalar_leaves_contain_numpy_scalars():
    assert BoxSpace(0, 1, (), np.float32).contains(np.float32(0.5))
    assert BinarySpace().contains(np.bool_(True))
    assert TextSpace(4).contains(np.str_("ab"))


def test_from_gymnasium():
    gym = pytest.importorskip("gymnasium")
    g = gym.spaces.Dict({
        "pos": gym.spaces.Box(0, 512, (2,), np.float64),
        "mode": gym.spaces.Discrete(3, start=1),
        "flags": gym.spaces.MultiBinary(4),
        "text": gym.spaces.Text(20, min_length=1),
    })
    space = from_gymnasium(g, metadata={"source": "test"})
    assert space.metadata == {"source": "test"}
    assert space["pos"] == BoxSpace(0, 512, (2,), np.float64)
    assert space["mode"].low == 1 and space["mode"].high == 3 and space["mode"].dtype == np.int64
    assert space["flags"] == BinarySpace((4,))
    assert space["text"].max_length == 20 and space["text"].min_length == 1
    with pytest.raises(TypeError, match="cannot convert"):
        from_gymnasium(gym.spaces.Tuple([gym.spaces.Discrete(2)]))


def test_integer_bounds_must_fit_the_dtype():
    with pytest.raises(ValueError, match="do not fit dtype uint8"):
        BoxSpace(-5, 300, (2,), np.uint8)
    assert BoxSpace(0, 255, (2,), np.uint8).high.max() == 255


def test_text_refuses_nul():
    with pytest.raises(InvalidValueError, match="NUL"):
        TextSpace(8).validate("ab\x00")


def test_float_overflow_and_bad_text_batches():
    with pytest.raises(InvalidValueError, match="overflow dtype float32"):
        BoxSpace(-np.inf, np.inf, (1,), np.float32).validate(np.array([1e300]))
    assert np.isinf(BoxSpace(-np.inf, np.inf, (1,), np.float32).validate(np.array([np.inf]))[0])
    for bad in ({"a": 1}, 5, "one string"):
        with pytest.raises(InvalidValueError, match="batch of strings"):
            TextSpace(4).validate(bad, batched=True)


@pytest.mark.parametrize("dtype,low,high", [(np.int64, 0, 2**63 - 1), (np.int64, -2**63, 2**63 - 1),
                                            (np.uint64, 0, 2**64 - 1), (np.uint64, 2**63, 2**64 - 1),
                                            (np.int32, -2**31, 2**31 - 1), (np.int8, -3, 5)])
def test_integer_bounds_stay_exact_through_sample_validate_and_json(dtype, low, high):
    space = BoxSpace(low, high, (), dtype)
    assert space.low.dtype == dtype and int(space.low) == low and int(space.high) == high
    batch = space.sample(np.random.default_rng(0), batch_size=2000)
    assert batch.dtype == dtype and len(np.unique(batch)) > 5 and space.validate(batch, batched=True) is not None
    assert int(batch.min()) >= low and int(batch.max()) <= high and space.contains(space.sample())
    back = space_from_json(json.loads(json.dumps(space.to_json())))
    assert back == space and int(back.low) == low and int(back.high) == high
    per = BoxSpace(np.array([low, low], dtype), np.array([high, high - 1], dtype), (2,), dtype)
    again = space_from_json(json.loads(json.dumps(per.to_json())))
    assert again.high.dtype == dtype and [int(v) for v in again.high] == [high, high - 1]
    with pytest.raises(InvalidValueError, match="outside"):
        per.validate(np.array([low, high], dtype))


def test_integer_bounds_from_floats_and_gymnasium():
    # a float bound rounds inward; float(2**63 - 1) == 2.0**63 means the int64 limit (older folders hold it)
    assert int(BoxSpace(0.5, 2.0**63, (), np.int64).high) == 2**63 - 1
    assert int(BoxSpace(0.5, 9.5, (), np.int64).low) == 1
    with pytest.raises(ValueError, match="do not fit dtype int64"):
        BoxSpace(0, 2**63, (), np.int64)
    with pytest.raises(ValueError, match="do not fit dtype uint64"):
        BoxSpace(-1, 5, (), np.uint64)
    gym = pytest.importorskip("gymnasium")
    space = from_gymnasium(gym.spaces.Box(0, np.iinfo(np.int64).max, (3,), np.int64))
    assert space.high.dtype == np.int64 and int(space.high[0]) == 2**63 - 1
    assert space.sample(np.random.default_rng(1), batch_size=10).min() >= 0
