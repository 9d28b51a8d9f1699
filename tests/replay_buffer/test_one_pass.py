"""One pass down: a request is normalised once and validated once at the edge, options are
checked before the disk is touched, and one buffer holds one writer lock."""

import numpy as np
import pytest

import trajstore.replay_buffer.reads as reads_module
import trajstore.replay_buffer.writing_api as writing_module
import trajstore.storages.base as base_module
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace, tree
from trajstore.storages import (DictStorage, HDF5Storage, ImageStorage, VideoStorage,
                                dict_storage_kwargs_from_space)
from trajstore.storages import _selection


def step_space():
    return DictSpace({
        "observation": DictSpace({
            "pixels": BoxSpace(0, 255, (16, 16, 3), np.uint8, metadata={"kind": "image"}),
            "state": BoxSpace(-1, 1, (4,), np.float32),
        }),
        "action": BoxSpace(-1, 1, (2,), np.float32),
        "done": BinarySpace(),
        "task": TextSpace(8),
    })


def make(path, capacity=None, **routing):
    space = step_space()
    return ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=capacity,
                               **dict_storage_kwargs_from_space(space, **routing))


@pytest.fixture
def count_validations(monkeypatch):
    """Counts validate() calls per leaf space class (a nested value validates each leaf once)."""
    calls = {}
    for cls in {type(leaf) for _, leaf in tree.leaves(step_space())} | {DictSpace}:
        original = cls.validate

        def counting(self, *args, _original=original, _name=cls.__name__, **kwargs):
            calls[_name] = calls.get(_name, 0) + 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "validate", counting)
    return calls


@pytest.fixture
def count_selects(monkeypatch):
    """Counts user indexes turned into selections, wherever in the package they are made."""
    calls = []
    original = _selection.select

    def counting(index, length):
        calls.append(index)
        return original(index, length)

    for module in (writing_module, reads_module, base_module):
        monkeypatch.setattr(module, "select", counting)
    return calls


@pytest.mark.parametrize("capacity", [None, 5])
def test_append_and_extend_validate_each_leaf_once(tmp_path, count_validations, capacity):
    rb = make(tmp_path / "rb", capacity)
    step = step_space().sample(np.random.default_rng(0))
    count_validations.clear()
    rb.append(step)
    # The one-step check (spaces/step_check.py) takes every leaf of this step, bool and text too, and
    # nothing below validates it again, although the step crosses two storages.
    assert count_validations == {}
    step["action"] = step["action"].tolist()  # a leaf the check does not take: validated alone, once
    rb.append(step)
    assert count_validations == {"BoxSpace": 1}
    count_validations.clear()
    rb.extend(step_space().sample(np.random.default_rng(1), batch_size=7))  # wraps the ring of 5
    assert count_validations == {"DictSpace": 2, "BoxSpace": 3, "BinarySpace": 1, "TextSpace": 1}
    rb.close()


@pytest.mark.parametrize("index", [3, -1, slice(None), np.array([5, 1, 5, 0]), np.arange(8) % 2 == 0])
def test_a_read_normalises_its_index_once(tmp_path, count_selects, index):
    rb = make(tmp_path / "rb", capacity=8)
    rb.extend(step_space().sample(np.random.default_rng(0), batch_size=11))  # wrapped: head is 3
    count_selects.clear()
    rb[index]
    assert len(count_selects) == 1
    rb.close()


def test_a_wrapped_full_read_never_sorts(tmp_path, monkeypatch):
    rb = make(tmp_path / "rb", capacity=8)
    batch = step_space().sample(np.random.default_rng(0), batch_size=11)
    rb.extend(batch)
    rb.flush()  # staged steps are written first; the read itself must not sort
    monkeypatch.setattr(np, "argsort", lambda *a, **k: pytest.fail("rb[:] sorted its slots"))
    monkeypatch.setattr(np, "unique", lambda *a, **k: pytest.fail("rb[:] sorted its slots"))
    got = rb[:]
    monkeypatch.undo()
    np.testing.assert_array_equal(got["action"], batch["action"][3:])
    rb.close()


@pytest.mark.parametrize("routing, error", [
    ({"kind_kwargs": {"image": {"format": "GIF"}}}, ValueError),
    ({"kind_kwargs": {"image": {"quality": 101}}}, ValueError),
    ({"kind_kwargs": {"image": {"format": "PNG", "quality": 90}}}, ValueError),
    ({"kind_kwargs": {"image": {"subsampling": "411"}}}, ValueError),
    ({"kind_kwargs": {"image": {"format": "PNG", "subsampling": "420"}}}, ValueError),
    ({"kind_kwargs": {"image": {"colour": "yes"}}}, TypeError),
    ({"default_kwargs": {"compression": "zstd"}}, ValueError),
    ({"default_kwargs": {"chunk_rows": 0}}, ValueError),
    ({"kind_storage_cls": {"image": VideoStorage}, "kind_kwargs": {"image": {"crf": 99}}}, ValueError),
    ({"kind_storage_cls": {"image": VideoStorage}, "kind_kwargs": {"image": {"fps": -1}}}, ValueError),
])
def test_a_bad_option_leaves_no_folder_behind(tmp_path, routing, error):
    with pytest.raises(error, match="option|unexpected"):
        make(tmp_path / "rb", **routing)
    assert not (tmp_path / "rb").exists()
    (tmp_path / "empty").mkdir()  # a folder the user made stays, and stays empty
    with pytest.raises(error):
        make(tmp_path / "empty", **routing)
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.parametrize("cls, options", [(ImageStorage, {"format": "GIF"}), (HDF5Storage, {"compression": 3}),
                                          (VideoStorage, {"gop_size": 0})])
