"""HDF5Storage: the conformance suite (leaf, nested dict, gzip, SWMR format), then what the
suite cannot see: dataset names, options, SWMR readers, forks, crashes and the read strategy.

The back door reads ``data.h5`` with h5py in a separate Python process, so it sees what
reached the file, not the writer's HDF5 caches.
"""

from __future__ import annotations

import hashlib
import io
import json
import multiprocessing as mp
import os
import pickle
import subprocess
import sys

import h5py
import numpy as np
import pytest

import trajstore.storages.hdf5._rows as hdf5_module
from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import HDF5Storage, SpaceStorage
from trajstore.storages.hdf5 import DATA_FILE
from trajstore.testing.storage import StorageTests

_READER = r"""
import io, json, sys
import h5py, numpy as np
path, names, positions, swmr = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4] == "1"
with h5py.File(path, "r", locking=False, swmr=swmr) as f:
    arrays = {str(i): f[name][positions] for i, name in enumerate(names)}
buf = io.BytesIO()
np.savez(buf, **arrays)
sys.stdout.buffer.write(buf.getvalue())
"""


def raw_read(storage, names, positions):
    """``{dataset name: rows at positions}`` read by h5py in another process."""
    swmr = "1" if storage.get_config()["swmr"] else "0"
    out = subprocess.run([sys.executable, "-c", _READER, str(storage.cache_path / DATA_FILE), json.dumps(names),
                          json.dumps([int(p) for p in positions]), swmr], capture_output=True, check=True)
    arrays = np.load(io.BytesIO(out.stdout))
    return {name: arrays[str(i)] for i, name in enumerate(names)}


def utf8(raw, max_length):
    return np.strings.decode(raw, "utf-8").astype(f"<U{max_length}")


def robot_space():
    return DictSpace({
        "obs": DictSpace({"image": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image"}),
                          "joint pos.ü": BoxSpace(-1, 1, (7,), np.float32)}),
        "reward": BoxSpace(-1, 1, (), np.float32),
        "done": BinarySpace(),
        "instruction": TextSpace(12),
    })


ROBOT_DATASETS = {"obs/image": ("obs", "image"), "obs/joint%20pos%2E%C3%BC": ("obs", "joint pos.ü"),
                  "reward": ("reward",), "done": ("done",), "instruction": ("instruction",)}
WORDS = ["pick", "🍎", "日本語", "put ä", "stack", " ", "ß"]


def robot_batch(n, seed):
    batch = robot_space().sample(np.random.default_rng(seed), batch_size=n)
    rng = np.random.default_rng(seed + 100)
    texts = ["".join(rng.choice(WORDS, size=3))[:12] for _ in range(n)]
    texts[0] = "🍎" * 12  # the widest value: 48 bytes of UTF-8
    batch["instruction"] = np.asarray(texts, dtype="<U12")
    return batch


class TestHDF5Leaf(StorageTests):
    storage_cls = HDF5Storage

    def back_door_read(self, storage, positions):
        return raw_read(storage, ["data"], positions)["data"]



class TestHDF5Dict(StorageTests):
    storage_cls = HDF5Storage

    def make_space(self):
        return robot_space()

    def sample_batch(self, space, n, seed):
        return robot_batch(n, seed)

    def back_door_read(self, storage, positions):
        raw = raw_read(storage, list(ROBOT_DATASETS), positions)
        raw["instruction"] = utf8(raw["instruction"], 12)
        out: dict = {"obs": {}}
        for name, keys in ROBOT_DATASETS.items():
            (out["obs"] if keys[0] == "obs" else out)[keys[-1]] = raw[name]
        return out



class TestHDF5Gzip(TestHDF5Dict):
    def create_kwargs(self):
        return {"compression": "gzip", "chunk_rows": 5}  # several chunks within the suite's 12 slots


class TestHDF5SWMRFormat(TestHDF5Dict):
    def create_kwargs(self):
        return {"multiprocessing": True}


