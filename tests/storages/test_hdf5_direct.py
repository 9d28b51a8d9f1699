"""HDF5Storage's fast paths give what HDF5 gives: numeric leaves read from the file's bytes on disk
(_direct.py), kept in NumPy arrays in memory (_memory.py)."""

from __future__ import annotations

import numpy as np
import pytest

from trajstore.spaces import BinarySpace, BoxSpace, DictSpace, TextSpace
from trajstore.storages import HDF5Storage
from trajstore.storages._selection import select

SPACE = DictSpace({"obs": BoxSpace(-1e9, 1e9, (4,), np.float32), "action": BoxSpace(-1e9, 1e9, (2,), np.float64),
                   "count": BoxSpace(0, 1 << 40, (), np.int64), "done": BinarySpace(),
                   "img": BoxSpace(0, 255, (3, 5, 7), np.uint8), "text": TextSpace(4)})


def batch(ids):
    ids = np.asarray(ids)
    return {"obs": (ids[:, None] * 4 + np.arange(4)).astype(np.float32),
            "action": np.stack([ids, -ids], 1).astype(np.float64), "count": ids.astype(np.int64) * 3,
            "done": ids % 3 == 0,
            "img": ((ids[:, None, None, None] + np.arange(105).reshape(3, 5, 7)) % 251).astype(np.uint8),
            "text": np.array([f"t{i % 100}" for i in ids], dtype="<U4")}


def check(storage, index, ids):
    got, want = storage.get(index), batch(ids)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k


def index_cases(n, rng):
    yield np.arange(n)
    yield rng.integers(0, n, 256)  # repeats, any order
    yield np.sort(rng.choice(n, min(n, 300), replace=False))
    yield np.array([n - 1, 0, n // 2])
    yield slice(n // 3, n // 3 + 50)


@pytest.mark.parametrize("where", ["disk", "memory"])
def test_unbounded_reads_match_what_was_written(tmp_path, where):
    path = tmp_path / "s" if where == "disk" else None
    storage = HDF5Storage.create(SPACE, capacity=None, cache_path=path, chunk_rows=100)
    assert (storage._direct is not None) == (where == "disk") and (storage._memory is not None) == (where == "memory")
    rng = np.random.default_rng(0)
    total = 0
    for n in (1, 99, 1, 250, 7, 1500):  # chunks filled across several writes, read after each
        storage.extend(batch(np.arange(total, total + n)))
        total += n
        for index in index_cases(total, rng):
            check(storage, index, np.arange(total)[index])
    storage.set(np.array([5, 301]), batch([7000, 7001]))  # an overwrite in place
    ids = np.arange(total)
    ids[[5, 301]] = [7000, 7001]
    check(storage, np.arange(total), ids)
    storage.close()


def test_a_reader_sees_chunks_the_writer_added_after_it_opened(tmp_path):
    writer = HDF5Storage.create(SPACE, capacity=None, cache_path=tmp_path / "s", chunk_rows=64)
    writer.extend(batch(np.arange(100)))
    writer.flush()
    reader = HDF5Storage.load_from(tmp_path / "s", read_only=True)
    assert reader._direct is not None
    check(reader, np.arange(100), np.arange(100))
    writer.extend(batch(np.arange(100, 1000)))
    writer.flush()
    reader.refresh()
    rng = np.random.default_rng(1)
    for index in index_cases(1000, rng):
        check(reader, index, np.arange(1000)[index])
    reader.close()
    writer.close()


@pytest.mark.parametrize("where", ["disk", "memory"])
def test_slots_never_written_read_as_zeros_as_through_hdf5(tmp_path, where):
    path = tmp_path / "s" if where == "disk" else None
    storage = HDF5Storage.create(SPACE, capacity=1000, cache_path=path, chunk_rows=100)
    storage.set(np.arange(450, 460), batch(np.arange(450, 460)))  # chunk 4 only
    got = storage.get(np.array([0, 455, 999, 451]))
    np.testing.assert_array_equal(got["obs"][[1, 3]], batch([455, 451])["obs"])
    assert not got["obs"][[0, 2]].any() and not got["done"][[0, 2]].any() and not got["img"][[0, 2]].any()
    if where == "disk":  # the same bytes as HDF5's own read
        via_hdf5 = storage._datasets[storage._names.index("obs")][[0, 455, 999]]
        np.testing.assert_array_equal(got["obs"][[0, 1, 2]], via_hdf5)
    storage.set(np.arange(0, 10), batch(np.arange(10)))  # a chunk allocated after the first read
    check(storage, np.array([3, 455]), np.array([3, 455]))
    storage.close()


@pytest.mark.parametrize("where", ["disk", "memory"])
def test_a_shrink_then_regrow_reads_the_new_rows(tmp_path, where):
    path = tmp_path / "s" if where == "disk" else None
    storage = HDF5Storage.create(SPACE, capacity=None, cache_path=path, chunk_rows=100)
    storage.extend(batch(np.arange(350)))
    check(storage, np.arange(350), np.arange(350))
    storage._resize(120)  # what a failed write's rollback does
    storage.extend(batch(np.arange(5000, 5300)))
    ids = np.concatenate([np.arange(120), np.arange(5000, 5300)])
    check(storage, np.arange(420), ids)
    storage.close()


def test_a_compressed_storage_reads_through_hdf5(tmp_path):
    storage = HDF5Storage.create(SPACE, capacity=None, cache_path=tmp_path / "s", compression="lzf")
    assert storage._direct is None
    storage.extend(batch(np.arange(300)))
    index = np.random.default_rng(2).integers(0, 300, 64)
    check(storage, index, index)
    storage.close()


def test_a_reopened_storage_reads_the_same(tmp_path):
    storage = HDF5Storage.create(SPACE, capacity=500, cache_path=tmp_path / "s")
    storage.set(np.arange(500), batch(np.arange(500)))
    storage.close()
    for read_only in (True, False):
        again = HDF5Storage.load_from(tmp_path / "s", read_only=read_only)
        check(again, np.arange(500)[::-3], np.arange(500)[::-3])
        sel = select(np.array([499, 0]), 500)
        np.testing.assert_array_equal(again.read(sel)["count"], [1497, 0])
        again.close()


def test_a_truncated_file_is_a_format_error_naming_the_dataset(tmp_path):
    from trajstore.errors import FormatError

    storage = HDF5Storage.create(SPACE, capacity=None, cache_path=tmp_path / "s", chunk_rows=100)
    storage.extend(batch(np.arange(1000)))
    storage.close()
    reader = HDF5Storage.load_from(tmp_path / "s", read_only=True)
    check(reader, np.arange(0, 1000, 7), np.arange(0, 1000, 7))
    reader._direct._map, reader._direct._rows = np.zeros(64, np.uint8), {}  # as if the file had been cut short
    reader._direct._file_map = lambda end: reader._direct._map
    with pytest.raises(FormatError, match="data.h5: dataset"):
        reader.get(np.array([990]))
    reader.close()
