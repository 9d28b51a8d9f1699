"""Sampling methods return torch tensors on request (``as_torch=True``): the values, dtypes and shapes of the
NumPy result, without a copy on the CPU; ``trajstore.to_torch`` converts any result tree."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import trajstore  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace  # noqa: E402
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space  # noqa: E402

SPACE = DictSpace({"observation": DictSpace({"state": BoxSpace(-1e6, 1e6, (3,), np.float32),
                                             "pixels": BoxSpace(0, 255, (4, 4, 3), np.uint8)}),
                   "action": BoxSpace(-1e6, 1e6, (2,), np.float64), "reward": BoxSpace(-1e6, 1e6, (), np.float32),
                   "terminated": BinarySpace(), "truncated": BinarySpace(), "step": BoxSpace(0, 1 << 30, (), np.int64)})


def steps(first, n):
    g = np.arange(first, first + n)
    return {"observation": {"state": np.stack([g, g + 0.5, -g], 1).astype(np.float32),
                            "pixels": (g[:, None, None, None] % 200 + np.zeros((4, 4, 3))).astype(np.uint8)},
            "action": np.stack([g, 2.0 * g], 1), "reward": g.astype(np.float32), "terminated": g % 7 == 6,
            "truncated": np.zeros(n, bool), "step": g.astype(np.int64)}


def fill(rb, lengths=(40, 25, 60)):
    first = 0
    for n in lengths:
        rb.extend(steps(first, n))
        rb.end_episode(final_observation={"state": np.full(3, -1, np.float32), "pixels": np.zeros((4, 4, 3), np.uint8)})
        first += n


@pytest.fixture(params=["memory", "disk", "ring"])
def rb(request, tmp_path):
    path = None if request.param == "memory" else tmp_path / "rb"
    capacity = 70 if request.param == "ring" else None  # the ring wraps: 125 steps into 70 slots
    buffer = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, capacity=capacity,
                                 **dict_storage_kwargs_from_space(SPACE, kind_storage_cls={}))
    fill(buffer)
    yield buffer
    buffer.close()


def same(tensor_tree, numpy_tree):
    """Every leaf: a torch.Tensor equal to the NumPy one, same dtype and shape."""
    if isinstance(numpy_tree, dict):
        assert isinstance(tensor_tree, dict) and tensor_tree.keys() == numpy_tree.keys()
        for k in numpy_tree:
            same(tensor_tree[k], numpy_tree[k])
        return
    if isinstance(numpy_tree, tuple):
        assert isinstance(tensor_tree, tuple) and len(tensor_tree) == len(numpy_tree)
        for t, n in zip(tensor_tree, numpy_tree):
            same(t, n)
        return
    assert isinstance(tensor_tree, torch.Tensor), type(tensor_tree)
    assert tensor_tree.device.type == "cpu"
    assert tuple(tensor_tree.shape) == numpy_tree.shape
    assert torch.from_numpy(np.zeros(0, numpy_tree.dtype)).dtype == tensor_tree.dtype
    np.testing.assert_array_equal(tensor_tree.numpy(), numpy_tree)


def seeded(method, *args, **kwargs):
    return method(*args, rng=np.random.default_rng(3), **kwargs)


def test_every_sampler_gives_the_numpy_values_as_tensors(rb):
    same(seeded(rb.sample, 32, as_torch=True), seeded(rb.sample, 32))
    same(seeded(rb.sample, 32, return_indices=True, as_torch=True, device="cpu"),
         seeded(rb.sample, 32, return_indices=True))
    same(seeded(rb.sample_windows, 16, 5, as_torch=True), seeded(rb.sample_windows, 16, 5))
    delta = {"observation": [-1, 0], "action": range(4)}
    same(seeded(rb.sample_windows, 16, delta_indices=delta, as_torch=True),
         seeded(rb.sample_windows, 16, delta_indices=delta))
    same(rb.windows_at(np.array([0, 3, 3, 9]), delta, as_torch=True, device=torch.device("cpu")),
         rb.windows_at(np.array([0, 3, 3, 9]), delta))
    for n in (1, 3):
        same(seeded(rb.sample_transitions, 32, n_step=n, as_torch=True), seeded(rb.sample_transitions, 32, n_step=n))
    ids = [e.id for e in rb.episodes][-1:]
    got = seeded(rb.sample, 32, episodes=ids, as_torch=True)
    last = rb.episodes[-1]
    first_step = int(rb[last.start]["step"])
    assert got["step"].min().item() >= first_step and got["step"].dtype == torch.int64


def test_cpu_tensors_share_the_arrays_read(rb, monkeypatch):
    """No copy on the CPU: the tensors are views of the arrays the NumPy path returns."""
    import trajstore.replay_buffer.training_api as api
    import trajstore.replay_buffer.transitions_api as transitions_api

    kept = []
    real = api.output

    def spy(*args):
        convert = real(*args)

        def wrapped(result):
            kept.append(result)
            return convert(result)
        return wrapped

    monkeypatch.setattr(api, "output", spy)
    monkeypatch.setattr(transitions_api, "output", spy)  # sample_transitions' module
    for call in (lambda: rb.sample(16, as_torch=True), lambda: rb.sample_transitions(16, n_step=3, as_torch=True),
                 lambda: rb.sample_windows(8, 4, as_torch=True, device="cpu")):
        tensors = call()
        arrays = kept.pop()
        flat_t, flat_a = [], []

        def walk(t, a):
            if isinstance(a, dict):
                for k in a:
                    walk(t[k], a[k])
            else:
                flat_t.append(t)
                flat_a.append(a)
        walk(tensors, arrays)
        for t, a in zip(flat_t, flat_a):
            assert t.data_ptr() == a.__array_interface__["data"][0] and np.shares_memory(t.numpy(), a)


def test_to_torch_shares_memory_where_numpy_allows_and_copies_otherwise():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = trajstore.to_torch(a)
    assert np.shares_memory(t.numpy(), a) and t.dtype == torch.float32
    scalar = trajstore.to_torch(np.float64(2.5))
    assert scalar.shape == () and scalar.dtype == torch.float64
    strided = trajstore.to_torch(a[:, ::2])  # not contiguous: one copy
    np.testing.assert_array_equal(strided.numpy(), a[:, ::2])
    assert not np.shares_memory(strided.numpy(), a)
    frozen = a.copy()
    frozen.setflags(write=False)  # a read-only array (a memory map): copied, never a warning
    assert not np.shares_memory(trajstore.to_torch(frozen).numpy(), frozen)
    tree = trajstore.to_torch(({"x": a, "text": np.array(["ab", "c"]), "none": None}, [np.zeros(2, bool)]))
    assert tree[0]["text"] == ["ab", "c"] and tree[0]["none"] is None and tree[1][0].dtype == torch.bool
    assert trajstore.to_torch(a, device="cpu").device.type == "cpu"


def test_pin_memory_gives_page_locked_tensors_or_is_refused_up_front(rb, monkeypatch):
    if not torch.accelerator.is_available():
        monkeypatch.setattr(rb._reads(), "sample", lambda *a, **k: pytest.fail("read before the check"))
        with pytest.raises(ValueError, match=r"pin_memory=True needs an accelerator.*available here: 'cpu' only"):
            rb.sample(4, as_torch=True, pin_memory=True)
        with pytest.raises(ValueError, match="pin_memory=True needs an accelerator"):
            trajstore.to_torch(np.zeros(2), pin_memory=True)
        return
    batch = rb.sample(4, as_torch=True, pin_memory=True)
    assert batch["action"].is_pinned()


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "mps"])
def test_a_device_this_machine_lacks_is_refused_before_the_read(rb, device, monkeypatch):
    from trajstore.backends import check_torch_target

    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}[device.split(":")[0]]
    if available:
        assert rb.sample(4, as_torch=True, device=device)["action"].device.type == device.split(":")[0]
        return
    monkeypatch.setattr(rb._reads(), "sample", lambda *a, **k: pytest.fail("read before the check"))
    for dev in (device, torch.device(device)):
        with pytest.raises(ValueError, match=r"device=.*is_available\(\) is False.*available here: 'cpu'"):
            rb.sample(4, as_torch=True, device=dev)
        with pytest.raises(ValueError, match="is_available"):
            rb.sample_windows(4, 3, as_torch=True, device=dev)
        with pytest.raises(ValueError, match="is_available"):
            check_torch_target(dev)
        with pytest.raises(ValueError, match="is_available"):
            trajstore.to_torch(np.zeros(2), device=dev)


def test_a_generic_device_type_is_probed_once(monkeypatch):
    from trajstore import backends

    calls = []
    real = torch.empty

    def empty(*a, **k):
        calls.append(k.get("device"))
        return real(*a, **k)

    monkeypatch.setattr(torch, "empty", empty)
    monkeypatch.setattr(backends, "_DEVICE_PROBLEMS", {})
    assert backends.check_torch_target("meta") == torch.device("meta")  # torch can place tensors there
    assert backends.check_torch_target(torch.device("meta")) == torch.device("meta")
    assert calls == [torch.device("meta")]  # probed once, cached
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        with pytest.raises(ValueError, match=r"device='xpu'.*cannot place a tensor there"):
            backends.check_torch_target("xpu")


def test_to_torch_converts_big_endian_arrays_to_native_order():
    a = np.arange(6, dtype=">f4").reshape(2, 3)
    t = trajstore.to_torch(a)
    assert t.dtype == torch.float32 and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), a)
    frozen = np.frombuffer(np.arange(3, dtype=">u2").tobytes(), ">u2")  # read-only and big-endian
    tree = trajstore.to_torch({"i": np.array([1, -2], ">i8"), "frozen": frozen})
    assert tree["i"].tolist() == [1, -2] and tree["frozen"].tolist() == [0, 1, 2]
    assert tree["frozen"].dtype == torch.uint16


@pytest.mark.parametrize("kwargs, error, words", [
    ({"device": "cpu"}, TypeError, "as_torch=True"),
    ({"pin_memory": True}, TypeError, "as_torch=True"),
    ({"device": "cpu", "pin_memory": True}, TypeError, r"device='cpu' and pin_memory=True go with as_torch=True"),
    ({"as_torch": "yes"}, TypeError, "as_torch must be"),
    ({"as_torch": True, "device": 3}, TypeError, "device must be"),
    ({"as_torch": True, "device": "gpu7"}, ValueError, "not a torch device"),
    ({"as_torch": True, "pin_memory": "no"}, TypeError, "pin_memory must be"),
])
def test_bad_options_are_refused_before_anything_is_read(rb, kwargs, error, words, monkeypatch):
    def no_read(*a, **k):
        raise AssertionError("read before the options were checked")

    monkeypatch.setattr(rb._reads(), "sample", no_read)
    with pytest.raises(error, match=words):
        rb.sample(4, **kwargs)
    with pytest.raises(error, match=words):
        rb.sample_transitions(4, **kwargs)
    with pytest.raises(error, match=words):
        rb.sample_windows(4, 3, **kwargs)
    with pytest.raises(error, match=words):
        rb.windows_at([0], {"action": [0]}, **kwargs)


def test_text_leaves_come_back_as_lists_of_str(tmp_path):
    space = DictSpace({"x": BoxSpace(-1, 1, (), np.float32), "task": TextSpace(8)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"x": np.zeros(3, np.float32), "task": np.array(["a", "bb", "ccc"])})
        got = rb.sample(5, as_torch=True, rng=np.random.default_rng(0))
        want = rb.sample(5, rng=np.random.default_rng(0))
        assert got["task"] == want["task"].tolist() and isinstance(got["x"], torch.Tensor)


def test_the_refusal_without_as_torch_names_only_what_was_passed(rb):
    with pytest.raises(TypeError) as info:
        rb.sample(4, device="cuda")
    assert str(info.value).startswith("device='cuda' goes with as_torch=True") and "pin_memory" not in str(info.value)
    with pytest.raises(TypeError) as info:
        rb.sample(4, pin_memory=True)
    assert str(info.value).startswith("pin_memory=True goes with as_torch=True") and "device" not in str(info.value)


def test_text_leaves_of_windows_come_back_as_nested_lists_of_str(tmp_path):
    space = DictSpace({"x": BoxSpace(-1, 1, (), np.float32), "task": TextSpace(8)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"x": np.zeros(4, np.float32), "task": np.array(["a", "bb", "ccc", "d"])})
        rb.end_episode()
        got, _ = rb.windows_at([1, 2], {"task": [-1, 0]}, as_torch=True)
        assert got["task"] == [["a", "bb"], ["bb", "ccc"]]
        assert all(isinstance(s, str) for row in got["task"] for s in row)
