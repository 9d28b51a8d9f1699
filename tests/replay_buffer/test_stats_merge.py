"""LeafAccumulator.merge / Histograms.merge: statistics of parts merged equal those of the union."""

import numpy as np
import pytest

from trajstore.replay_buffer.leaf_stats import LeafAccumulator
from trajstore.spaces import BoxSpace


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
@pytest.mark.parametrize("scales", [(1.0, 1000.0), (1000.0, 1.0), (1.0, 1.0, 1e-3)])
def test_merged_parts_equal_numpy_over_the_union(dtype, scales):
    rng = np.random.default_rng(3)
    leaf = BoxSpace(-1e9, 1e9, (3,), dtype) if dtype != np.uint8 else BoxSpace(0, 255, (3,), dtype)
    parts = []
    for k, scale in enumerate(scales):
        x = rng.normal(k * 5, scale, size=(200 + 50 * k, 3))
        if dtype == np.uint8:
            x = np.clip(np.abs(x), 0, 255)
        parts.append(x.astype(dtype))
    merged = LeafAccumulator(leaf)
    for p in parts:
        acc = LeafAccumulator(leaf)
        acc.add(p)
        merged.merge(acc)
    merged.merge(LeafAccumulator(leaf))  # an empty part changes nothing
    x = np.concatenate(parts).astype(np.float64)
    s = merged.result("x")
    np.testing.assert_array_equal(s.count, [len(x)] * 3)
    np.testing.assert_array_equal(s.min, x.min(0))
    np.testing.assert_array_equal(s.max, x.max(0))
    np.testing.assert_allclose(s.mean, x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(s.std, x.std(0), rtol=1e-9)
    assert int(merged.hist.counts.sum()) == x.size  # every value in one bin
    for q, p in (("q01", 0.01), ("q50", 0.5), ("q99", 0.99)):
        assert (np.abs(getattr(s, q) - np.quantile(x, p, axis=0)) <= s.quantile_error + 1e-9).all()


def test_merge_refuses_another_leaf():
    a, b = LeafAccumulator(BoxSpace(0, 1, (3,), np.float32)), LeafAccumulator(BoxSpace(0, 1, (2,), np.float32))
    with pytest.raises(ValueError, match="cannot merge"):
        a.merge(b)