# -- layout and options ---------------------------------------------------------------------------
def test_weird_keys_get_safe_distinct_dataset_names(tmp_path):
    # ("/" inside a key is no better: DictSpace's flatten_value, used by every storage, splits on it.)
    keys = ["a.b", "a%2Eb", "with space", "日本", "*", "..", "back\\slash"]
    space = DictSpace({k: BoxSpace(-9, 9, (2,), np.int16) for k in keys} | {"n": DictSpace({"x y": BinarySpace()})})
    storage = HDF5Storage.create(space, capacity=None, cache_path=tmp_path / "s")
    batch = space.sample(np.random.default_rng(0), batch_size=6)
    storage.extend(batch)
    storage.close()
    with h5py.File(tmp_path / "s" / DATA_FILE, "r") as f:
        names = set()
        f.visititems(lambda name, obj: names.add(name) if isinstance(obj, h5py.Dataset) else None)
    assert names == {"a%2Eb", "a%252Eb", "with%20space", "%E6%97%A5%E6%9C%AC", "@rest", "%2E%2E", "back%5Cslash",
                     "n/x%20y"}
    again = SpaceStorage.load_from(tmp_path / "s")
    got = again.get(np.array([5, 0, 5]))
    for k in keys:
        np.testing.assert_array_equal(got[k], batch[k][[5, 0, 5]], err_msg=k)
    np.testing.assert_array_equal(got["n"]["x y"], batch["n"]["x y"][[5, 0, 5]])
    again.close()


def test_values_have_the_space_dtype_and_shape(tmp_path):
    storage = HDF5Storage.create(robot_space(), capacity=4, cache_path=tmp_path / "s")
    storage.set(slice(None), robot_batch(4, seed=0))
    for i in range(4):
        one = storage.get(i)
        assert robot_space().contains(one)
        assert one["reward"].shape == () and one["reward"].dtype == np.float32
        assert isinstance(one["instruction"], str) and one["done"].dtype == bool
    batch = storage.get(slice(None))
    assert batch["instruction"].dtype == np.dtype("<U12") and batch["obs"]["image"].dtype == np.uint8
    storage.close()


def test_options_are_checked_persisted_and_shape_the_chunks(tmp_path):
    space = DictSpace({"small": BoxSpace(-1, 1, (2,), np.float32), "big": BoxSpace(0, 255, (96, 96, 3), np.uint8)})
    for bad, error in [({"compression": "zstd"}, ValueError), ({"chunk_rows": 0}, ValueError),
                       ({"chunk_rows": True}, ValueError), ({"level": 3}, TypeError)]:
        with pytest.raises(error):
            HDF5Storage.create(space, capacity=None, cache_path=tmp_path / "bad", **bad)
        assert not (tmp_path / "bad").exists()
    auto = HDF5Storage.create(space, capacity=None, cache_path=tmp_path / "auto")
    assert auto.get_config() == {"compression": None, "chunk_rows": None, "swmr": True}  # every file on disk
    assert [ds.chunks[0] for ds in auto._datasets] == [8192, 2]  # 64 KiB, at most 8192 rows, at least one
    auto.close()
    fixed = HDF5Storage.create(space, capacity=20, cache_path=tmp_path / "fixed", compression="lzf", chunk_rows=64)
    assert [ds.chunks[0] for ds in fixed._datasets] == [20, 20]  # never longer than the capacity
    fixed.close()
    desc = json.loads((tmp_path / "fixed" / "storage.json").read_text())
    assert desc["type"] == "hdf5" and desc["config"] == {"compression": "lzf", "chunk_rows": 64, "swmr": True}
    with h5py.File(tmp_path / "fixed" / DATA_FILE, "r") as f:
        assert f["small"].compression == "lzf" and f["small"].shuffle and f["small"].maxshape == (20, 2)


@pytest.mark.parametrize("space", [DictSpace({}), DictSpace({"a": DictSpace({})})], ids=repr)
def test_a_space_without_leaves_is_refused(tmp_path, space):
    with pytest.raises(UnsupportedSpaceError, match="at least one leaf"):
        HDF5Storage.create(space, cache_path=tmp_path / "s")
    assert not (tmp_path / "s").exists()


def test_zero_size_leaf(tmp_path):
    space = DictSpace({"empty": BoxSpace(0, 1, (3, 0), np.float32), "x": BoxSpace(0, 10, (), np.float64)})
    storage = HDF5Storage.create(space, capacity=None, cache_path=tmp_path / "s")
    storage.extend({"empty": np.zeros((5, 3, 0), np.float32), "x": np.arange(5.0)})
    storage.close()
    again = HDF5Storage.load_from(tmp_path / "s")
    got = again.get(np.array([4, 1]))
    assert got["empty"].shape == (2, 3, 0) and list(got["x"]) == [4.0, 1.0] and len(again) == 5
    again.close()


