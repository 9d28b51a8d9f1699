"""StorageTests itself: a storage written outside trajstore passes it with a few lines of
wiring, and the suite's rules hold (exact checks for lossless storages, a stated bound for
lossy ones, a back door or a stated reason, capability flags read from the storage).
"""

import subprocess
import sys

import numpy as np
import pytest

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import BoxSpace
from trajstore.storages import STORAGE_TYPES, SpaceStorage
from trajstore.storages._selection import span
from trajstore.testing.storage import OVERWRITE_ROUNDS, NoBackDoor, StorageTests

SLOTS_FILE = "slots.npy"


@STORAGE_TYPES.register("test-npy-slots")
class NpySlotsStorage(SpaceStorage):
    """One BoxSpace leaf: a dict ``{slot: value}`` in memory, saved to ``slots.npy`` by flush."""

    def __init__(self, space, **kwargs):
        super().__init__(space, **kwargs)
        self.slots = {}

    @classmethod
    def check_space(cls, space):
        if not isinstance(space, BoxSpace):
            raise UnsupportedSpaceError(f"NpySlotsStorage takes one BoxSpace, got {space!r}")

    @classmethod
    def _create(cls, space, *, capacity, path, config, multiprocessing, lock):
        storage = cls(space, capacity=capacity, cache_path=path, multiprocessing=multiprocessing, lock=lock)
        storage.slots = {i: np.zeros(space.shape, space.dtype) for i in range(capacity or 0)}
        storage.flush()
        return storage

    @classmethod
    def _open(cls, path, space, *, capacity, config, read_only, multiprocessing, lock):
        storage = cls(space, capacity=capacity, cache_path=path, read_only=read_only, multiprocessing=multiprocessing,
                      lock=lock)
        storage.slots = dict(enumerate(np.load(path / SLOTS_FILE)))
        return storage

    def get_config(self):
        return {}

    def __len__(self):
        return len(self.slots)

    def _read(self, sel):
        rows = [self.slots[p] for p in sel.slots.tolist()]
        return [np.array(rows, self.space.dtype).reshape(len(rows), *self.space.shape)]  # -1 fails on (3, 0)

    def _write(self, sel, leaves):
        self.slots.update(zip(sel.slots.tolist(), np.array(leaves[0])))

    def _resize(self, length):
        for slot in range(length, len(self.slots)):  # shrink after a failed write; growing: _write adds
            del self.slots[slot]

    def flush(self):
        if self.cache_path is not None and not self.read_only:
            np.save(self.cache_path / SLOTS_FILE, self._read(span(0, len(self)))[0])


class TestNpySlotsStorage(StorageTests):
    """The whole wiring a storage needs to run the suite."""

    storage_cls = NpySlotsStorage

    def back_door_read(self, storage, positions):
        return np.load(storage.cache_path / SLOTS_FILE)[positions]


# -- the suite's rules -----------------------------------------------------------------------------
class LossyNpySlots(NpySlotsStorage):
    lossless = False


class RulesOnly(StorageTests):
    """Not collected (no ``Test`` prefix): the suite's helpers, called directly below."""

    storage_cls = NpySlotsStorage
    back_door_read = NoBackDoor("in memory only: nothing to read around")


def values(n=3):
    return BoxSpace(-10, 10, (3, 2), np.float32).sample(np.random.default_rng(0), batch_size=n)


def test_lossless_values_are_compared_exactly():
    storage = NpySlotsStorage.create(BoxSpace(-10, 10, (3, 2), np.float32), capacity=None)
    v = values()
    RulesOnly().check_values(storage, v, v.copy())
    with pytest.raises(AssertionError):
        RulesOnly().check_values(storage, v, np.nextafter(v, np.inf))  # one ulp off
    with pytest.raises(AssertionError):
        RulesOnly().check_values(storage, v, v.astype(np.float64))  # same numbers, another dtype


def test_lossless_storage_cannot_loosen_the_check():
    class Loose(RulesOnly):
        def assert_close(self, actual, expected, space):
            pass

    storage = NpySlotsStorage.create(BoxSpace(-10, 10, (3, 2), np.float32), capacity=None)
    with pytest.raises(TypeError, match="lossless, so its values are checked exactly"):
        Loose().check_values(storage, values(), values())


def test_lossy_storage_must_state_its_bound():
    class Bounded(RulesOnly):
        def assert_close(self, actual, expected, space):
            assert np.abs(actual - expected).max() <= 0.5

    storage = LossyNpySlots.create(BoxSpace(-10, 10, (3, 2), np.float32), capacity=None)
    v = values()
    with pytest.raises(NotImplementedError, match="is lossy"):
        RulesOnly().check_values(storage, v, v)
    Bounded().check_values(storage, v + 0.25, v)
    with pytest.raises(AssertionError):
        Bounded().check_values(storage, v + 1, v)


def test_back_door_is_required_or_refused_with_a_reason(tmp_path):
    class Forgotten(StorageTests):
        storage_cls = NpySlotsStorage

    with pytest.raises(TypeError, match="back_door_read"):
        Forgotten()
    with pytest.raises(ValueError, match="reason"):
        NoBackDoor(" ")
    with pytest.raises(pytest.skip.Exception, match="in memory only: nothing to read around"):
        RulesOnly().test_back_door_sees_writes(tmp_path)


class PhantomSlots(NpySlotsStorage):
    """Adds the new slots in _resize, before the write, and never takes them back."""

    def _resize(self, length):
        self.slots.update({i: np.zeros(self.space.shape, self.space.dtype) for i in range(len(self), length)})


def test_failed_extend_check_catches_added_slots(tmp_path, monkeypatch):
    class Phantom(RulesOnly):
        storage_cls = PhantomSlots

    with pytest.raises(AssertionError, match="the failed extend added slots"):
        Phantom().test_failed_extend_adds_no_slots(tmp_path, monkeypatch)


@pytest.mark.parametrize("cheap, rounds", [(True, OVERWRITE_ROUNDS), (False, 1)])
def test_overwrite_rounds_follow_supports_overwrite(tmp_path, monkeypatch, cheap, rounds):
    writes = []
    real = NpySlotsStorage._write
    monkeypatch.setattr(NpySlotsStorage, "supports_overwrite", cheap)
    monkeypatch.setattr(NpySlotsStorage, "_write", lambda self, *a: writes.append(1) or real(self, *a))
    TestNpySlotsStorage().test_overwrites_read_back(tmp_path)
    assert len(writes) == 1 + rounds  # the fill, then one scattered overwrite per round


def test_importing_trajstore_testing_needs_no_pytest():
    code = "import sys, trajstore.testing; assert 'pytest' not in sys.modules, 'pytest imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_storage_suite_and_the_ring_model_need_no_hypothesis():
    code = ("import sys, trajstore.testing.storage, trajstore.testing.ring_model, trajstore.testing.buffer; "
            "assert 'hypothesis' not in sys.modules, 'hypothesis imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
