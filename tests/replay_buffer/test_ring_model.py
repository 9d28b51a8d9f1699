"""The ring bookkeeping against a plain list model (``trajstore.testing.ring_model``), over random
operation sequences (``trajstore.testing.strategies``)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trajstore.replay_buffer import ReplayBuffer, RingState
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages.dict import DictStorage
from trajstore.storages._selection import from_slots, select
from trajstore.storages.memmap import MemmapStorage
from trajstore.testing.ring_model import RingModel, apply_operation, check_against_model
from trajstore.testing.strategies import capacities, ops

SPACE = DictSpace({"step": BoxSpace(0, 2**40, (), np.int64), "pair": BoxSpace(0, 2**40, (2,), np.int64)})


def values(serials) -> dict:
    ids = np.asarray(serials, dtype=np.int64)
    return {"step": ids, "pair": np.stack([ids, ids * 3], axis=1).reshape(len(ids), 2)}


def requested_slots(state, logical):
    """The slots of ``logical`` indices, in the requested order, through the ring's no-sort mapping."""
    sel = state.slots_of(from_slots(np.asarray(logical, dtype=np.int64)))
    assert np.all(np.diff(sel.slots) > 0)  # storages get sorted unique slots
    return sel.slots if sel.order is None else sel.slots[sel.order]


@given(capacity=st.integers(1, 9), head=st.integers(0, 8), data=st.data())
def test_slots_of_matches_modular_arithmetic(capacity, head, data):
    head %= capacity
    state = RingState(capacity, capacity, head, 3 * capacity)
    logical = data.draw(st.lists(st.integers(0, capacity - 1), max_size=12))
    assert list(requested_slots(state, logical)) == [(i + head) % capacity for i in logical]


def test_a_wrapped_full_read_is_two_runs_without_sorting():
    full = RingState(10, 10, 7, 25).slots_of(select(slice(None), 10))
    assert full.runs == ((0, 0, 10),)
    assert list(full.slots[full.order]) == [7, 8, 9, 0, 1, 2, 3, 4, 5, 6]
    part = RingState(10, 6, 7, 16).slots_of(select(slice(None), 6))
    assert part.runs == ((0, 0, 3), (3, 7, 3))
    assert list(part.slots[part.order]) == [7, 8, 9, 0, 1, 2]


@given(capacity=st.one_of(st.none(), st.integers(1, 9)), sizes=st.lists(st.integers(0, 20), max_size=12))
def test_plan_extend_matches_list(capacity, sizes):
    state, slots, model, total = RingState(capacity), {}, [], 0
    for n in sizes:
        new, runs = state.plan_extend(n)
        batch = list(range(total, total + n))
        for rows, phys in runs:
            for r, p in zip(range(*rows.indices(n)), range(phys.start, phys.stop)):
                slots[p] = batch[r]
        model.extend(batch)
        if capacity is not None:
            model = model[-capacity:]
        total += n
        state = new
        assert state.count == len(model) and state.appended == total
        assert [slots[int(p)] for p in requested_slots(state, np.arange(state.count))] == model


class RingMachine(RuleBasedStateMachine):
    """ReplayBuffer (in memory) against :class:`~trajstore.testing.ring_model.RingModel`, over the
    operation sequences of :mod:`trajstore.testing.strategies` (no reopen: the buffer is in memory)."""

    def __init__(self):
        super().__init__()
        self.rb = None

    @rule(capacity=capacities(12))
    @precondition(lambda self: self.rb is None)
    def make(self, capacity):
        self.rb = ReplayBuffer.create(DictStorage, SPACE, capacity=capacity,
                                      storage_cls_map={"step": MemmapStorage, "pair": MemmapStorage})
        self.model = RingModel(capacity)

    @rule(op=ops(reopen=False, final=False))
    @precondition(lambda self: self.rb is not None)
    def operate(self, op):
        self.rb = apply_operation(self.rb, self.model, op, steps=lambda serials: values(serials))

    @rule(data=st.data())
    @precondition(lambda self: self.rb is not None and len(self.model.held) > 0)
    def read(self, data):
        n = len(self.model.held)
        idx = data.draw(st.lists(st.integers(-n, n - 1), max_size=8))
        got = self.rb[np.array(idx, dtype=np.int64)]
        want = [self.model.held[i] for i in idx]
        assert got["step"].tolist() == want
        assert got["pair"][:, 1].tolist() == [3 * w for w in want]
        i = data.draw(st.integers(-n, n - 1))
        assert int(self.rb[i]["step"]) == self.model.held[i]

    @invariant()
    def matches_model(self):
        if self.rb is None:
            return
        check_against_model(self.rb, self.model, lambda batch: batch["step"])
        for ep in self.rb.episodes:  # each episode's steps were written one after the other
            steps = self.rb[ep.start:ep.stop]["step"]
            assert np.all(np.diff(steps) == 1)

    def teardown(self):
        if self.rb is not None:
            self.rb.close()


TestRingMachine = RingMachine.TestCase
TestRingMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