def test_in_memory_fixed_capacity():
    storage = HDF5Storage.create(robot_space(), capacity=6)
    batch = robot_batch(6, seed=3)
    storage.set(np.arange(6)[::-1], batch)
    np.testing.assert_array_equal(storage.get(0)["obs"]["image"], batch["obs"]["image"][5])
    assert storage.get(5)["instruction"] == batch["instruction"][0]
    storage.close()


def write_old_format(storage_path, leaf, value):
    """A storage folder as trajstore wrote it before every file was SWMR: HDF5's oldest format."""
    storage = HDF5Storage.create(leaf, capacity=None, cache_path=storage_path, chunk_rows=2)
    storage.close()
    data = storage_path / DATA_FILE
    data.unlink()
    with h5py.File(data, "w", libver=("earliest", "v110")) as f:
        f.create_dataset("data", data=value, maxshape=(None, *value.shape[1:]), chunks=(2, *value.shape[1:]))
    desc = json.loads((storage_path / "storage.json").read_text())
    desc["config"]["swmr"] = False
    (storage_path / "storage.json").write_text(json.dumps(desc))


@pytest.mark.parametrize("multiprocessing", [False, True])
def test_reopen_for_writing(tmp_path, multiprocessing):
    leaf = BoxSpace(-9, 9, (2,), np.float32)
    s = HDF5Storage.create(leaf, capacity=None, cache_path=tmp_path / "s", multiprocessing=multiprocessing)
    s.extend(np.ones((3, 2)))
    s.close()
    w = HDF5Storage.load_from(tmp_path / "s", read_only=False, multiprocessing=multiprocessing)
    assert w.extend(np.full((2, 2), 2.0)) == slice(3, 5)
    w.close()
    r = HDF5Storage.load_from(tmp_path / "s")
    np.testing.assert_array_equal(r.get(slice(None))[:, 0], [1, 1, 1, 2, 2])
    r.close()


@pytest.mark.parametrize("multiprocessing", [False, True])
def test_old_format_reads_as_is_and_is_converted_on_the_first_write(tmp_path, multiprocessing):
    leaf = BoxSpace(-9, 9, (2,), np.float32)
    old = np.arange(10, dtype=np.float32).reshape(5, 2)
    write_old_format(tmp_path / "s", leaf, old)
    before = (tmp_path / "s" / DATA_FILE).read_bytes()
    r = HDF5Storage.load_from(tmp_path / "s", multiprocessing=multiprocessing)
    np.testing.assert_array_equal(r.get(slice(None)), old)
    r.close()
    assert (tmp_path / "s" / DATA_FILE).read_bytes() == before  # reading never converts
    w = HDF5Storage.load_from(tmp_path / "s", read_only=False, multiprocessing=multiprocessing)
    assert w.get_config()["swmr"] and w.extend(np.full((2, 2), 7.0)) == slice(5, 7)
    w.close()
    assert json.loads((tmp_path / "s" / "storage.json").read_text())["config"]["swmr"] is True
    assert (tmp_path / "s" / DATA_FILE).read_bytes()[8] == 3  # superblock version 3: the SWMR format
    with h5py.File(tmp_path / "s" / DATA_FILE, "r") as f:
        assert f["data"].chunks == (2, 2)  # the old chunking is kept
    r = HDF5Storage.load_from(tmp_path / "s")
    np.testing.assert_array_equal(r.get(slice(None)), np.concatenate([old, np.full((2, 2), 7.0, np.float32)]))
    r.close()


# -- readers of a live writer ---------------------------------------------------------------------
def rows(start, n):
    """The value every test writes at slot i: a function of i, so any process can check it."""
    ids = np.arange(start, start + n)
    return {"state": np.stack([ids, -ids, ids * 0.5], 1).astype(np.float32), "done": ids % 3 == 0}


LIVE_SPACE = DictSpace({"state": BoxSpace(-1e6, 1e6, (3,), np.float32), "done": BinarySpace()})


