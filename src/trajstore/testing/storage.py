"""``StorageTests``: the ``SpaceStorage`` conformance suite, for trajstore's storages and yours.

Every storage's test module subclasses :class:`StorageTests`, so one suite states the
contract and a new storage gets every check without anyone editing a list. NumPy is the oracle:
every index kind is checked against the same index applied to a NumPy copy of what was
written, and a *back door* reads what reached the disk without the storage's own read path.
This module imports pytest (``pip install trajstore[testing]``); :mod:`trajstore.testing`
does not.

Wiring, in the tests of a package that adds a storage (``RawStorage``, keeping rows of
``float32`` in ``rows.bin`` and registered with ``@STORAGE_TYPES.register("raw")``, since
the suite reopens folders and unpickles storages by their registered name)::

    import numpy as np
    from trajstore.testing.storage import StorageTests
    from my_package import RawStorage

    class TestRawStorage(StorageTests):
        storage_cls = RawStorage

        def create_kwargs(self):  # options for RawStorage.create, if it has any
            return {"block_rows": 4}

        def back_door_read(self, storage, positions):  # around RawStorage's own reads
            rows = np.fromfile(storage.cache_path / "rows.bin", "<f4").reshape(-1, 3, 2)
            return rows[positions]

pytest then runs every ``test_*`` method below against ``RawStorage``. Other hooks:
``make_space`` (default ``BoxSpace(-10, 10, (3, 2), float32)``), ``make_zero_element_space``
(default ``BoxSpace(-10, 10, (3, 0), float32)``: every storage round-trips zero-element leaves
or refuses them at create with ``UnsupportedSpaceError``), ``sample_batch`` (values to write) and
``assert_close`` (the bound of a lossy storage).

What the suite reads from the storage instead of being told:

- ``requires_cache_path``: a storage that writes files must refuse ``cache_path=None``;
  the others must work in memory (and refuse to pickle there).
- ``lossless`` (read on each instance, since it may depend on options such as PNG vs
  JPEG): a lossless storage's values are compared exactly, and overriding ``assert_close``
  for it is an error rather than a silent loosening. A lossy storage must override
  ``assert_close`` with its stated bound; without one its value checks fail.
- ``supports_overwrite``: about cost, never correctness. Every storage must take ``set``
  on a slot written before and read the new value back (the suite checks that for all of
  them, through ``get``, the back door and a reopen). True means an overwrite costs about
  what a first write did and leaves reads of that slot as cheap as before; False
  (``VideoStorage``) means it is correct but costly: the new frame is encoded into another
  segment, the old one stays on disk while its segment holds live frames, and reads of
  scattered overwritten slots decode more segments. The suite repeats scattered overwrites
  over several flushes only where they are cheap, and does them once otherwise.

The back door is required: implement ``back_door_read``, or, for a storage that has no
raw form to read around it, set ``back_door_read = NoBackDoor("the reason")``; the
back-door test then reports a skip with that reason.

A failed write: ``test_failed_extend_adds_no_slots`` replaces the storage instance's
``_write`` with one that raises ``OSError`` (after ``extend`` has validated the batch), and
expects ``len`` and the earlier slots unchanged and the next ``extend`` to work.
"""

from __future__ import annotations

import abc
import errno
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trajstore.errors import InvalidValueError, LockedError, ReadOnlyError, StorageExistsError
from trajstore.spaces import BoxSpace, Space, map_leaves
from trajstore.storages.base import SpaceStorage
from trajstore.testing.values import (NoBackDoor, assert_same_values, concat, flatten_value, leaves_of, stack,
                                      unflatten_value)

__all__ = ["StorageTests", "NoBackDoor", "CAPACITY", "OVERWRITE_ROUNDS", "leaves_of", "flatten_value",
           "unflatten_value", "stack", "concat", "assert_same_values"]

#: Slots of the storages the suite fills.
CAPACITY = 12
#: Rounds of scattered overwrites (each followed by a flush) for a storage with cheap overwrites.
OVERWRITE_ROUNDS = 4


