"""One-step validation (spaces/step_check.py): the one fast path every leaf type takes, against the
full validation (Space.validate) it falls back to."""

import types

import numpy as np
import pytest

from trajstore.errors import InvalidValueError
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace, tree
from trajstore.spaces.step_check import step_check
from trajstore.storages.base import validated_step

SPACE = DictSpace({
    "obs": DictSpace({
        "cam": BoxSpace(0, 255, (4, 5, 3), np.uint8, metadata={"kind": "image"}),
        "joints": BoxSpace(-np.pi, np.pi, (7,), np.float32),
        "vel": BoxSpace(np.full(7, -2.0), np.arange(7, dtype=np.float64), (7,), np.float32),
        "contacts": BinarySpace((3,)),
    }),
    "action": BoxSpace(-1, 1, (2,), np.float32),
    "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
    "count": BoxSpace(0, 9, (3,), np.int16),
    "mode": BoxSpace(0, 4, (), np.int64),
    "terminated": BinarySpace(),
    "truncated": BinarySpace(),
    "instruction": TextSpace(12, min_length=1),
    "note": TextSpace(5),
})
PATHS = [tree.path_name(p) for p in tree.leaf_paths(SPACE)]
DTYPES = [leaf.dtype for _, leaf in tree.leaves(SPACE)]


def step(rng: np.random.Generator) -> dict:
    return {"obs": {"cam": rng.integers(0, 256, (4, 5, 3), dtype=np.uint8),
                    "joints": rng.uniform(-3, 3, 7).astype(np.float32),
                    "vel": rng.uniform(-2, 0, 7).astype(np.float32),
                    "contacts": rng.integers(0, 2, 3).astype(bool)},
            "action": rng.uniform(-1, 1, 2).astype(np.float32),
            "reward": np.float32(rng.normal()),
            "count": rng.integers(0, 10, 3).astype(np.int16),
            "mode": np.int64(rng.integers(0, 5)),
            "terminated": bool(rng.integers(0, 2)),
            "truncated": np.bool_(rng.integers(0, 2)),
            "instruction": "push the T",
            "note": ""}


def with_leaf(s: dict, path: str, value) -> dict:
    leaves = tree.flatten(SPACE, s)
    leaves[PATHS.index(path)] = value
    return tree.unflatten(SPACE, leaves)


def slow_path(s: dict) -> list[np.ndarray]:
    """The full validation's leaves, through the public call: a step that is not a plain dict skips
    the fast path."""
    return validated_step(SPACE, types.MappingProxyType(s))


def reference(s: dict) -> list[np.ndarray]:
    """What the leaves must be, from Space.validate alone: each validated value in its leaf's dtype."""
    return [np.asarray(v, dtype=d)[None] for v, d in zip(tree.flatten(SPACE, SPACE.validate(s)), DTYPES)]


def assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert [(a.shape, a.dtype) for a in got] == [(b.shape, b.dtype) for b in want]
    for path, a, b in zip(PATHS, got, want):
        assert np.array_equal(a, b), path


def error_of(fn, *args) -> str:
    with pytest.raises(InvalidValueError) as info:
        fn(*args)
    return str(info.value)


def test_every_leaf_type_on_the_fast_path_gives_the_full_validations_arrays():
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = step(rng)
        fast = step_check(SPACE, True).leaves(s)
        assert fast is not None
        assert_same(fast, reference(s))
        assert_same(fast, slow_path(s))
        assert_same(validated_step(SPACE, s), fast)
        assert fast[PATHS.index("obs/joints")].base is s["obs"]["joints"]  # a view: no copy before staging
    assert fast[PATHS.index("instruction")].dtype == np.dtype("<U12")  # as in a batch, not <U10
    assert fast[PATHS.index("note")].tolist() == [""] and fast[PATHS.index("note")].dtype == np.dtype("<U5")