def _live_reader(path, to_reader, to_writer):
    storage = SpaceStorage.load_from(path, read_only=True, multiprocessing=True)
    try:
        to_writer.put(("first", len(storage), storage.get(slice(None))))
        to_reader.get(timeout=60)  # the writer has appended or overwritten, and flushed
        storage.refresh()
        to_writer.put(("second", len(storage), storage.get(slice(None))))
    except BaseException as exc:  # report, do not hang the parent
        to_writer.put(("error", repr(exc), None))
    finally:
        storage.close()


@pytest.mark.parametrize("capacity,compression", [(None, None), (48, "gzip")])
def test_reader_in_a_spawned_process_sees_flushed_rows(tmp_path, capacity, compression):
    writer = HDF5Storage.create(LIVE_SPACE, capacity=capacity, cache_path=tmp_path / "s", multiprocessing=True,
                                compression=compression)
    if capacity is None:
        writer.extend(rows(0, 40))
    else:
        writer.set(slice(None), rows(0, 48))
    writer.flush()
    ctx = mp.get_context("spawn")
    to_reader, to_writer = ctx.Queue(), ctx.Queue()
    reader = ctx.Process(target=_live_reader, args=(tmp_path / "s", to_reader, to_writer))
    reader.start()
    try:
        tag, n, first = to_writer.get(timeout=60)
        assert tag == "first", n
        expected = rows(0, n)
        np.testing.assert_array_equal(first["state"], expected["state"])
        if capacity is None:
            writer.extend(rows(40, 25))  # appends
            total, expected = 65, rows(0, 65)
        else:
            writer.set(slice(10, 30), rows(100, 20))  # ring overwrites inside written chunks
            total, expected = 48, rows(0, 48)
            for k in expected:
                expected[k][10:30] = rows(100, 20)[k]
        writer.flush()
        to_reader.put("go")
        tag, n, second = to_writer.get(timeout=60)
        assert tag == "second", n
        assert n == total
        for k in expected:
            np.testing.assert_array_equal(second[k], expected[k], err_msg=k)
    finally:
        reader.join(60)
        writer.close()
    assert reader.exitcode == 0


@pytest.mark.parametrize("multiprocessing", [False, True])
def test_reader_in_the_same_process_refreshes(tmp_path, multiprocessing):
    writer = HDF5Storage.create(LIVE_SPACE, capacity=None, cache_path=tmp_path / "s", multiprocessing=multiprocessing)
    writer.extend(rows(0, 5))
    writer.flush()
    reader = HDF5Storage.load_from(tmp_path / "s", read_only=True, multiprocessing=multiprocessing)
    assert len(reader) == 5
    writer.extend(rows(5, 7))
    writer.flush()
    reader.refresh()
    assert len(reader) == 12
    np.testing.assert_array_equal(reader.get(np.array([11, 0]))["state"], rows(0, 12)["state"][[11, 0]])
    reader.close()
    writer.extend(rows(12, 1))  # closing the reader left the writer's handle alone
    writer.close()


# -- forks and crashes ----------------------------------------------------------------------------
def file_digest(storage):
    return hashlib.sha256((storage.cache_path / DATA_FILE).read_bytes()).hexdigest()


def _fork_child(storages, index, out, raw_close):
    try:
        if raw_close:  # what garbage collection or HDF5's exit handler would do to the parent's handles
            for s in storages:
                s._file.close()
            out.put(("closed", None))
            return
        values = [s.get(index) for s in storages]
        for s in storages:
            s.close()
        out.put(("ok", values))
    except BaseException as exc:
        out.put(("error", repr(exc)))


@pytest.mark.parametrize("multiprocessing", [False, True])
@pytest.mark.parametrize("raw_close", [False, True], ids=["child reads", "child closes inherited handle"])
def test_fork_child_reads_and_the_parent_file_stays_intact(tmp_path, multiprocessing, raw_close):
    storage = HDF5Storage.create(LIVE_SPACE, capacity=None, cache_path=tmp_path / "s", multiprocessing=multiprocessing)
    storage.extend(rows(0, 40))
    storage.flush()
    copy = pickle.loads(pickle.dumps(storage))  # a second handle on the same file in this process
    digest = file_digest(storage)
    index = np.array([39, 3, 3, 20])
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_fork_child, args=([storage, copy], index, out, raw_close))
    child.start()
    tag, values = out.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0 and tag in ("ok", "closed"), values
    if not raw_close:
        for got in values:
            np.testing.assert_array_equal(got["state"], rows(0, 40)["state"][index])
            np.testing.assert_array_equal(got["done"], rows(0, 40)["done"][index])
    assert file_digest(storage) == digest, "the child changed the parent's file"
    assert not storage.read_only
    storage.extend(rows(40, 10))  # the parent still writes through its handle
    copy.close()
    storage.close()
    again = HDF5Storage.load_from(tmp_path / "s")
    np.testing.assert_array_equal(again.get(slice(None))["state"], rows(0, 50)["state"])
    again.close()


