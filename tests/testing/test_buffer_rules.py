"""BufferTests itself, the ring model and the strategies: the suite fails a layout that reads the
wrong steps, one that says it is lossless and is not, and one outside its stated bound; the model
gives the documented answers on hand-worked sequences; drawn spaces and values round-trip through
a buffer.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import tree
from trajstore.storages import STORAGE_TYPES, DictStorage, MemmapStorage, dict_storage_kwargs_from_space
from trajstore.testing.buffer import FRAMES_APART_DB, BufferTests
from trajstore.testing.ring_model import Op, RingModel, apply_operation, check_against_model, random_operations
from trajstore.testing.strategies import operations, spaces, step_values
from trajstore.testing.values import leaves_of


@STORAGE_TYPES.register("test-rolled-memmap")
class RolledMemmap(MemmapStorage):
    """Reads every batch of rows rolled by one: the steps come back in the wrong slots."""

    def _read(self, sel):
        return [np.roll(rows, 1, axis=0) for rows in super()._read(sel)]


@STORAGE_TYPES.register("test-noisy-memmap")
class NoisyMemmap(MemmapStorage):
    """Adds 1 to every value it reads (saturating), while ``lossless`` stays True."""

    def _read(self, sel):
        return [np.minimum(rows.astype(np.int64) + 1, 255).astype(rows.dtype) for rows in super()._read(sel)]


@STORAGE_TYPES.register("test-lossy-memmap")
class CoarseMemmap(NoisyMemmap):
    """As NoisyMemmap, but says it is lossy; +1 on every pixel is 48 dB."""

    lossless = False


class OneStorageFor(BufferTests):
    """Not collected (no ``Test`` prefix): every leaf in a memmap, ``observation/pixels`` (or ``step``)
    in the storage under test."""

    capacity = None
    leaf = "observation/pixels"
    storage = MemmapStorage

    def layout(self, space):
        chosen = {name: MemmapStorage for name, _ in leaves_of(space)}
        chosen[self.leaf] = self.storage
        return DictStorage, dict_storage_kwargs_from_space(space, key_storage_cls=chosen)


def test_steps_read_from_the_wrong_slots_fail(tmp_path):
    class Rolled(OneStorageFor):
        leaf, storage = "step", RolledMemmap

    suite = Rolled()
    with pytest.raises(AssertionError, match="leaf 'step'"):
        suite.test_every_index_kind_matches_numpy(tmp_path)
    with pytest.raises(AssertionError):
        suite.test_sample_with_indices_reads_those_steps(tmp_path)
    suite.close_buffers()


def test_a_lossless_storage_is_compared_exactly(tmp_path):
    class Noisy(OneStorageFor):
        storage = NoisyMemmap

    suite = Noisy()
    with pytest.raises(AssertionError, match="leaf 'observation/pixels'"):
        suite.test_append_and_extend_read_back(tmp_path)
    suite.close_buffers()


def test_a_lossy_storage_is_held_to_its_bound(tmp_path):
    class Coarse(OneStorageFor):
        storage, min_psnr_db = CoarseMemmap, 45.0

    class TooStrict(Coarse):
        min_psnr_db = 50.0

    Coarse().test_append_and_extend_read_back(tmp_path)  # 48 dB: within 45
    suite = TooStrict()
    with pytest.raises(AssertionError, match=r"dB from the value written, the bound is 50.0 dB"):
        suite.test_append_and_extend_read_back(tmp_path)
    suite.close_buffers()


def test_a_bound_that_cannot_tell_frames_apart_is_refused():
    class Loose(OneStorageFor):
        min_psnr_db = FRAMES_APART_DB - 2

    with pytest.raises(AssertionError, match="does not tell the suite's frames apart"):
        Loose().test_frames_are_apart_at_the_bound()


# -- the ring model ------------------------------------------------------------------------------
def test_model_of_a_wrapping_ring_and_a_discard():
    model = RingModel(3)
    assert model.add(2) == [0, 1]
    assert model.end_episode({"k": 1})
    assert not model.end_episode()  # nothing open
    assert model.add(3) == [2, 3, 4]
    assert model.held == [2, 3, 4] and model.total == 5 and model.oldest == 2
    (open_ep,) = model.episodes()  # the first episode left the ring with its last step
    assert (open_ep.id, open_ep.start, open_ep.stop, open_ep.overwritten, open_ep.done) == (1, 0, 3, False, False)
    assert model.discard() == 3 and model.held == [] and model.total == 2
    assert model.add(1) == [5] and model.held == [5] and model.total == 3  # step number 2 again, a new serial
    (ep,) = model.episodes()
    assert (ep.id, ep.start, ep.stop) == (1, 0, 1)  # the discarded episode's id goes to the next one


def test_model_of_an_episode_longer_than_the_ring():
    model = RingModel(4)
    model.add(3)
    model.end_episode()
    model.add(10)
    assert model.held == list(range(9, 13))
    assert [(e.start, e.stop, e.overwritten) for e in model.episodes()] == [(0, 4, True)]
    assert model.discard() == 10 and model.held == [] and model.total == 3 and model.episodes() == []
    model.add(2)
    model.reopen_for_writing()
    (ep,) = model.episodes()
    assert ep.interrupted and not ep.done and ep.data == {}


def test_random_operations_are_seeded():
    a = random_operations(np.random.default_rng(1), 30)
    assert a == random_operations(np.random.default_rng(1), 30)
    assert {op.kind for op in a} == {"append", "extend", "end_episode", "discard", "flush", "reopen"}
    assert "reopen" not in {op.kind for op in random_operations(np.random.default_rng(1), 30, reopen=False)}
    with pytest.raises(ValueError, match="unknown operation"):
        Op("rewind")


def test_check_against_model_names_what_differs():
    space, kwargs = _serial_space()
    rb = ReplayBuffer.create(DictStorage, space, **kwargs)
    model = RingModel(None)
    for op in [Op("extend", n=4), Op("end_episode"), Op("append")]:
        rb = apply_operation(rb, model, op, steps=lambda s: {"step": np.asarray(s, np.int64)})
    check_against_model(rb, model, lambda b: b["step"])
    model.held[1] = 99
    with pytest.raises(AssertionError, match=r"held steps"):
        check_against_model(rb, model, lambda b: b["step"])
    model.add(1)
    with pytest.raises(AssertionError, match="len 5, the model holds 6"):
        check_against_model(rb, model, lambda b: b["step"])
    rb.close()


def _serial_space():
    from trajstore.spaces import BoxSpace, DictSpace

    space = DictSpace({"step": BoxSpace(0, 2**40, (), np.int64)})
    return space, {"storage_cls_map": {"step": MemmapStorage}}


# -- the strategies ------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None, database=None)
@given(data=spaces().flatmap(lambda s: step_values(s, batch_size=3).map(lambda v: (s, v))))
def test_drawn_spaces_and_values_round_trip(data):
    space, batch = data
    assert space.contains(tree.unflatten(space, [np.asarray(v)[0] for v in tree.flatten(space, batch)]))
    with tempfile.TemporaryDirectory() as folder:
        kwargs = dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}})  # exact
        with ReplayBuffer.create(DictStorage, space, cache_path=Path(folder) / "rb", **kwargs) as rb:
            rb.extend(batch)
            rb.end_episode()
        with ReplayBuffer.load_from(Path(folder) / "rb") as again:
            for got, want in zip(tree.flatten(space, again[:]), tree.flatten(space, batch)):
                np.testing.assert_array_equal(got, np.asarray(want), strict=True)


@settings(max_examples=30, deadline=None, database=None)
@given(ops=operations(min_size=2, max_size=6, max_extend=3, reopen=False, final=False))
def test_drawn_operations_follow_their_options(ops):
    assert 2 <= len(ops) <= 6
    assert all(op.kind != "reopen" and not op.final and 0 <= op.n <= 3 for op in ops)
