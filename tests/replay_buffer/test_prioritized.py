"""Prioritized replay: draw frequencies, importance weights, valid anchors of windows and transitions, new
steps' priority, rings, stale updates, reopening and bad input (rl_api.py, prioritized.py, priorities.py)."""

import json

import numpy as np
import pytest

from trajstore.errors import FormatError, ReadOnlyError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.sum_tree import SumTree
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"observation": BoxSpace(-1e6, 1e6, (), np.float64), "action": BoxSpace(-1e6, 1e6, (), np.float64),
                   "reward": BoxSpace(-1e6, 1e6, (), np.float32), "terminated": BinarySpace(),
                   "truncated": BinarySpace()})
#: The 0.9999 quantile of the chi-square distribution with k degrees of freedom from tables.
CHI2_9999 = {3: 21.11, 8: 31.83, 9: 33.72, 11: 37.33, 14: 42.58, 19: 50.55, 23: 56.41, 29: 64.76}


def make(tmp_path=None, capacity=None, priorities=("td",)):
    return ReplayBuffer.create(DictStorage, SPACE, capacity=capacity, priorities=priorities,
                               cache_path=None if tmp_path is None else tmp_path / "rb",
                               **dict_storage_kwargs_from_space(SPACE))


def add(rb, observations, *, end=True, final=True):
    obs = np.asarray(observations, np.float64)
    n = len(obs)
    rb.extend({"observation": obs, "action": obs + 0.5, "reward": (obs * 10).astype(np.float32),
               "terminated": np.zeros(n, bool), "truncated": np.zeros(n, bool)})
    if end:
        rb.end_episode(final_observation=np.float64(-1) if final else None)


def chi_square(counts, probabilities):
    expected = probabilities * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def draw_counts(sample, n, draws=60, batch=4096):
    counts = np.zeros(n, np.int64)
    for _ in range(draws):
        counts += np.bincount(sample(batch), minlength=n)
    return counts


@pytest.mark.parametrize("folder", [False, True])
def test_frequencies_follow_p_alpha_within_a_chi_square_bound(tmp_path, folder):
    rb = make(tmp_path if folder else None)
    add(rb, range(12))
    steps = np.arange(12)
    p = np.linspace(0.2, 5.0, 12)
    assert rb.update_priorities(steps, p) == (12, 0)
    alpha = 0.6
    rng = np.random.default_rng(1)
    counts = draw_counts(lambda b: rb.sample(b, priority="td", alpha=alpha, rng=rng)[1].index, 12)
    expected = p ** alpha / (p ** alpha).sum()
    assert chi_square(counts, expected) < CHI2_9999[11]
    uniform = np.full(12, 1 / 12)
    assert chi_square(counts, uniform) > 10 * CHI2_9999[11]  # the bound would catch a uniform draw
    rb.close()


def test_weights_are_the_normalised_importance_weights(tmp_path):
    rb = make(tmp_path)
    add(rb, range(20))
    p = np.random.default_rng(0).uniform(0.1, 3.0, 20).astype(np.float32)
    rb.update_priorities(np.arange(20), p)
    alpha, beta = 0.7, 0.5
    batch, info = rb.sample(64, priority="td", alpha=alpha, beta=beta, rng=np.random.default_rng(2))
    probability = p.astype(np.float64) ** alpha / (p.astype(np.float64) ** alpha).sum()
    raw = (20 * probability) ** -beta
    expected = raw[info.index] / raw.max()
    assert info.weight.dtype == np.float32 and info.weight.shape == (64,)
    np.testing.assert_allclose(info.weight, expected, rtol=1e-6)
    np.testing.assert_array_equal(batch["observation"], info.index.astype(np.float64))
    assert np.array_equal(info.step, info.index)
    assert rb.sample(8, priority="td", beta=0.0)[1].weight.tolist() == [1.0] * 8
    rb.close()


