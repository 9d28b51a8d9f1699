"""sample_transitions: next observations within an episode or the final one, n-step returns, rings,
and the exact pairs of small layouts against a plain reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"observation": BoxSpace(-1e6, 1e6, (), np.float64), "action": BoxSpace(-1e6, 1e6, (), np.float64),
                   "reward": BoxSpace(-1e6, 1e6, (), np.float32), "terminated": BinarySpace(),
                   "truncated": BinarySpace()})


def make(tmp_path=None, capacity=None):
    return ReplayBuffer.create(DictStorage, SPACE, capacity=capacity,
                               cache_path=None if tmp_path is None else tmp_path / "rb",
                               **dict_storage_kwargs_from_space(SPACE))


def add(rb, observations, terminated_last=True):
    obs = np.asarray(observations, np.float64)
    n = len(obs)
    term = np.zeros(n, bool)
    term[-1] = terminated_last
    rb.extend({"observation": obs, "action": obs + 0.5, "reward": (obs * 10).astype(np.float32),
               "terminated": term, "truncated": np.zeros(n, bool)})


def pairs(rb, n=400, **kwargs):
    out = rb.sample_transitions(n, rng=np.random.default_rng(0), **kwargs)
    return sorted({(float(o), float(x)) for o, x in zip(out["observation"], out["next_observation"])})


def test_ring_without_final_observation_pairs_only_held_successors():
    rb = make(capacity=5)
    add(rb, range(7))
    rb.end_episode()
    assert pairs(rb) == [(2, 3), (3, 4), (4, 5), (5, 6)]


def test_ring_with_final_observation_pairs_the_last_step_with_it():
    rb = make(capacity=5)
    add(rb, range(7))
    rb.end_episode(final_observation=7.0)
    assert pairs(rb) == [(2, 3), (3, 4), (4, 5), (5, 6), (6, 7)]


def test_never_crosses_an_episode_boundary(tmp_path):
    with make(tmp_path) as rb:
        add(rb, [0, 1, 2])
        rb.end_episode(final_observation=3.0)
        add(rb, [100, 101])
        rb.end_episode()
        got = pairs(rb)
        assert got == [(0, 1), (1, 2), (2, 3), (100, 101)]
        out = rb.sample_transitions(64, rng=np.random.default_rng(1))
        np.testing.assert_array_equal(out["action"], out["observation"] + 0.5)
        np.testing.assert_array_equal(out["index"], np.array([{0: 0, 1: 1, 2: 2, 100: 3}[o] for o in
                                                               out["observation"]]))
        last = out["observation"] == 2
        assert out["terminated"][last].all() and not out["terminated"][~last].any()
    with ReplayBuffer.load_from(tmp_path / "rb") as reader:
        assert pairs(reader) == [(0, 1), (1, 2), (2, 3), (100, 101)]


def test_open_episode_last_step_is_never_drawn():
    rb = make()
    add(rb, [0, 1, 2], terminated_last=False)
    assert pairs(rb) == [(0, 1), (1, 2)]


def test_n_step_return_truncated_at_the_episode_end():
    rb = make()
    add(rb, [0, 1, 2, 3])
    rb.end_episode(final_observation=4.0)
    add(rb, [50, 51, 52])
    rb.end_episode()
    gamma = 0.5
    out = rb.sample_transitions(500, n_step=3, gamma=gamma, rng=np.random.default_rng(0))
    seen = {}
    for i in range(500):
        seen[float(out["observation"][i])] = (float(out["next_observation"][i]), float(out["reward"][i]),
                                              float(out["discount"][i]), bool(out["terminated"][i]))
    # A (rewards 0, 10, 20, 30; final 4): t=0 -> step 3; t=1, 2, 3 -> the final observation, k = 3, 2, 1
    assert seen == {0: (3, 10.0, 0.125, False), 1: (4, 27.5, 0.125, True), 2: (4, 35.0, 0.25, True),
                    3: (4, 30.0, 0.5, True)}
    assert 50 not in seen and 51 not in seen  # B has no final observation: its last 3 steps are never anchors
    assert out["reward"].dtype == np.float32 and out["discount"].dtype == np.float32


@settings(max_examples=60, deadline=None)
@given(capacity=st.one_of(st.none(), st.integers(3, 30)), lengths=st.lists(st.integers(1, 7), max_size=6),
       finals=st.lists(st.booleans(), min_size=6, max_size=6), open_len=st.integers(0, 4), n=st.integers(1, 3))
def test_transitions_match_the_reference(capacity, lengths, finals, open_len, n):
    rb = make(capacity=capacity)
    g = 0
    for length, final in zip(lengths, finals):
        add(rb, range(g, g + length))
        g += length
        rb.end_episode(final_observation=float(1000 + g) if final else None)
    if open_len:
        add(rb, range(g, g + open_len), terminated_last=False)
    expected = set()
    held = rb[:]["observation"]
    for k, e in enumerate(rb.episodes):
        fin = rb.final_observation(k) if e.done else None
        for t in range(e.start, e.stop):
            if t + n < e.stop:
                expected.add((float(held[t]), float(held[t + n])))
            elif fin is not None:
                expected.add((float(held[t]), float(fin)))
    if not expected:
        with pytest.raises(ValueError, match="longest episode"):
            rb.sample_transitions(4, n_step=n)
        return
    out = rb.sample_transitions(2000, n_step=n, rng=np.random.default_rng(0))
    got = {(float(o), float(x)) for o, x in zip(out["observation"], out["next_observation"])}
    assert got <= expected
    if len(expected) <= 20:
        assert got == expected
    np.testing.assert_array_equal(rb[out["index"]]["observation"], out["observation"])


def test_bad_requests():
    rb = make()
    add(rb, [0, 1, 2])
    rb.end_episode()
    with pytest.raises(ValueError, match="n_step"):
        rb.sample_transitions(4, n_step=0)
    with pytest.raises(ValueError, match="gamma"):
        rb.sample_transitions(4, gamma=1.5)
    with pytest.raises(ValueError, match="has no"):
        rb.sample_transitions(4, observation_key="obs")


def test_reader_of_a_live_ring_sees_consistent_transitions(tmp_path):
    """A reader refreshing between the writer's episodes: every pair is a step and its successor in
    the same episode, or the last step and its episode's final observation (10000 + its stop)."""
    lengths = [3, 5, 2, 6, 4, 7, 1, 5]
    with ReplayBuffer.create(DictStorage, SPACE, capacity=9, cache_path=tmp_path / "rb", multiprocessing=True,
                             **dict_storage_kwargs_from_space(SPACE)) as rb:
        reader = ReplayBuffer.load_from(tmp_path / "rb", multiprocessing=True)
        g, stops = 0, []
        for length in lengths * 3:
            add(rb, range(g, g + length))
            g += length
            stops.append(g)
            rb.end_episode(final_observation=float(10000 + g))
            reader.refresh()
            out = reader.sample_transitions(64, n_step=2, rng=np.random.default_rng(g))
            for o, x in zip(out["observation"], out["next_observation"]):
                stop = next(s for s in stops if s > o)
                assert x == (o + 2 if o + 2 < stop else 10000 + stop)
        reader.close()