def _crashing_writer(path, multiprocessing):
    storage = HDF5Storage.create(LIVE_SPACE, capacity=None, cache_path=path, multiprocessing=multiprocessing)
    storage.extend(rows(0, 10))
    storage.flush()
    storage.extend(rows(10, 5))  # never flushed
    os._exit(0)  # a crash: nothing is closed or collected


@pytest.mark.parametrize("multiprocessing", [False, True])
def test_flushed_rows_survive_a_writer_crash(tmp_path, multiprocessing):
    # (tests/storages/test_hdf5_crash.py kills writers with SIGKILL at random moments)
    ctx = mp.get_context("fork")
    writer = ctx.Process(target=_crashing_writer, args=(tmp_path / "s", multiprocessing))
    writer.start()
    writer.join(60)
    assert writer.exitcode == 0
    reader = SpaceStorage.load_from(tmp_path / "s", read_only=True)
    assert len(reader) >= 10
    np.testing.assert_array_equal(reader.get(slice(0, 10))["state"], rows(0, 10)["state"])
    reader.close()
    again = SpaceStorage.load_from(tmp_path / "s", read_only=False, multiprocessing=multiprocessing)
    again.set(slice(0, 10), rows(0, 10))
    again.extend(rows(len(again), 3))
    again.close()


# -- read strategy ---------------------------------------------------------------------------------
STRATEGY_SPACE = DictSpace({"narrow": BoxSpace(-1e9, 1e9, (2,), np.float32),  # 8 B rows
                            "mid": BoxSpace(-1e9, 1e9, (64,), np.float32),  # 256 B: index list at most
                            "wide": BoxSpace(-1e9, 1e9, (300,), np.float32),  # 1200 B: runs when sparse
                            "text": TextSpace(5)})
N_ROWS = 10_000


@pytest.fixture(scope="module")
def big_storage(tmp_path_factory):
    storage = HDF5Storage.create(STRATEGY_SPACE, capacity=None, cache_path=tmp_path_factory.mktemp("big") / "s")
    ids = np.arange(N_ROWS)
    oracle = {"narrow": np.stack([ids, -ids], 1).astype(np.float32),
              "mid": (ids[:, None] * 64 + np.arange(64)).astype(np.float32),
              "wide": (ids[:, None] * 300 + np.arange(300)).astype(np.float32),
              "text": np.array([f"é{i % 997}" for i in ids], dtype="<U5")}
    for start in range(0, N_ROWS, 2500):
        storage.extend({k: v[start:start + 2500] for k, v in oracle.items()})
    storage.flush()
    yield storage, oracle
    storage.close()


def index_cases():
    rng = np.random.default_rng(42)
    yield "sparse unsorted repeats", rng.integers(0, N_ROWS, 256)
    yield "dense window", rng.integers(5000, 5300, 256)
    yield "two clusters", np.concatenate([rng.integers(0, 50, 40), rng.integers(9900, N_ROWS, 40)])
    yield "contiguous reversed", np.arange(1000, 1200)[::-1]
    yield "negative", -rng.integers(1, N_ROWS + 1, 64)
    yield "one repeated", np.full(7, 1234)
    yield "mask", rng.random(N_ROWS) < 0.01
    yield "runs", np.concatenate([np.arange(s, s + rng.integers(1, 9)) for s in range(0, N_ROWS, 700)])


FORCE = {"auto": {},
         "cover": {"COVER_WASTE_PER_ROW": 1 << 40, "COVER_MAX_BYTES": 1 << 40},
         "index list": {"COVER_WASTE_PER_ROW": 0, "INDEX_LIST_MAX_ROW_BYTES": 1 << 40},
         "runs": {"COVER_WASTE_PER_ROW": 0, "INDEX_LIST_MAX_ROW_BYTES": -1}}


