"""The ``SpaceStorage`` conformance suite, shared by every storage's test module.

A storage's test module subclasses :class:`StorageTests`, sets ``storage_cls``
and overrides ``make_space`` / ``create_kwargs`` / ``back_door_read`` / ``assert_close``
as needed. NumPy is the oracle: every index kind is checked against the same index
applied to a NumPy copy of what was written. ``back_door_read`` reads what reached the
disk without the storage's own read path (h5py, PIL, av, np.fromfile).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trajstore.errors import InvalidValueError, LockedError, ReadOnlyError, StorageExistsError
from trajstore.spaces import BoxSpace, Space, flatten_value, leaves_of, map_leaves, unflatten_value
from trajstore.storages.base import SpaceStorage

CAPACITY = 12


def stack(space: Space, values: list[Any]) -> dict[str, np.ndarray]:
    """Oracle form: ``{leaf path: array of shape (N, ...)}``."""
    return {p: np.stack([np.asarray(flatten_value(space, v)[p]) for v in values]) for p, _ in leaves_of(space)}


class StorageTests:
    storage_cls: type[SpaceStorage]
    #: The storage keeps data in memory when ``cache_path`` is None.
    supports_memory = True

    # -- hooks for subclasses ------------------------------------------------------------------
    def make_space(self) -> Space:
        return BoxSpace(-10, 10, (3, 2), np.float32)

    def create_kwargs(self) -> dict[str, Any]:
        return {}

    def sample_batch(self, space: Space, n: int, seed: int) -> Any:
        return space.sample(np.random.default_rng(seed), batch_size=n)

    def assert_close(self, actual: Any, expected: Any, space: Space) -> None:
        """Exact equality by default; lossy storages override with their stated bound."""
        for path, _ in leaves_of(space):
            np.testing.assert_array_equal(flatten_value(space, actual)[path], flatten_value(space, expected)[path],
                                          err_msg=f"leaf {path!r}")

    def back_door_read(self, storage: SpaceStorage, positions: np.ndarray) -> Any:
        """Read slots around the storage's own read path; ``None`` skips the back-door test."""
        return None

    # -- helpers ---------------------------------------------------------------------------
    def create(self, tmp_path: Path, capacity: int | None = CAPACITY, name: str = "s", **extra: Any) -> SpaceStorage:
        return self.storage_cls.create(self.make_space(), capacity=capacity, cache_path=tmp_path / name,
                                       **{**self.create_kwargs(), **extra})

    def filled(self, tmp_path: Path, capacity: int | None = CAPACITY) -> tuple[SpaceStorage, Any]:
        storage = self.create(tmp_path, capacity)
        batch = self.sample_batch(storage.space, CAPACITY, seed=1)
        if capacity is None:
            storage.extend(batch)
        else:
            storage.set(slice(None), batch)
        return storage, batch

    def take(self, space: Space, batch: Any, index: Any) -> Any:
        return map_leaves(space, batch, lambda v: np.asarray(v)[index])

    # -- the contract --------------------------------------------------------------------------
    INDEXES = [
        0, 5, -1, -CAPACITY,
        slice(None), slice(2, 9), slice(1, None, 3), slice(-4, None), slice(5, 5), slice(100, 200),
        np.array([3, 1, 7]), np.array([4, 4, 0, 4]), np.array([-1, 0]), np.array([], dtype=np.int64),
        [2, 3, 4], np.arange(CAPACITY) % 2 == 0,
    ]

    @pytest.mark.parametrize("index", INDEXES, ids=repr)
    def test_get_matches_numpy(self, tmp_path: Path, index: Any) -> None:
        storage, batch = self.filled(tmp_path)
        expected = self.take(storage.space, batch, index)
        self.assert_close(storage.get(index), expected, storage.space)
        storage.close()

    @pytest.mark.parametrize("index", [3, -2, slice(1, 10, 2), np.array([9, 2, 5]), np.arange(CAPACITY) % 3 == 1],
                             ids=repr)
    def test_set_matches_numpy(self, tmp_path: Path, index: Any) -> None:
        storage, batch = self.filled(tmp_path)
        oracle = {p: np.array(v) for p, v in stack(storage.space, [self.take(storage.space, batch, i)
                                                                   for i in range(CAPACITY)]).items()}
        n = len(np.arange(CAPACITY)[index]) if not isinstance(index, int) else None
        new = self.sample_batch(storage.space, n or 1, seed=2)
        value = self.take(storage.space, new, 0) if n is None else new
        storage.set(index, value)
        for p in oracle:
            oracle[p][index] = flatten_value(storage.space, value)[p]
        got = storage.get(slice(None))
        self.assert_close(got, unflatten_value(storage.space, oracle), storage.space)
        storage.close()

    def test_repeated_set_index_last_wins(self, tmp_path: Path) -> None:
        storage, _ = self.filled(tmp_path)
        new = self.sample_batch(storage.space, 3, seed=3)
        storage.set(np.array([4, 4, 4]), new)
        self.assert_close(storage.get(4), self.take(storage.space, new, 2), storage.space)
        storage.close()

    def test_unbounded_extend_grows(self, tmp_path: Path) -> None:
        storage = self.create(tmp_path, capacity=None)
        assert len(storage) == 0
        a = self.sample_batch(storage.space, 5, seed=4)
        b = self.sample_batch(storage.space, 3, seed=5)
        assert storage.extend(a) == slice(0, 5)
        assert storage.extend(b) == slice(5, 8)
        assert len(storage) == 8
        self.assert_close(storage.get(slice(5, 8)), b, storage.space)
        self.assert_close(storage.get(np.array([4, 0])), self.take(storage.space, a, np.array([4, 0])), storage.space)
        storage.close()

    @pytest.mark.parametrize("capacity", [CAPACITY, None])
    def test_reopen_reads_what_was_written(self, tmp_path: Path, capacity: int | None) -> None:
        storage, batch = self.filled(tmp_path, capacity)
        storage.close()
        again = SpaceStorage.load_from(tmp_path / "s")  # dispatch by the registered type name
        assert type(again) is self.storage_cls
        assert len(again) == CAPACITY and again.space == storage.space and again.capacity == capacity
        self.assert_close(again.get(slice(None)), batch, storage.space)
        again.close()

    def test_read_only_refuses_writes(self, tmp_path: Path) -> None:
        storage, batch = self.filled(tmp_path)
        storage.close()
        ro = self.storage_cls.load_from(tmp_path / "s", read_only=True)
        with pytest.raises(ReadOnlyError):
            ro.set(0, self.take(ro.space, batch, 1))
        self.assert_close(ro.get(0), self.take(ro.space, batch, 0), ro.space)
        ro.close()

    def test_one_writer_per_folder(self, tmp_path: Path) -> None:
        storage, batch = self.filled(tmp_path)
        storage.flush()
        with pytest.raises(LockedError):
            self.storage_cls.load_from(tmp_path / "s", read_only=False)
        reader = self.storage_cls.load_from(tmp_path / "s")  # readers need no lock
        reader.close()
        storage.close()
        again = self.storage_cls.load_from(tmp_path / "s", read_only=False)  # the lock went with close()
        again.close()

    def test_pickle_reopens(self, tmp_path: Path) -> None:
        storage, batch = self.filled(tmp_path)
        storage.flush()
        copy = pickle.loads(pickle.dumps(storage))
        assert copy.read_only
        self.assert_close(copy.get(np.array([7, 1])), self.take(storage.space, batch, np.array([7, 1])),
                          storage.space)
        copy.close()
        storage.close()

    def test_back_door_sees_writes(self, tmp_path: Path) -> None:
        storage, batch = self.filled(tmp_path)
        storage.flush()
        positions = np.array([0, 6, 11])
        raw = self.back_door_read(storage, positions)
        if raw is None:
            pytest.skip("no back door for this storage")
        self.assert_close(raw, self.take(storage.space, batch, positions), storage.space)
        storage.close()

    def test_bad_value_writes_nothing(self, tmp_path: Path) -> None:
        storage, batch = self.filled(tmp_path)
        good = self.take(storage.space, batch, slice(0, 2))
        for path, leaf in leaves_of(storage.space):
            bad_leaf = np.zeros((2, *getattr(leaf, "shape", ()), 2))  # one extra axis
            flat = {**flatten_value(storage.space, good), path: bad_leaf}
            with pytest.raises(InvalidValueError, match=path or "root"):
                storage.set(slice(0, 2), unflatten_value(storage.space, flat))
        with pytest.raises(InvalidValueError):
            storage.set(slice(0, 3), good)  # batch of 2 for 3 slots
        self.assert_close(storage.get(slice(None)), batch, storage.space)
        storage.close()

    @pytest.mark.parametrize("capacity", [0, -3, 2.5, True])
    def test_bad_capacity(self, tmp_path: Path, capacity: Any) -> None:
        with pytest.raises(ValueError, match="capacity"):
            self.create(tmp_path, capacity=capacity)
        assert not (tmp_path / "s").exists()

    def test_existing_path_refused(self, tmp_path: Path) -> None:
        (tmp_path / "s").mkdir()
        (tmp_path / "s" / "keep.txt").write_text("user data")
        with pytest.raises(StorageExistsError):
            self.create(tmp_path)
        assert (tmp_path / "s" / "keep.txt").read_text() == "user data"

    def test_bad_index(self, tmp_path: Path) -> None:
        storage, _ = self.filled(tmp_path)
        with pytest.raises(IndexError):
            storage.get(CAPACITY)
        with pytest.raises(IndexError):
            storage.get(np.array([0, -CAPACITY - 1]))
        with pytest.raises(TypeError):
            storage.get(1.5)
        with pytest.raises(ValueError):
            storage.get(slice(None, None, -1))
        storage.close()

    def test_closed_refuses_use(self, tmp_path: Path) -> None:
        storage, _ = self.filled(tmp_path)
        storage.close()
        storage.close()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            storage.get(0)

    def test_in_memory(self) -> None:
        if not self.supports_memory:
            with pytest.raises(ValueError, match="cache_path"):
                self.storage_cls.create(self.make_space(), capacity=4, **self.create_kwargs())
            return
        storage = self.storage_cls.create(self.make_space(), capacity=None, **self.create_kwargs())
        batch = self.sample_batch(storage.space, 4, seed=6)
        storage.extend(batch)
        self.assert_close(storage.get(slice(None)), batch, storage.space)
        with pytest.raises(TypeError, match="cache_path"):
            pickle.dumps(storage)
        storage.close()
