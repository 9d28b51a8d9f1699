"""The sum and min tree against NumPy over random updates: totals, minima, masses and the leaf each
target falls in (the smallest i with target < cumsum(masses)[i])."""

import numpy as np
import pytest

from trajstore.replay_buffer.sum_tree import SumTree, draw


@pytest.mark.parametrize("n", [1, 2, 7, 4096, 4097, 70_000])
def test_random_updates_match_numpy(n):
    rng = np.random.default_rng(n)
    masses = rng.uniform(0, 5, n) * (rng.random(n) < 0.9)  # some slots without a step (mass 0)
    tree = SumTree(masses)
    for _ in range(40):
        k = int(rng.integers(1, 300))
        leaves = rng.integers(0, n, k)
        values = rng.uniform(0, 5, k) * (rng.random(k) < 0.8)
        if rng.random() < 0.3:
            values = np.full(k, rng.uniform(1e-3, 1e-2))  # new minima
        tree.update(leaves, values)
        masses[leaves] = values  # NumPy keeps the last of a repeated leaf, as the tree does
        np.testing.assert_allclose(tree.total, masses.sum(), rtol=1e-9)
        positive = masses[masses > 0]
        assert tree.min == (positive.min() if len(positive) else np.inf)
        np.testing.assert_array_equal(tree.masses(), masses)
        if masses.sum() > 0:
            cum = np.cumsum(masses)
            targets = rng.random(64) * cum[-1]
            want = np.searchsorted(cum, targets, side="right")
            got = tree.find(targets)
            close = np.isclose(targets, cum[np.minimum(want, n - 1)]) | np.isclose(targets, cum[np.maximum(want - 1, 0)])
            assert np.array_equal(got[~close], want[~close])
            drawn = draw(tree, 256, rng)
            assert (masses[drawn] > 0).all()


def test_raising_the_smallest_mass_moves_the_minimum_up():
    tree = SumTree(np.array([3.0, 0.5, 2.0, 4.0, 0.0]))
    assert tree.min == 0.5
    tree.update(np.array([1]), np.array([6.0]))
    assert tree.min == 2.0 and tree.total == 15.0
    tree.update(np.array([2, 0]), np.array([0.0, 0.0]))
    assert tree.min == 4.0
