"""The ring bookkeeping against a plain list model, over random operation sequences."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trajstore.replay_buffer import ReplayBuffer, RingState
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages.dict import DictStorage
from trajstore.storages._selection import from_slots, select
from trajstore.storages.memmap import MemmapStorage

SPACE = DictSpace({"step": BoxSpace(0, 2**40, (), np.int64), "pair": BoxSpace(0, 2**40, (2,), np.int64)})


def values(start: int, n: int) -> dict:
    ids = np.arange(start, start + n, dtype=np.int64)
    return {"step": ids, "pair": np.stack([ids, ids * 3], axis=1)}


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
    """ReplayBuffer (in memory) vs a list of step ids; episodes vs a list of (start, stop) ranges.

    A discarded episode's step ids are given to the next steps, as its step numbers are."""

    def __init__(self):
        super().__init__()
        self.capacity = None
        self.rb = None

    @rule(capacity=st.one_of(st.none(), st.integers(1, 12)))
    @precondition(lambda self: self.rb is None)
    def make(self, capacity):
        self.capacity = capacity
        self.rb = ReplayBuffer.create(DictStorage, SPACE, capacity=capacity,
                                      storage_cls_map={"step": MemmapStorage, "pair": MemmapStorage})
        self.model, self.total, self.episode_ends, self.open_start = [], 0, [], None

    @rule(n=st.integers(0, 15))
    @precondition(lambda self: self.rb is not None)
    def extend(self, n):
        self.rb.extend(values(self.total, n))
        self._model_add(n)

    @rule()
    @precondition(lambda self: self.rb is not None)
    def append(self):
        step = {"step": self.total, "pair": np.array([self.total, self.total * 3])}
        self.rb.append(step)
        self._model_add(1)

    @rule()
    @precondition(lambda self: self.rb is not None)
    def end_episode(self):
        if self.open_start is not None and self.open_start < self.total:
            self.rb.end_episode(ends_at=self.total)
            self.episode_ends.append((self.open_start, self.total))
        else:
            self.rb.end_episode()
        self.open_start = None

    @rule()
    @precondition(lambda self: self.rb is not None)
    def discard_episode(self):
        dropped = self.rb.discard_episode()
        if self.open_start is not None:
            assert dropped == self.total - self.open_start
            self.model = [g for g in self.model if g < self.open_start]
            self.total = self.open_start
        else:
            assert dropped == 0
        self.open_start = None

    @rule(data=st.data())
    @precondition(lambda self: self.rb is not None and len(self.model) > 0)
    def read(self, data):
        n = len(self.model)
        idx = data.draw(st.lists(st.integers(-n, n - 1), max_size=8))
        got = self.rb[np.array(idx, dtype=np.int64)]
        want = [self.model[i] for i in idx]
        assert got["step"].tolist() == want
        assert got["pair"][:, 1].tolist() == [3 * w for w in want]
        i = data.draw(st.integers(-n, n - 1))
        assert int(self.rb[i]["step"]) == self.model[i]

    def _model_add(self, n):
        if n and self.open_start is None:
            self.open_start = self.total
        self.model.extend(range(self.total, self.total + n))
        self.total += n
        if self.capacity is not None:
            self.model = self.model[-self.capacity:]

    @invariant()
    def lengths_and_episodes(self):
        if self.rb is None:
            return
        assert len(self.rb) == len(self.model)
        assert self.rb.total_steps == self.total
        oldest = self.total - len(self.model)
        expected = [(max(s, oldest) - oldest, e - oldest, s < oldest) for s, e in self.episode_ends if e > oldest]
        if self.open_start is not None and self.total > self.open_start:
            expected.append((max(self.open_start, oldest) - oldest, self.total - oldest, self.open_start < oldest))
        assert [(e.start, e.stop, e.overwritten) for e in self.rb.episodes] == expected
        assert [e.data for e in self.rb.episodes if e.done] == [{"ends_at": e} for s, e in self.episode_ends
                                                                if e > oldest]
        for ep in self.rb.episodes:  # each episode's steps are consecutive step ids
            steps = self.rb[ep.start:ep.stop]["step"]
            assert np.all(np.diff(steps) == 1)

    def teardown(self):
        if self.rb is not None:
            self.rb.close()


TestRingMachine = RingMachine.TestCase
TestRingMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