class StorageTests(abc.ABC):
    """The contract of :class:`~trajstore.storages.base.SpaceStorage`; see the module docstring.

    Attributes:
        storage_cls: the storage under test (set by the subclass).
    """

    storage_cls: type[SpaceStorage]

    # -- hooks for subclasses ------------------------------------------------------------------
    def make_space(self) -> Space:
        """The space of one slot."""
        return BoxSpace(-10, 10, (3, 2), np.float32)

    def make_zero_element_space(self) -> Space:
        """A space with zero-element leaves (shape ``(3, 0)``), whose slots hold no data at all."""
        return BoxSpace(-10, 10, (3, 0), np.float32)

    def create_kwargs(self) -> dict[str, Any]:
        """Storage-specific options passed to ``storage_cls.create``."""
        return {}

    def sample_batch(self, space: Space, n: int, seed: int) -> Any:
        """``n`` values of ``space`` with a leading axis ``N``, the same for the same seed."""
        return space.sample(np.random.default_rng(seed), batch_size=n)

    def assert_close(self, actual: Any, expected: Any, space: Space) -> None:
        """A lossy storage's bound: raise ``AssertionError`` if ``actual`` is too far from ``expected``.

        Called only for storages whose ``lossless`` is False, which must override it.
        """
        raise NotImplementedError(f"{self.storage_cls.__name__} is lossy (lossless is False): override "
                                  f"{type(self).__name__}.assert_close with the bound it guarantees")

    @abc.abstractmethod
    def back_door_read(self, storage: SpaceStorage, positions: np.ndarray) -> Any:
        """A batch of the values at slots ``positions`` (sorted, unique, int64 ``(M,)``), read from
        the flushed files without the storage's own read path (h5py, PIL, av, ``np.fromfile``)."""

    # -- helpers ---------------------------------------------------------------------------
    def check_values(self, storage: SpaceStorage, actual: Any, expected: Any) -> None:
        """Exact for a lossless storage, ``assert_close`` for a lossy one.

        Raises:
            TypeError: the storage is lossless but ``assert_close`` is overridden.
        """
        if not storage.lossless:
            self.assert_close(actual, expected, storage.space)
            return
        if type(self).assert_close is not StorageTests.assert_close:
            raise TypeError(f"{type(storage).__name__} says it is lossless, so its values are checked exactly: "
                            f"remove {type(self).__name__}.assert_close, or make its `lossless` False")
        assert_same_values(storage.space, actual, expected)

    def has_back_door(self) -> bool:
        return not isinstance(self.back_door_read, NoBackDoor)

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
        self.check_values(storage, storage.get(index), expected)
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
        self.check_values(storage, got, unflatten_value(storage.space, oracle))
        storage.close()

    def test_repeated_set_index_last_wins(self, tmp_path: Path) -> None:
        storage, _ = self.filled(tmp_path)
        new = self.sample_batch(storage.space, 3, seed=3)
        storage.set(np.array([4, 4, 4]), new)
        self.check_values(storage, storage.get(4), self.take(storage.space, new, 2))
        storage.close()

    def test_overwrites_read_back(self, tmp_path: Path) -> None:
        """Scattered overwrites of flushed slots, seen by ``get``, the back door and a reopen."""
        storage, batch = self.filled(tmp_path)
        storage.flush()
        oracle = {p: np.array(v) for p, v in flatten_value(storage.space, batch).items()}
        rng = np.random.default_rng(7)
        for r in range(OVERWRITE_ROUNDS if storage.supports_overwrite else 1):
            positions = rng.permutation(CAPACITY)[:4]  # neither sorted nor in ring order
            new = self.sample_batch(storage.space, len(positions), seed=20 + r)
            storage.set(positions, new)
            for p, v in flatten_value(storage.space, new).items():
                oracle[p][positions] = v
            storage.flush()
            self.check_values(storage, storage.get(slice(None)), unflatten_value(storage.space, oracle))
        if self.has_back_door():
            raw = self.back_door_read(storage, np.arange(CAPACITY))
            self.check_values(storage, raw, unflatten_value(storage.space, oracle))
        storage.close()
        again = self.storage_cls.load_from(tmp_path / "s")
        self.check_values(again, again.get(slice(None)), unflatten_value(storage.space, oracle))
        again.close()

    def test_unbounded_extend_grows(self, tmp_path: Path) -> None:
        storage = self.create(tmp_path, capacity=None)
        assert len(storage) == 0
        a = self.sample_batch(storage.space, 5, seed=4)
        b = self.sample_batch(storage.space, 3, seed=5)
        assert storage.extend(a) == slice(0, 5)
        assert storage.extend(b) == slice(5, 8)
        assert len(storage) == 8
        self.check_values(storage, storage.get(slice(5, 8)), b)
        self.check_values(storage, storage.get(np.array([4, 0])), self.take(storage.space, a, np.array([4, 0])))
        storage.close()

    def test_failed_extend_adds_no_slots(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An extend that fails in the storage's write, after validation, adds no slots."""
        storage = self.create(tmp_path, capacity=None)
        first = self.sample_batch(storage.space, 5, seed=11)
        storage.extend(first)

        def failing_write(*args: Any, **kwargs: Any) -> None:  # whatever _write's signature
            raise OSError(errno.ENOSPC, "No space left on device (injected by StorageTests)")

        monkeypatch.setattr(storage, "_write", failing_write)
        with pytest.raises(OSError, match="injected by StorageTests"):
            storage.extend(self.sample_batch(storage.space, 3, seed=12))
        monkeypatch.undo()
        assert len(storage) == 5, "the failed extend added slots"
        self.check_values(storage, storage.get(slice(None)), first)
        second = self.sample_batch(storage.space, 4, seed=13)
        assert storage.extend(second) == slice(5, 9)
        both = concat(storage.space, first, second)
        self.check_values(storage, storage.get(slice(None)), both)
        storage.close()
        again = self.storage_cls.load_from(tmp_path / "s")
        assert len(again) == 9
        self.check_values(again, again.get(slice(None)), both)
        again.close()

    @pytest.mark.parametrize("capacity", [CAPACITY, None])
    def test_zero_element_leaves_round_trip(self, tmp_path: Path, capacity: int | None) -> None:
        """The slot count survives a reopen even when a slot's payload is empty (no bytes to count)."""
        space = self.make_zero_element_space()
        if not self.storage_cls.accepts(space):  # the other allowed answer: a clear refusal at create
            from trajstore.errors import UnsupportedSpaceError

            with pytest.raises(UnsupportedSpaceError):
                self.storage_cls.create(space, capacity=capacity, cache_path=tmp_path / "s", **self.create_kwargs())
            assert not (tmp_path / "s").exists()
            pytest.skip(f"{self.storage_cls.__name__} refuses zero-element leaves at create")
        storage = self.storage_cls.create(space, capacity=capacity, cache_path=tmp_path / "s", **self.create_kwargs())
        batch = space.sample(np.random.default_rng(30), batch_size=5)  # not sample_batch: made for make_space
        if capacity is None:
            storage.extend(batch)
        else:
            storage.set(np.arange(5), batch)
        storage.close()
        again = SpaceStorage.load_from(tmp_path / "s")
        assert len(again) == (5 if capacity is None else capacity)
        self.check_values(again, again.get(np.array([4, 0])), self.take(space, batch, np.array([4, 0])))
        again.close()

    @pytest.mark.parametrize("capacity", [CAPACITY, None])
    def test_reopen_reads_what_was_written(self, tmp_path: Path, capacity: int | None) -> None:
        storage, batch = self.filled(tmp_path, capacity)
        storage.close()
        again = SpaceStorage.load_from(tmp_path / "s")  # dispatch by the registered type name
        assert type(again) is self.storage_cls
        assert len(again) == CAPACITY and again.space == storage.space and again.capacity == capacity
        self.check_values(again, again.get(slice(None)), batch)
        again.close()

    def test_read_only_refuses_writes(self, tmp_path: Path) -> None:
        storage, batch = self.filled(tmp_path)
        storage.close()
        ro = self.storage_cls.load_from(tmp_path / "s", read_only=True)
        with pytest.raises(ReadOnlyError):
            ro.set(0, self.take(ro.space, batch, 1))
        self.check_values(ro, ro.get(0), self.take(ro.space, batch, 0))
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
        self.check_values(copy, copy.get(np.array([7, 1])), self.take(storage.space, batch, np.array([7, 1])))
        copy.close()
        storage.close()

    def test_back_door_sees_writes(self, tmp_path: Path) -> None:
        if not self.has_back_door():
            pytest.skip(self.back_door_read.reason)  # type: ignore[attr-defined]
        storage, batch = self.filled(tmp_path)
        storage.flush()
        positions = np.array([0, 6, 11])
        self.check_values(storage, self.back_door_read(storage, positions), self.take(storage.space, batch, positions))
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
        self.check_values(storage, storage.get(slice(None)), batch)
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
        if self.storage_cls.requires_cache_path:
            with pytest.raises(ValueError, match="cache_path"):
                self.storage_cls.create(self.make_space(), capacity=4, **self.create_kwargs())
            return
        storage = self.storage_cls.create(self.make_space(), capacity=None, **self.create_kwargs())
        batch = self.sample_batch(storage.space, 4, seed=6)
        storage.extend(batch)
        self.check_values(storage, storage.get(slice(None)), batch)
        with pytest.raises(TypeError, match="cache_path"):
            pickle.dumps(storage)
        storage.close()