def test_transitions_draw_valid_steps_by_renormalised_priority():
    rb = make()
    add(rb, range(0, 6), final=False)  # steps 0..5, no final observation: t in 0..2 for n = 3
    add(rb, range(6, 10))              # steps 6..9 with a final observation: every t
    add(rb, range(10, 15), end=False)  # open: 10, 11
    p = np.arange(1, 16, dtype=np.float64)
    rb.update_priorities(np.arange(15), p)
    valid = np.array([0, 1, 2, 6, 7, 8, 9, 10, 11])
    rng = np.random.default_rng(3)

    def sample(b):
        out, info = rb.sample_transitions(b, n_step=3, priority="td", alpha=1.0, rng=rng)
        assert np.array_equal(out["index"], info.index)
        return info.index

    counts = draw_counts(sample, 15, draws=30)
    assert counts[np.setdiff1d(np.arange(15), valid)].sum() == 0
    expected = p[valid] / p[valid].sum()
    assert chi_square(counts[valid], expected) < CHI2_9999[8]


def test_windows_draw_valid_anchors_by_renormalised_priority():
    rb = make()
    add(rb, range(0, 8))
    add(rb, range(8, 11))   # shorter than the window: no anchor
    add(rb, range(11, 23))
    p = np.random.default_rng(4).uniform(0.5, 4.0, 23)
    rb.update_priorities(np.arange(23), p)
    valid = np.r_[np.arange(0, 4), np.arange(11, 19)]  # windows of 5 inside an episode
    rng = np.random.default_rng(5)

    def sample(b):
        data, info = rb.sample_windows(b, 5, priority="td", alpha=0.5, rng=rng)
        np.testing.assert_array_equal(data["observation"][:, 0], info.index)
        return info.index

    counts = draw_counts(sample, 23, draws=30)
    assert counts[np.setdiff1d(np.arange(23), valid)].sum() == 0
    mass = p[valid].astype(np.float32).astype(np.float64) ** 0.5
    assert chi_square(counts[valid], mass / mass.sum()) < CHI2_9999[11]
    data, is_pad = rb.sample_windows(16, delta_indices={"action": [-1, 0]}, pad=False, priority="td")[0]
    assert not is_pad["action"].any()


def test_episodes_with_little_mass_are_drawn_exactly(tmp_path):
    """A selection holding a tiny part of the mass: the rejection rounds give up and the exact draw takes over."""
    rb = make(tmp_path)
    add(rb, range(0, 200))
    add(rb, range(200, 204))
    rb.update_priorities(np.arange(200), np.full(200, 1e6))
    rb.update_priorities(np.arange(200, 204), [1.0, 2.0, 3.0, 4.0])
    ids = [e.id for e in rb.episodes]
    rng = np.random.default_rng(6)
    counts = draw_counts(lambda b: rb.sample(b, priority="td", alpha=1.0, episodes=[ids[1]], rng=rng)[1].index,
                         204, draws=10)
    assert counts[:200].sum() == 0
    assert chi_square(counts[200:], np.arange(1, 5) / 10) < CHI2_9999[3]


def test_new_steps_get_the_largest_priority_given():
    rb = make()
    add(rb, range(3), end=False)
    np.testing.assert_array_equal(rb.priorities("td"), [1.0, 1.0, 1.0])  # 1.0 before any update
    rb.update_priorities([0, 1], [7.5, 0.25])
    add(rb, range(3, 5), end=False)
    np.testing.assert_array_equal(rb.priorities("td"), [7.5, 0.25, 1.0, 7.5, 7.5])
    rb.update_priorities([4], [2.0])  # lower: the maximum stays 7.5
    add(rb, [5], end=False)
    assert rb.priorities("td")[-1] == 7.5


