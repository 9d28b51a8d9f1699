"""ReplayBuffer on disk: reopen in a fresh process, read-only, bad input, the writer lock, pickling."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest

from trajstore.errors import (FormatError, InvalidValueError, LockedError, ReadOnlyError, StaleReadError,
                              StorageExistsError)
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import DictStorage, MemmapStorage, dict_storage_kwargs_from_space


def step_space():
    return DictSpace({
        "observation": DictSpace({
            "pixels": BoxSpace(0, 255, (16, 16, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
            "state": BoxSpace(-1, 1, (4,), np.float32),
        }),
        "action": BoxSpace(-1, 1, (2,), np.float32),
        "reward": BoxSpace(-np.inf, np.inf, (), np.float32),
        "done": BinarySpace(),
        "task": TextSpace(20),
    })


def make(tmp_path, capacity=None, name="rb", **routing):
    space = step_space()
    routing.setdefault("kind_kwargs", {"image": {"format": "PNG"}})  # lossless, so equality is exact
    return ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / name, capacity=capacity,
                               **dict_storage_kwargs_from_space(space, **routing))


def batch(n, seed):
    return step_space().sample(np.random.default_rng(seed), batch_size=n)


def assert_equal(a, b):
    np.testing.assert_array_equal(a["observation"]["pixels"], b["observation"]["pixels"])
    np.testing.assert_array_equal(a["observation"]["state"], b["observation"]["state"])
    np.testing.assert_array_equal(a["action"], b["action"])
    np.testing.assert_array_equal(a["reward"], b["reward"])
    np.testing.assert_array_equal(a["done"], b["done"])
    assert list(a["task"]) == list(b["task"])


READER = """
import sys, json, numpy as np
from trajstore.replay_buffer import ReplayBuffer
rb = ReplayBuffer.load_from(sys.argv[1])
data = rb[:]
print(json.dumps({"n": len(rb), "episodes": [[e.start, e.stop, e.done] for e in rb.episodes],
                  "pixels_sum": int(data["observation"]["pixels"].astype(np.int64).sum()),
                  "state": data["observation"]["state"].tolist(), "task": [str(t) for t in data["task"]],
                  "contains": bool(rb.space.contains(rb[-1]))}))