@pytest.mark.parametrize("path, value, want", [
    ("terminated", True, [True]), ("terminated", False, [False]), ("terminated", np.True_, [True]),
    ("terminated", np.array(False), [False]),
    ("terminated", 1, [True]), ("terminated", 0, [False]), ("terminated", np.int8(1), [True]),  # 0/1 integers
    ("terminated", np.array(1, np.uint8), [True]),
    ("obs/contacts", np.array([0, 1, 1], np.int8), [[False, True, True]]),  # gymnasium's MultiBinary gives int8
    ("obs/contacts", np.array([True, False, True]), [[True, False, True]]),
    ("instruction", np.str_("pick"), ["pick"]), ("instruction", np.array("pick"), ["pick"]),
    ("instruction", "x" * 12, ["x" * 12]), ("instruction", "é🍎", ["é🍎"]),
    ("note", "", [""]), ("note", np.array("", dtype="<U5"), [""]),
    ("reward", np.float32(-0.25), [-0.25]), ("reward", np.array(2.5, np.float32), [2.5]),
    ("reward", np.float32(np.inf), [np.inf]),  # unbounded: +-inf is in, NaN is not
    ("mode", 3, [3]), ("mode", np.int64(4), [4]), ("mode", np.array(0), [0]),
])
def test_each_kind_of_leaf_value_takes_the_fast_path(path, value, want):
    s = with_leaf(step(np.random.default_rng(1)), path, value)
    fast = step_check(SPACE, True).leaves(s)
    assert fast is not None, path
    assert fast[PATHS.index(path)].tolist() == want
    assert_same(fast, reference(s))
    assert_same(fast, slow_path(s))


@pytest.mark.parametrize("path, value", [
    ("obs/joints", np.full(7, 3.5, np.float32)),
    ("obs/vel", np.array([0, 0, 0, 0, 0, 0, 6.5], np.float32)),  # bound of its own element (6)
    ("obs/vel", np.array([-2.5, 0, 0, 0, 0, 0, 0], np.float32)),
    ("reward", np.float32(np.nan)),  # unbounded: NaN still refused
    ("count", np.array([0, 10, 0], np.int16)),
    ("mode", 5), ("mode", np.int64(-1)), ("mode", 2**70), ("mode", 0.5),
    ("action", np.zeros((1, 2), np.float32)), ("action", "fast"),
    ("terminated", 2), ("terminated", np.int64(-1)), ("terminated", 0.0), ("terminated", np.float32(1)),
    ("terminated", "yes"), ("terminated", np.array([True])), ("terminated", None),
    ("obs/contacts", np.array([0, 2, 1], np.int8)), ("obs/contacts", np.ones(3, np.float32)),
    ("obs/contacts", [True, False]),
    ("instruction", ""), ("instruction", "x" * 13), ("instruction", "a\x00b"), ("instruction", b"bytes"),
    ("instruction", 5), ("instruction", np.array(["a", "b"])), ("instruction", np.bytes_(b"ab")),
    ("note", "abcdef"), ("note", np.array(3)),
])
def test_refusals_are_those_of_the_full_validation(path, value):
    s = with_leaf(step(np.random.default_rng(2)), path, value)
    assert step_check(SPACE, True).leaves(s) is None
    message = error_of(validated_step, SPACE, s)
    assert message == error_of(SPACE.validate, s) == error_of(slow_path, s)
    assert repr(path) in message


def test_two_bad_leaves_name_the_first_as_the_full_validation_does():
    s = with_leaf(step(np.random.default_rng(3)), "obs/joints", np.full(7, 9, np.float32))  # taken, out of bounds
    s = with_leaf(s, "instruction", "x" * 40)  # not taken: validated alone, refused
    message = error_of(validated_step, SPACE, s)
    assert message == error_of(SPACE.validate, s) and "'obs/joints'" in message


def test_check_bounds_false_takes_values_outside_the_bounds_as_they_are():
    s = with_leaf(step(np.random.default_rng(4)), "count", np.array([0, 10, 99], np.int16))
    s = with_leaf(s, "reward", np.float32(np.nan))
    fast = step_check(SPACE, False).leaves(s)
    assert fast is not None and fast[PATHS.index("count")].tolist() == [[0, 10, 99]]
    assert np.isnan(fast[PATHS.index("reward")][0])


@pytest.mark.parametrize("path, value, want", [
    ("action", [0.25, -0.5], [[0.25, -0.5]]),  # a list
    ("action", np.array([0.25, -0.5]), [[0.25, -0.5]]),  # float64: cast
    ("obs/contacts", [1, 0, 1], [[True, False, True]]),
    ("mode", np.int32(2), [2]),
    ("reward", 0.5, [0.5]),  # a Python float for a float32 leaf: cast
])
def test_the_full_validation_converts_what_the_fast_path_does_not_take(path, value, want):
    s = with_leaf(step(np.random.default_rng(5)), path, value)
    assert step_check(SPACE, True).leaves(s) is None
    got = validated_step(SPACE, s)
    assert got[PATHS.index(path)].tolist() == want
    assert_same(got, reference(s))
    assert_same(got, slow_path(s))