def test_a_storage_on_its_own_checks_options_before_the_folder(tmp_path, cls, options):
    space = BoxSpace(0, 255, (8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="option"):
        cls.create(space, capacity=None, cache_path=tmp_path / "s", **options)
    assert not (tmp_path / "s").exists()


def test_one_writer_lock_per_buffer(tmp_path):
    pytest.importorskip("av")
    rb = make(tmp_path / "rb", kind_storage_cls={"image": VideoStorage})
    rb.extend(step_space().sample(np.random.default_rng(0), batch_size=3))
    rb.close()
    locks = sorted(p.relative_to(tmp_path / "rb").as_posix() for p in (tmp_path / "rb").rglob("writer.lock"))
    assert locks == ["writer.lock"]
    # A sub-storage opened on its own still takes its own lock.
    from trajstore.errors import LockedError
    from trajstore.storages import SpaceStorage

    sub = SpaceStorage.load_from(tmp_path / "rb" / "storage" / "@rest", read_only=False)
    with pytest.raises(LockedError):
        SpaceStorage.load_from(tmp_path / "rb" / "storage" / "@rest", read_only=False)
    sub.close()


def test_a_failed_extend_adds_no_hdf5_rows(tmp_path, monkeypatch):
    space = DictSpace({"a": BoxSpace(0, 1, (3,), np.float32), "b": BoxSpace(0, 1, (), np.float32)})
    s = HDF5Storage.create(space, capacity=None, cache_path=tmp_path / "s")
    first = space.sample(np.random.default_rng(0), batch_size=4)
    s.extend(first)

    def disk_full(self, sel, leaves):
        self._datasets[0][sel.slots[0]] = leaves[0][0]  # one leaf written, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(HDF5Storage, "_write", disk_full)
    with pytest.raises(OSError):
        s.extend(space.sample(np.random.default_rng(1), batch_size=3))
    monkeypatch.undo()
    assert len(s) == 4
    np.testing.assert_array_equal(s[:]["a"], first["a"])
    more = space.sample(np.random.default_rng(2), batch_size=2)
    s.extend(more)
    s.close()
    with HDF5Storage.load_from(tmp_path / "s") as again:
        assert len(again) == 6
        np.testing.assert_array_equal(again[4:]["b"], more["b"])


def test_a_storage_writer_inside_a_buffer_and_the_buffer_writer_exclude_each_other(tmp_path):
    from trajstore.errors import LockedError
    from trajstore.storages import SpaceStorage

    rb = make(tmp_path / "rb")
    rb.extend(step_space().sample(np.random.default_rng(0), batch_size=3))
    for sub in ("storage", "storage/@rest", "storage/observation.pixels"):
        with pytest.raises(LockedError):
            SpaceStorage.load_from(tmp_path / "rb" / sub, read_only=False)
    rb.close()
    alone = SpaceStorage.load_from(tmp_path / "rb" / "storage" / "@rest", read_only=False)
    with pytest.raises(LockedError):
        ReplayBuffer.load_from(tmp_path / "rb", read_only=False)
    alone.close()
    ReplayBuffer.load_from(tmp_path / "rb", read_only=False).close()


def test_a_create_that_loses_a_race_leaves_the_winner_intact(tmp_path, monkeypatch):
    from trajstore import _folder
    from trajstore.errors import StorageExistsError

    path = tmp_path / "rb"
    winner = {}
    real_make = _folder.make_fresh_dir

    def make_then_lose(p):  # the other writer creates and locks the folder between our check and our lock
        out = real_make(p)
        monkeypatch.setattr(_folder, "make_fresh_dir", real_make)
        winner["rb"] = make(path)
        return out

    monkeypatch.setattr(_folder, "make_fresh_dir", make_then_lose)
    with pytest.raises(StorageExistsError):
        make(path)
    rb = winner["rb"]
    rb.extend(step_space().sample(np.random.default_rng(0), batch_size=2))
    rb.close()
    with ReplayBuffer.load_from(path) as again:
        assert len(again) == 2


def test_a_failed_create_removes_the_parent_folders_it_made(tmp_path):
    with pytest.raises(ValueError):
        make(tmp_path / "new" / "deeper" / "rb", kind_kwargs={"image": {"format": "GIF"}})
    assert not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match="chunk"):  # passes the option check, fails against the space
        make(tmp_path / "new" / "rb", default_kwargs={"chunk_rows": 10**9})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fps", [1e-300, 1e30, float("nan")])
def test_video_frame_rates_a_segment_cannot_carry_are_refused(tmp_path, fps):
    with pytest.raises(ValueError, match="fps"):
        make(tmp_path / "rb", kind_storage_cls={"image": VideoStorage}, kind_kwargs={"image": {"fps": fps}})
    assert not (tmp_path / "rb").exists()


def test_a_forked_child_of_an_in_memory_buffer_sees_what_was_written(tmp_path):
    import multiprocessing

    space = DictSpace({"x": BoxSpace(0, 100, (), np.float32)})
    rb = ReplayBuffer.create(DictStorage, space, storage_cls_map={"*": HDF5Storage})
    rb.extend({"x": np.arange(5, dtype=np.float32)})  # staged, maybe written behind
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def child():
        queue.put((len(rb), rb[:]["x"].tolist() if len(rb) else []))

    proc = ctx.Process(target=child)
    proc.start()
    n, values = queue.get(timeout=60)
    proc.join(60)
    assert values == list(range(n)) and n in (0, 5)  # whatever was written, never phantom steps
    rb.flush()
    proc = ctx.Process(target=child)
    proc.start()
    assert queue.get(timeout=60) == (5, [0.0, 1.0, 2.0, 3.0, 4.0])
    proc.join(60)
    rb.close()