def test_a_ring_drops_priorities_with_their_steps(tmp_path):
    rb = make(tmp_path, capacity=8)
    add(rb, range(8), end=False)
    rb.update_priorities(np.arange(8), np.arange(1, 9) / 10)  # max 0.8 (below the initial 1.0)
    add(rb, range(8, 11), end=False)  # overwrites steps 0..2
    assert rb.total_steps == 11
    np.testing.assert_allclose(rb.priorities("td"), [0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 1.0, 1.0], rtol=1e-6)
    rb.flush()
    reader = ReplayBuffer.load_from(tmp_path / "rb")
    np.testing.assert_allclose(reader.priorities("td"), rb.priorities("td"))
    reader.close()
    rb.close()


def test_an_update_of_an_overwritten_step_is_dropped():
    rb = make(capacity=4)
    add(rb, range(4), end=False)
    _, info = rb.sample(4, priority="td", rng=np.random.default_rng(0))
    add(rb, range(4, 6), end=False)  # steps 0 and 1 overwritten by 4 and 5, in their slots
    result = rb.update_priorities(info, np.full(4, 9.0))
    overwritten = int((info.step < 2).sum())
    assert result == (4 - overwritten, overwritten)
    values = dict(zip(range(2, 6), rb.priorities("td").tolist()))
    assert values[4] == values[5] == 1.0  # the new steps keep theirs
    for s in set(info.step.tolist()) - {0, 1}:
        assert values[s] == 9.0


def test_an_update_after_discard_episode_does_not_reach_the_new_steps():
    rb = make()
    add(rb, range(3))
    add(rb, range(3, 6), end=False)
    _, info = rb.sample(32, priority="td", rng=np.random.default_rng(0))
    assert (info.step >= 3).any()
    rb.discard_episode()
    add(rb, range(10, 13), end=False)  # the same step numbers 3..5, new steps
    result = rb.update_priorities(info, np.full(32, 5.0))
    assert result.dropped == int((info.step >= 3).sum())
    np.testing.assert_array_equal(rb.priorities("td")[3:], [1.0, 1.0, 1.0])


def test_priorities_survive_close_and_reopen(tmp_path):
    rb = make(tmp_path, capacity=50)
    add(rb, range(30))
    rb.update_priorities(np.arange(30), np.arange(1, 31, dtype=np.float32))
    rb.update_priorities([3], [0.5])
    rb.close()
    meta = json.loads((tmp_path / "rb" / "trajstore.json").read_text())
    assert set(meta["priorities"]) == {"td"}
    expected = np.arange(1, 31, dtype=np.float32)
    expected[3] = 0.5
    reader = ReplayBuffer.load_from(tmp_path / "rb")
    assert reader.priority_sets == ("td",)
    np.testing.assert_array_equal(reader.priorities("td"), expected)
    _, info = reader.sample(16, priority="td", alpha=1.0, beta=1.0, rng=np.random.default_rng(0))
    np.testing.assert_allclose(info.weight, 0.5 / expected[info.index], rtol=1e-6)
    reader.close()
    writer = ReplayBuffer.load_from(tmp_path / "rb", read_only=False)
    np.testing.assert_array_equal(writer.priorities("td"), expected)
    add(writer, [99], end=False)
    assert writer.priorities("td")[-1] == 30.0  # the maximum came back with the set
    writer.close()


def test_a_folder_without_priorities_opens_and_can_gain_a_set(tmp_path):
    rb = make(tmp_path, priorities=())
    add(rb, range(5))
    rb.close()
    assert "priorities" not in json.loads((tmp_path / "rb" / "trajstore.json").read_text())
    writer = ReplayBuffer.load_from(tmp_path / "rb", read_only=False)  # HDF5: the writer opens first
    reader = ReplayBuffer.load_from(tmp_path / "rb")
    assert reader.priority_sets == ()
    with pytest.raises(KeyError, match="no priority set 'td'"):
        reader.sample(4, priority="td")
    writer.add_priorities("td")
    reader.refresh()
    with pytest.raises(KeyError, match="after the writer's next flush"):
        reader.sample(4, priority="td")
    writer.update_priorities([1], [3.0])
    writer.flush()
    reader.refresh()
    np.testing.assert_array_equal(reader.priorities("td"), [1.0, 3.0, 1.0, 1.0, 1.0])
    reader.close()
    writer.close()