@pytest.mark.parametrize("strategy", list(FORCE))
def test_every_read_strategy_matches_numpy(big_storage, monkeypatch, strategy):
    storage, oracle = big_storage
    monkeypatch.setattr(storage, "_direct", None)  # HDF5's reads (compressed leaves); direct ones: test_hdf5_direct.py
    for name, value in FORCE[strategy].items():
        monkeypatch.setattr(hdf5_module, name, value)
    for case, index in index_cases():
        got = storage.get(index)
        for k, expected in oracle.items():
            np.testing.assert_array_equal(got[k], expected[index], err_msg=f"{case}: {k}")
            assert got[k].dtype == expected.dtype


class CountingDataset:
    """Forwards to an h5py dataset and records the key of every read and write."""

    def __init__(self, ds):
        self.ds, self.calls = ds, []

    def __getitem__(self, key):
        self.calls.append(("get", key))
        return self.ds[key]

    def __setitem__(self, key, value):
        self.calls.append(("set", key))
        self.ds[key] = value

    def __getattr__(self, name):
        return getattr(self.ds, name)


def counted(storage, monkeypatch):
    # The HDF5 read strategy (what compressed leaves take): uncompressed ones on disk are otherwise read
    # from the file's bytes (_direct.py, tested in test_hdf5_direct.py).
    monkeypatch.setattr(storage, "_direct", None)
    wrapped = [CountingDataset(ds) for ds in storage._datasets]
    monkeypatch.setattr(storage, "_datasets", wrapped)
    real_write_rows = hdf5_module.write_rows

    def write_rows(ds, first, rows):  # the low-level write of a block: recorded as the slice it writes
        ds.calls.append(("set", slice(first, first + len(rows))))
        real_write_rows(ds.ds, first, rows)

    monkeypatch.setattr(hdf5_module, "write_rows", write_rows)
    return dict(zip(["narrow", "mid", "wide", "text"], wrapped))


def n_runs(positions):
    return int(np.count_nonzero(np.diff(positions) != 1)) + 1


def test_sparse_reads_never_take_the_slow_index_list_path(big_storage, monkeypatch):
    storage, oracle = big_storage
    ds = counted(storage, monkeypatch)
    index = np.random.default_rng(7).choice(N_ROWS, 256, replace=False)
    got = storage.get(index)
    np.testing.assert_array_equal(got["wide"], oracle["wide"][index])
    positions = np.sort(index)
    wide_keys = [key for op, key in ds["wide"].calls]
    assert all(isinstance(key, slice) for key in wide_keys), "a wide leaf was read with an index list"
    assert len(wide_keys) == n_runs(positions)  # one slice read per contiguous run
    assert [type(key) for _, key in ds["narrow"].calls] == [slice]  # one covering read


def test_dense_reads_are_one_slice_per_leaf(big_storage, monkeypatch):
    storage, oracle = big_storage
    ds = counted(storage, monkeypatch)
    index = np.random.default_rng(8).integers(3000, 3100, 64)
    got = storage.get(index)
    np.testing.assert_array_equal(got["text"], oracle["text"][index])
    for name, d in ds.items():
        assert [type(key) for _, key in d.calls] == [slice], name


def test_writes_are_one_slice_per_run(tmp_path, monkeypatch):
    storage = HDF5Storage.create(STRATEGY_SPACE, capacity=500, cache_path=tmp_path / "s")
    ds = counted(storage, monkeypatch)
    index = np.array([7, 3, 4, 5, 100, 101, 499, 3])  # runs: 3-5, 7, 100-101, 499
    value = {"narrow": np.ones((8, 2)), "mid": np.ones((8, 64)), "wide": np.ones((8, 300)),
             "text": np.array(["a"] * 8)}
    storage.set(index, value)
    for name, d in ds.items():
        keys = [key for op, key in d.calls]
        assert all(op == "set" for op, _ in d.calls) and all(isinstance(k, slice) for k in keys), name
        assert [(k.start, k.stop) for k in keys] == [(3, 6), (7, 8), (100, 102), (499, 500)], name
    storage.close()