"""


@pytest.mark.parametrize("capacity", [None, 7])
def test_reopen_in_a_fresh_process(tmp_path, capacity):
    rb = make(tmp_path, capacity)
    b1, b2 = batch(5, 1), batch(4, 2)
    rb.extend(b1)
    rb.end_episode()
    rb.extend(b2)
    rb.close()  # no extra dump call: close flushes
    out = subprocess.run([sys.executable, "-c", READER, str(tmp_path / "rb")], capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout)
    all_state = np.concatenate([b1["observation"]["state"], b2["observation"]["state"]])
    all_pixels = np.concatenate([b1["observation"]["pixels"], b2["observation"]["pixels"]])
    all_task = list(b1["task"]) + list(b2["task"])
    keep = slice(-capacity, None) if capacity else slice(None)
    assert got["n"] == len(all_state[keep])
    np.testing.assert_array_equal(np.array(got["state"], np.float32), all_state[keep])
    assert got["pixels_sum"] == int(all_pixels[keep].astype(np.int64).sum())
    assert got["task"] == all_task[keep]
    assert got["contains"]
    if capacity:
        assert got["episodes"] == [[0, 3, True], [3, 7, False]]  # first episode lost 2 of its 5 steps
    else:
        assert got["episodes"] == [[0, 5, True], [5, 9, False]]


def test_values_have_space_dtypes_and_shapes(tmp_path):
    with make(tmp_path) as rb:
        rb.append(step_space().sample(np.random.default_rng(3)))
        one = rb[0]
        assert rb.space.contains(one)
        assert one["reward"].dtype == np.float32 and one["reward"].shape == ()
        assert one["done"].dtype == bool and one["observation"]["pixels"].shape == (16, 16, 3)
        assert rb[[0, 0]]["observation"]["state"].shape == (2, 4)


def test_values_outside_the_bounds_are_refused_before_anything_is_written(tmp_path):
    good = step_space().sample(np.random.default_rng(3))
    with make(tmp_path) as rb:
        rb.append(good)
        bad = step_space().sample(np.random.default_rng(4), batch_size=3)
        bad["observation"]["state"][2, 1] = 7.0
        with pytest.raises(InvalidValueError, match=r"'observation/state': value 7.0 at index \(2, 1\)"):
            rb.extend(bad)
        with pytest.raises(InvalidValueError, match="'reward': value nan"):
            rb.append({**good, "reward": np.float32("nan")})
        with pytest.raises(InvalidValueError, match="'action'"):
            rb.set_at(0, {**good, "action": np.float32([2, 0])})
        with pytest.raises(InvalidValueError, match="'final_observation/state'"):
            rb.end_episode(final_observation={**good["observation"], "state": np.float32([0, 0, 0, -3])})
        rb.end_episode()
        assert len(rb) == 1 and rb.space.contains(rb[0]) and rb.check_bounds
    assert "check_bounds" not in json.loads((tmp_path / "rb" / "trajstore.json").read_text())


def test_check_bounds_false_stores_values_as_they_are_and_is_kept_in_the_folder(tmp_path):
    space = step_space()
    with pytest.raises(TypeError, match="check_bounds"):
        ReplayBuffer.create(MemmapStorage, space, cache_path=tmp_path / "x", check_bounds="no")
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", check_bounds=False,
                             **dict_storage_kwargs_from_space(space)) as rb:
        step = space.sample(np.random.default_rng(3))
        step["observation"]["state"][:] = [5, -5, np.nan, 0.5]
        rb.append(step)
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:
        assert not rb.check_bounds
        rb.append({**step, "reward": np.float32(np.nan)})
        got = rb[0]["observation"]["state"]
        assert got[0] == 5 and got[1] == -5 and np.isnan(got[2]) and not rb.space.contains(rb[0])


def test_read_only_reopen_refuses_writes(tmp_path):
    with make(tmp_path) as rb:
        rb.extend(batch(3, 4))
    ro = ReplayBuffer.load_from(tmp_path / "rb")
    for write in (lambda: ro.append(step_space().sample()), lambda: ro.extend(batch(1, 5)),
                  lambda: ro.set_at(0, step_space().sample()), ro.end_episode, ro.flush):
        with pytest.raises(ReadOnlyError, match="read-only"):
            write()
    assert len(ro) == 3
    ro.close()


def test_writer_lock(tmp_path):
    rb = make(tmp_path)
    with pytest.raises(LockedError):
        ReplayBuffer.load_from(tmp_path / "rb", read_only=False)
    reader = ReplayBuffer.load_from(tmp_path / "rb")  # readers do not need the lock
    reader.close()
    rb.close()
    ReplayBuffer.load_from(tmp_path / "rb", read_only=False).close()


@pytest.mark.parametrize("bad_leaf,value,match", [
    ("pixels", np.zeros((2, 16, 16, 4), np.uint8), r"observation/pixels.*shape"),
    ("pixels", np.zeros((2, 16, 16, 3), np.float32), r"observation/pixels.*dtype uint8"),
    ("state", np.zeros((2, 5), np.float32), r"observation/state.*shape"),
    ("done", np.array([0, 3]), r"done.*bool"),
    ("task", ["ok", "x" * 21], r"task.*characters"),
])
def test_bad_batch_writes_nothing(tmp_path, bad_leaf, value, match):
    rb = make(tmp_path, capacity=4)
    good = batch(4, 6)
    rb.extend(good)
    bad = batch(2, 7)
    if bad_leaf in ("pixels", "state"):
        bad["observation"][bad_leaf] = value
    else:
        bad[bad_leaf] = value
    with pytest.raises(InvalidValueError, match=match):
        rb.extend(bad)
    assert len(rb) == 4 and rb.total_steps == 4
    assert_equal(rb[:], good)
    rb.close()


def test_missing_and_extra_keys_write_nothing(tmp_path):
    rb = make(tmp_path)
    step = step_space().sample(np.random.default_rng(8))
    del step["action"]
    with pytest.raises(InvalidValueError, match=r"missing \['action'\]"):
        rb.append(step)
    step = step_space().sample(np.random.default_rng(8))
    step["observation"]["extra"] = 1
    with pytest.raises(InvalidValueError, match=r"unexpected \['extra'\]"):
        rb.append(step)
    assert len(rb) == 0
    rb.close()


@pytest.mark.parametrize("capacity", [0, -1, 1.5])
def test_bad_capacity(tmp_path, capacity):
    with pytest.raises(ValueError, match="capacity"):
        make(tmp_path, capacity)
    assert not (tmp_path / "rb").exists()


def test_existing_path(tmp_path):
    (tmp_path / "rb").mkdir()
    (tmp_path / "rb" / "notes.txt").write_text("mine")
    with pytest.raises(StorageExistsError):
        make(tmp_path)
    assert (tmp_path / "rb" / "notes.txt").read_text() == "mine"


def test_dotdot_key_refused(tmp_path):
    space = DictSpace({"..": BoxSpace(0, 1, (2,))})
    with pytest.raises(ValueError, match=r"'\.\.'"):
        ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(
            space, key_storage_cls={"..": MemmapStorage}))
    assert not (tmp_path / "rb").exists()


def test_indexing_kinds_and_set_at(tmp_path):
    rb = make(tmp_path, capacity=6)
    b = batch(9, 9)
    rb.extend(b)  # holds steps 3..8
    held = {k: v for k, v in b.items()}
    np.testing.assert_array_equal(rb[-1]["action"], b["action"][8])
    np.testing.assert_array_equal(rb[1:5:2]["action"], b["action"][[4, 6]])
    np.testing.assert_array_equal(rb[np.array([5, 0, 5])]["action"], b["action"][[8, 3, 8]])
    mask = np.array([True, False, False, True, False, True])
    np.testing.assert_array_equal(rb[mask]["action"], b["action"][[3, 6, 8]])
    new = step_space().sample(np.random.default_rng(10))
    rb.set_at(-6, new)
    np.testing.assert_array_equal(rb[0]["action"], new["action"])
    with pytest.raises(IndexError):
        rb[6]
    del held
    rb.close()


def test_pickle_reopens_read_only(tmp_path):
    rb = make(tmp_path)
    rb.extend(batch(3, 11))
    rb.flush()
    copy = pickle.loads(pickle.dumps(rb))
    assert copy.read_only and len(copy) == 3
    assert_equal(copy[:], rb[:])
    copy.close()
    rb.close()
    mem = ReplayBuffer.create(DictStorage, step_space(),
                              **dict_storage_kwargs_from_space(step_space(), kind_storage_cls={}))
    with pytest.raises(TypeError, match="cache_path"):
        pickle.dumps(mem)
    mem.close()


def test_not_a_buffer_folder(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(FormatError, match="does not exist"):
        ReplayBuffer.load_from(tmp_path / "x")
    (tmp_path / "x" / "trajstore.json").write_text("{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        ReplayBuffer.load_from(tmp_path / "x")


def test_unknown_storage_type_lists_known(tmp_path):
    make(tmp_path).close()
    meta = json.loads((tmp_path / "rb" / "trajstore.json").read_text())
    meta["storage"]["type"] = "os.system"
    (tmp_path / "rb" / "trajstore.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="unknown storage type 'os.system'.*hdf5"):
        ReplayBuffer.load_from(tmp_path / "rb")


def test_sample(tmp_path):
    with make(tmp_path) as rb:
        with pytest.raises(ValueError, match="empty"):
            rb.sample(4)
        b = batch(10, 12)
        rb.extend(b)
        got = rb.sample(32, rng=np.random.default_rng(0))
        assert got["action"].shape == (32, 2)
        rows = [int(np.flatnonzero((b["action"] == a).all(axis=1))[0]) for a in got["action"]]
        assert len(set(rows)) > 1 and all(0 <= r < 10 for r in rows)


@pytest.mark.parametrize("layout", ["png", "jpeg", "video"])
def test_ring_crash_before_flush_keeps_committed_steps_intact(tmp_path, layout):
    """Unflushed ring writes overwrite old slots; the metadata on disk must never name those slots."""
    routing = {"jpeg": {"kind_kwargs": {}}, "png": {}, "video": {}}[layout]
    if layout == "video":
        pytest.importorskip("av")
        from trajstore.storages import VideoStorage
        routing = {"kind_storage_cls": {"image": VideoStorage}, "kind_kwargs": {}}
    rb = make(tmp_path, capacity=10, **routing)
    first = batch(10, 20)
    rb.extend(first)
    rb.end_episode()  # committed: steps 0..9
    rb.extend(batch(4, 21))  # overwrites the slots of steps 0..3, not flushed: then the writer "crashes"
    rb._writer.drain()  # the staged steps reach the storage (write-behind done), the metadata is not committed
    rb.storage.flush()  # the worst case: the new data reached the disk, the metadata did not
    reader = ReplayBuffer.load_from(tmp_path / "rb")
    assert len(reader) == 6 and reader.total_steps == 10  # steps 4..9, still whole
    got = reader[:]
    np.testing.assert_array_equal(got["action"], first["action"][4:])
    np.testing.assert_array_equal(got["observation"]["state"], first["observation"]["state"][4:])
    assert [(e.start, e.stop, e.overwritten) for e in reader.episodes] == [(0, 6, True)]
    reader.close()
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as after:  # after a clean close, everything is there
        assert len(after) == 10 and after.total_steps == 14


def test_ring_write_failing_midway_keeps_the_step_and_writes_it_again(tmp_path, monkeypatch):
    """Disk full while writing the second leaf: the oldest slot now mixes old and new leaves. The new
    step is held, every call raises until its write succeeds, and then the slot holds it whole."""
    rb = make(tmp_path, capacity=4)
    old = batch(4, 30)
    rb.extend(old)
    rb.end_episode()
    from trajstore.storages import HDF5Storage

    def disk_full(self, positions, value):
        raise OSError(28, "No space left on device")

    assert list(rb.storage.storages)[-1] == "*"  # the HDF5 part is written after the frames
    monkeypatch.setattr(HDF5Storage, "_write", disk_full)
    new = batch(1, 31)
    rb.extend(new)  # staged; written behind
    with pytest.raises(OSError, match="No space") as failure:
        rb.flush()  # the background write's error surfaces at the next call
    assert "of storage '*': HDF5Storage at " in str(failure.value)  # names the storage that failed
    with pytest.raises(OSError, match="No space"):
        rb[:]  # the slot of step 0 is torn: not served while the write of step 4 fails
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:  # the commit before the overwrite dropped step 0
        assert len(reader) == 3 and reader.total_steps == 4
        np.testing.assert_array_equal(reader[:]["action"], old["action"][1:])
    monkeypatch.undo()
    assert len(rb) == 4 and rb.total_steps == 5
    np.testing.assert_array_equal(rb[:]["action"], np.concatenate([old["action"][1:], new["action"]]))
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as again:
        assert len(again) == 4 and again.total_steps == 5
        for leaf in ("state", "pixels"):
            np.testing.assert_array_equal(again[:]["observation"][leaf], np.concatenate(
                [old["observation"][leaf][1:], new["observation"][leaf]]))


@pytest.mark.parametrize("layout", ["png", "video"])
def test_stale_ring_reader_never_mixes_steps(tmp_path, layout):
    """A reader that has not refreshed while the writer overwrote its slots gets whole steps."""
    space = DictSpace({"cam": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image"}),
                       "i": BoxSpace(0, 1e9, (), np.int64)})
    if layout == "video":
        pytest.importorskip("av")
        from trajstore.storages import VideoStorage
        routing = {"kind_storage_cls": {"image": VideoStorage}, "kind_kwargs": {"image": {"segment_frames": 4}}}
    else:
        routing = {"kind_kwargs": {"image": {"format": "PNG", "chunk_bytes": 1000}}}
    writer = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", capacity=10, multiprocessing=True,
                                 **dict_storage_kwargs_from_space(space, **routing))

    def put(ids):
        writer.extend({"cam": np.stack([np.full((8, 8, 3), 10 * i, np.uint8) for i in ids]), "i": np.array(ids)})
        writer.flush()

    put(list(range(10)))
    reader = ReplayBuffer.load_from(tmp_path / "rb", multiprocessing=True)
    assert int(reader[0]["i"]) == 0
    put(list(range(10, 25)))  # the reader's view (steps 0..9) is gone from the slots
    with pytest.raises(StaleReadError, match="index again"):
        reader[0]
    for index in (0, 5, np.array([9, 0, 3])):
        got = reader[index]
        ids = np.atleast_1d(got["i"])
        assert np.all(ids >= 15)  # re-read on the newer view
        means = np.atleast_2d(np.asarray(got["cam"]).reshape(len(ids), -1).mean(axis=1))
        np.testing.assert_allclose(means.ravel(), 10 * ids, atol=3)
    sample = reader.sample(8, rng=np.random.default_rng(0))
    np.testing.assert_allclose(sample["cam"].reshape(8, -1).mean(axis=1), 10 * sample["i"], atol=3)
    reader.close()
    writer.close()


def test_broken_storage_is_a_format_error_and_releases_the_lock(tmp_path):
    with make(tmp_path) as rb:
        rb.extend(batch(3, 40))
    (tmp_path / "rb" / "storage" / "@rest" / "data.h5").write_bytes(b"not hdf5")
    for _ in range(2):  # the second attempt would raise LockedError if the first leaked the lock
        with pytest.raises(FormatError, match=r"@rest/data\.h5: damaged or unreadable"):
            ReplayBuffer.load_from(tmp_path / "rb", read_only=False)


def test_unclosed_writer_with_unflushed_steps_warns(tmp_path):
    rb = make(tmp_path)
    rb.extend(batch(3, 50))
    rb.end_episode()
    rb.extend(batch(2, 51))
    with pytest.warns(UserWarning, match="2 steps appended since the last flush"):
        rb.__del__()
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as again:
        assert len(again) == 5


def test_full_ring_crash_loses_at_most_drop_ahead_old_steps(tmp_path):
    from trajstore.replay_buffer.commit import drop_ahead

    rb = make(tmp_path, capacity=40)
    rb.extend(batch(40, 52))
    rb.flush()
    rb.append(step_space().sample(np.random.default_rng(53)))
    rb._writer.drain()  # the write-behind thread wrote it; then the writer dies without flushing
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert len(reader) == 40 - drop_ahead(40) == 35
    rb.close()


@pytest.mark.parametrize("routed_to", [MemmapStorage, None])
def test_zero_element_leaves_reopen(tmp_path, routed_to):
    space = DictSpace({"empty": BoxSpace(0, 1, (3, 0), np.float32), "none": BoxSpace(0, 1, (0,), np.int64),
                       "x": BoxSpace(0, 1, (), np.float32)})
    kwargs = dict_storage_kwargs_from_space(space, key_storage_cls={"empty": routed_to, "none": routed_to})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", **kwargs) as rb:
        rb.extend(space.sample(np.random.default_rng(0), batch_size=3))
        rb.end_episode()
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert len(rb) == 3 and rb[2]["empty"].shape == (3, 0) and rb[np.array([0, 1])]["none"].shape == (2, 0)


def test_constructors_called_on_an_instance_raise(tmp_path):
    from trajstore.storages import HDF5Storage
    with make(tmp_path) as rb:
        rb.append(step_space().sample(np.random.default_rng(0)))
    rb = ReplayBuffer.load_from(tmp_path / "rb")
    with pytest.raises(TypeError, match=r"ReplayBuffer.load_from is a constructor: call it on the class"):
        rb.load_from(tmp_path / "rb")
    with pytest.raises(TypeError, match=r"ReplayBuffer.create is a constructor"):
        rb.create(MemmapStorage, BoxSpace(0, 1, ()), cache_path=tmp_path / "other")
    assert not (tmp_path / "other").exists() and len(rb) == 1
    for storage in (rb.storage, *rb.storage.storages.values()):
        name = type(storage).__name__
        with pytest.raises(TypeError, match=f"{name}.load_from is a constructor"):
            storage.load_from(tmp_path / "rb" / "storage")
        with pytest.raises(TypeError, match=f"{name}.create is a constructor"):
            storage.create(storage.space, cache_path=tmp_path / "other")
    rb.close()
    again = HDF5Storage.create(BoxSpace(0, 1, ()), cache_path=tmp_path / "h")  # on the class: as before
    again.close()


def test_a_cut_short_video_segment_surfaces_as_a_format_error_not_a_race(tmp_path):
    pytest.importorskip("av")
    from trajstore.storages import VideoStorage
    routing = {"kind_storage_cls": {"image": VideoStorage}, "kind_kwargs": {"image": {"segment_frames": 8}}}
    for name, n in (("rb", 8), ("short", 3)):
        with make(tmp_path, capacity=16, name=name, **routing) as rb:
            rb.extend(batch(n, 0))
    segments = sorted((tmp_path / "rb" / "storage" / "observation.pixels" / "segments").glob("*.mp4"))
    short = sorted((tmp_path / "short" / "storage" / "observation.pixels" / "segments").glob("*.mp4"))
    assert len(segments) == 1 and len(short) == 1
    segments[0].write_bytes(short[0].read_bytes())  # a valid mp4 with 3 of the 8 frames the index names
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:  # read-only ring, no writer running
        reads = []
        real_read = rb.storage.read
        rb.storage.read = lambda sel: reads.append(1) or real_read(sel)
        with pytest.raises(FormatError, match=r"00000000\.mp4 has no frame [3-7]: the segment is cut short"):
            rb.sample(64, rng=np.random.default_rng(0))
        assert len(reads) == 1  # not retried as if the writer had raced the read
        with pytest.raises(FormatError, match="has no frame 7"):
            rb[7]


@pytest.mark.parametrize("missing", ["storage/observation.pixels/chunks/000000.bin", "storage/@rest/data.h5",
                                     "final_observations/pixels/chunks/000000.bin",
                                     "final_observations/@rest/data.h5", "final_observations",
                                     "video:storage/observation.pixels/segments/00000000.mp4"])
def test_open_names_a_missing_payload_file(tmp_path, missing):
    import shutil
    routing = {"kind_kwargs": {}}
    if missing.startswith("video:"):
        pytest.importorskip("av")
        from trajstore.storages import VideoStorage
        routing, missing = {"kind_storage_cls": {"image": VideoStorage}, "kind_kwargs": {}}, missing[6:]
    with make(tmp_path, **routing) as rb:
        rb.extend(batch(4, 0))
        rb.end_episode(final_observation=step_space().sample(np.random.default_rng(1))["observation"])
    target = tmp_path / "rb" / missing
    assert target.exists(), sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "rb").rglob("*"))
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    if target.suffix in (".bin", ".mp4"):  # a payload file: a reader opens and is told; a writer refuses
        from trajstore.damage import DamagedBufferWarning

        with pytest.warns(DamagedBufferWarning, match=target.name):
            with ReplayBuffer.load_from(tmp_path / "rb") as rb:
                assert rb.damaged.episodes == (0,) and rb.damaged.files == [str(target)]
                with pytest.raises(FormatError, match=target.name):
                    rb[0] if "final" not in missing else rb.final_observation(0)
        with pytest.raises(FormatError, match=target.name):
            ReplayBuffer.load_from(tmp_path / "rb", read_only=False)
        return
    with pytest.raises(FormatError, match=target.name):
        ReplayBuffer.load_from(tmp_path / "rb")