def test_a_damaged_priority_file_is_named(tmp_path):
    rb = make(tmp_path)
    add(rb, range(5))
    rb.close()
    meta = json.loads((tmp_path / "rb" / "trajstore.json").read_text())
    path = tmp_path / "rb" / meta["priorities"]["td"]["file"]
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    reader = ReplayBuffer.load_from(tmp_path / "rb")
    with pytest.raises(FormatError, match="td.*checksum"):
        reader.sample(4, priority="td")
    reader.close()
    with pytest.raises(FormatError, match="checksum"):
        ReplayBuffer.load_from(tmp_path / "rb", read_only=False)


def test_bad_input_is_refused_with_the_argument_named(tmp_path):
    rb = make(tmp_path, priorities=("td", "other"))
    add(rb, range(5))
    for bad in (-1.0, 0.0, np.nan, np.inf, 1e39):
        with pytest.raises(ValueError, match=r"values must be finite and > 0.*values\[1\]"):
            rb.update_priorities([0, 1], [1.0, bad], priority="td")
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        rb.update_priorities([0, 1], [1.0], priority="td")
    with pytest.raises(TypeError, match="step numbers"):
        rb.update_priorities([0.5], [1.0], priority="td")
    with pytest.raises(ValueError, match="step numbers >= 0"):
        rb.update_priorities([-1], [1.0], priority="td")
    with pytest.raises(ValueError, match="say which set"):
        rb.update_priorities([0], [1.0])
    with pytest.raises(KeyError, match="'nope'.*sets: \\['other', 'td'\\]"):
        rb.update_priorities([0], [1.0], priority="nope")
    with pytest.raises(KeyError, match="'nope'"):
        rb.sample(4, priority="nope")
    with pytest.raises(ValueError, match="alpha must be"):
        rb.sample(4, priority="td", alpha=-1)
    with pytest.raises(ValueError, match="beta must be"):
        rb.sample(4, priority="td", beta=float("nan"))
    with pytest.raises(TypeError, match="return_indices"):
        rb.sample(4, priority="td", return_indices=True)
    with pytest.raises(ValueError, match="exists already"):
        rb.add_priorities("td")
    with pytest.raises(ValueError, match="priority set name"):
        rb.add_priorities("../x")
    assert rb.update_priorities([0], [2.0], priority="td") == (1, 0)  # nothing above changed anything
    np.testing.assert_array_equal(rb.priorities("td"), [2.0, 1.0, 1.0, 1.0, 1.0])
    rb.close()
    reader = ReplayBuffer.load_from(tmp_path / "rb")
    with pytest.raises(ReadOnlyError):
        reader.update_priorities([0], [1.0], priority="td")
    with pytest.raises(ReadOnlyError):
        reader.add_priorities("x")
    reader.close()


def test_sum_tree_against_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 4097, 70000):
        masses = rng.random(n)
        masses[rng.random(n) < 0.3] = 0.0
        masses[0] = 0.5
        tree = SumTree(masses)
        leaves = rng.integers(0, n, 300)
        new = rng.random(300)
        tree.update(leaves, new)
        expected = masses.copy()
        for leaf, value in zip(leaves, new):  # the last value of a repeated leaf
            expected[leaf] = value
        assert np.isclose(tree.total, expected.sum())
        assert tree.min == expected[expected > 0].min()
        targets = rng.random(1000) * tree.total
        found = tree.find(targets)
        reference = np.searchsorted(np.cumsum(expected), targets, side="right")
        assert (found == reference).mean() > 0.99  # rounding at a boundary may differ
        np.testing.assert_array_equal(tree.masses(), expected)