def test_wrong_keys_and_structures_get_the_full_validations_error():
    for change in (lambda s: s.__setitem__("extra", np.zeros(1)), lambda s: s.pop("count"),
                   lambda s: s.__setitem__("obs", list(s["obs"].values()))):
        s = step(np.random.default_rng(6))
        change(s)
        assert step_check(SPACE, True).leaves(s) is None
        assert error_of(validated_step, SPACE, s) == error_of(SPACE.validate, s)


class CountFullValidation:
    """Counts the calls of every space type's ``validate`` (the slow path), by type name."""

    def __init__(self, monkeypatch):
        self.calls: dict[str, int] = {}
        for cls in (BoxSpace, BinarySpace, TextSpace, DictSpace):
            monkeypatch.setattr(cls, "validate", self._counting(cls.__name__, cls.validate))

    def _counting(self, name, validate):
        def wrapper(space, *args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return validate(space, *args, **kwargs)
        return wrapper


def test_a_step_with_bool_and_text_leaves_takes_the_fast_path_only(monkeypatch):
    count = CountFullValidation(monkeypatch)
    for s in (step(np.random.default_rng(7)), with_leaf(step(np.random.default_rng(8)), "terminated", np.int8(1))):
        assert len(validated_step(SPACE, s)) == len(PATHS)
    assert count.calls == {}
    # a leaf the fast path does not take is validated alone; the others stay on the fast path
    s = with_leaf(with_leaf(step(np.random.default_rng(9)), "action", [0.5, 0.5]), "note", np.str_("ab"))
    assert validated_step(SPACE, s)[PATHS.index("action")].dtype == np.float32
    assert count.calls == {"BoxSpace": 1}


def test_the_recorders_steps_take_the_fast_path(monkeypatch, tmp_path):
    gym = pytest.importorskip("gymnasium")
    from trajstore.recording.step import StepRecorder

    recorder = StepRecorder(tmp_path / "new", render_key=None, info_keys=(), image_keys=(), capacity=None,
                            routing=None, fps=None)
    count = CountFullValidation(monkeypatch)
    for env_id in ("CartPole-v1", "Pendulum-v1"):
        env = gym.make(env_id)
        obs, info = env.reset(seed=0)
        space = recorder.space(env.observation_space, env.action_space, None, info)
        for _ in range(5):
            action = env.action_space.sample()
            next_obs, reward, terminated, truncated, info = env.step(action)
            s = recorder.record(recorder.observation(obs, None), action, reward, terminated, truncated, info)
            leaves = validated_step(space, s)
            assert [v.dtype for v in leaves[-2:]] == [np.dtype(bool)] * 2
            assert leaves[-2].tolist() == [terminated] and leaves[-1].tolist() == [truncated]
            obs = next_obs
        env.close()
    assert count.calls == {}


def test_single_leaf_spaces():
    for space, good, bad in [(BoxSpace(-1, 1, (3,), np.float32), np.zeros(3, np.float32), np.full(3, 2, np.float32)),
                             (BinarySpace(), np.True_, 3), (TextSpace(4), "abcd", "abcde")]:
        got = step_check(space, True).leaves(good)
        assert got is not None and got[0].shape == (1, *np.shape(good)) and got[0].dtype == space.dtype
        assert step_check(space, True).leaves(bad) is None
        assert error_of(validated_step, space, bad) == error_of(space.validate, bad)


def test_a_subclass_with_a_validate_of_its_own_is_validated_by_it(monkeypatch):
    class Positive(BoxSpace):
        def validate(self, x, **kwargs):
            arr = super().validate(x, **kwargs)
            if (arr <= 0).any():
                raise InvalidValueError(f"leaf {kwargs.get('path')!r}: expected positive values")
            return arr

    space = DictSpace({"x": Positive(-1, 1, (2,), np.float32), "done": BinarySpace()})
    good = {"x": np.full(2, 0.5, np.float32), "done": True}
    assert step_check(space, True).leaves(good) is None  # not taken as it is: its own validate runs
    assert validated_step(space, good)[0].tolist() == [[0.5, 0.5]]
    assert "positive" in error_of(validated_step, space, {"x": np.zeros(2, np.float32), "done": True})
    assert step_check(space, True).leaves({"x": [0.5, 0.5], "done": np.True_}) is None
    count = CountFullValidation(monkeypatch)
    validated_step(DictSpace({"x": Positive(-1, 1, (2,), np.float32), "done": BinarySpace()}), good)
    assert count.calls == {"BoxSpace": 1}  # Positive's validate calling BoxSpace's; the flag took the fast path
