"""ShardedBuffer: every shard of a dataset read as one buffer; reads equal the numpy union of the shards."""

import numpy as np
import pytest

from tests.shards.shard_data import Shard, assert_tree_equal, make_dataset, take, union
from trajstore.shards import ShardedBuffer


@pytest.fixture
def dataset(tmp_path):
    """Shards ``a`` (episodes 5, 3 and an open one of 4), ``b`` (empty), ``c`` (6, 2, 7; no final for the 2)."""
    root = make_dataset(tmp_path / "ds")
    a, b, c = Shard(root, "a", 0), Shard(root, "b", 1), Shard(root, "c", 2)
    a.episode(5)
    a.episode(3, with_final=False)
    a.episode(4, end=False)
    c.episode(6)
    c.episode(2, with_final=False)
    c.episode(7)
    b.rb.flush()
    yield root, [a, b, c]
    for s in (a, b, c):
        s.close()


def test_every_index_kind_reads_the_union(dataset):
    root, shards = dataset
    u = union(shards)
    n = 5 + 3 + 4 + 6 + 2 + 7
    with ShardedBuffer.load_from(root) as r:
        assert len(r) == n and r.shard_names == ("a", "b", "c") and r.shard_steps == {"a": 12, "b": 0, "c": 15}
        for i in [*range(n), -1, -n]:
            assert_tree_equal(r[i], take(u, i))
        for s in [slice(None), slice(3, 17), slice(0, n, 2), slice(10, 14), slice(20, 5), slice(-4, None)]:
            assert_tree_equal(r[s], take(u, s))
        rng = np.random.default_rng(1)
        idx = rng.integers(0, n, 60)  # unsorted, repeats, across shards
        assert_tree_equal(r[idx], take(u, idx))
        mask = rng.random(n) < 0.4
        assert_tree_equal(r.get_at(mask), take(u, mask))
        assert_tree_equal(r[np.array([], np.int64)], take(u, np.array([], np.int64)))
        with pytest.raises(IndexError):
            r[n]


def test_episodes_numbered_shard_by_shard_with_their_data(dataset):
    root, shards = dataset
    u = union(shards)
    with ShardedBuffer.load_from(root) as r:
        eps = list(r.episodes)
        assert [e.id for e in eps] == list(range(6)) and r.num_episodes == 6
        assert [(e.start, e.stop) for e in eps] == [(0, 5), (5, 8), (8, 12), (12, 18), (18, 20), (20, 27)]
        assert [e.done for e in eps] == [True, True, False, True, True, True]
        assert not any(e.interrupted for e in eps)
        assert [e.has_final_observation for e in eps] == [True, False, False, True, False, True]
        assert [e.data.get("episode_key") for e in eps] == ["a/0", "a/1", None, "c/0", "c/1", "c/2"]
        assert r.episodes[1:3] == eps[1:3] and r.episode(-1) == eps[5] and r.episodes == eps
        assert [r.locate_episode(k) for k in range(6)] == [("a", 0), ("a", 1), ("a", 2), ("c", 0), ("c", 1), ("c", 2)]
        assert r.global_episode("c", 1) == 4 and r.find_episode("c/2") == 5 and r.find_episode("zz") is None
        assert r.locate_step(12) == ("c", 0) and r.locate_step(11) == ("a", 11)
        for k, e in enumerate(eps):
            got = r.get_episode(k)["observation"]["state"]
            np.testing.assert_array_equal(got, u["observation"]["state"][e.start:e.stop])
            assert (got[:, 1] == got[0, 1]).all() and (got[:, 0] == got[0, 0]).all()
        np.testing.assert_array_equal(r.final_observation(3)["state"], [2, 0, -1])
        np.testing.assert_array_equal(r.final_observation(5)["state"], [2, 2, -1])
        assert r.final_observation(1) is None and r.final_observation(2) is None
        cols = r.episodes.columns()
        np.testing.assert_array_equal(cols["steps"], [5, 3, 4, 6, 2, 7])
        np.testing.assert_array_equal(cols["done"], [True, True, False, True, True, True])
        assert r.select_episodes(lambda e: e.data.get("n", 0) > 4) == [0, 3, 5]
        train, val = r.split_episodes(0.5, seed=3)
        assert sorted(train + val) == list(range(6)) and len(val) == 3
        with pytest.raises(IndexError):
            r.locate_episode(6)


def _shard_windows(shard, request_args):
    rb = shard.rb
    req = rb.window_request(**request_args)
    count = rb.count_anchors(req)
    return rb.windows_at(np.arange(count), req) if count else None


def test_windows_equal_the_shards_windows_and_never_cross(dataset):
    root, shards = dataset
    args = {"delta_indices": {"observation": [-2, 0], "action": [0, 1, 2]}, "pad": True}
    with ShardedBuffer.load_from(root) as r:
        req = r.window_request(**args)
        count = r.count_anchors(req)
        assert count == len(r)  # pad=True: every step anchors
        data, is_pad = r.windows_at(np.arange(count), req)
        parts = [w for w in (_shard_windows(s, args) for s in shards) if w is not None]
        want_data = {"observation": {k: np.concatenate([p[0]["observation"][k] for p in parts])
                                     for k in ("state", "count")},
                     "action": np.concatenate([p[0]["action"] for p in parts])}
        assert_tree_equal(data["observation"], want_data["observation"])
        np.testing.assert_array_equal(data["action"], want_data["action"])
        for name in args["delta_indices"]:
            np.testing.assert_array_equal(is_pad[name], np.concatenate([p[1][name] for p in parts]))
        np.testing.assert_array_equal(r.anchors_at(np.arange(count), req), np.arange(count))
        # pad=False over a window of 3: anchors only where the whole window fits in one episode of one shard
        strict = r.window_request({"observation": [0, 1, 2]}, pad=False)
        assert r.count_anchors(strict) == sum(max(0, n - 2) for n in (5, 3, 4, 6, 2, 7))
        windows = r.sample_windows(400, 3, rng=np.random.default_rng(0))["observation"]["state"]
        assert (windows[:, :, 0] == windows[:, :1, 0]).all() and (windows[:, :, 1] == windows[:, :1, 1]).all()
        np.testing.assert_array_equal(np.diff(windows[:, :, 2], axis=1), 1)
        seen = {tuple(w[0, :2]) for w in windows}
        assert seen == {(0, 0), (0, 1), (0, 2), (2, 0), (2, 2)}  # every episode that fits 3 steps, none else


def test_sample_draws_every_global_index_uniformly(dataset):
    root, shards = dataset
    u = union(shards)
    with ShardedBuffer.load_from(root) as r:
        n = len(r)
        batch, idx = r.sample(27000, rng=np.random.default_rng(5), return_indices=True)
        assert idx.min() >= 0 and idx.max() < n
        assert_tree_equal(batch, take(u, idx))
        counts = np.bincount(idx, minlength=n)
        expected = len(idx) / n
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 70  # 26 degrees of freedom: P(chi2 > 70) < 1e-5
        sel, sidx = r.sample(500, episodes=[3, 4], rng=np.random.default_rng(0), return_indices=True)
        assert set(np.unique(sidx)) == set(range(12, 20))
        assert set(sel["observation"]["state"][:, 0]) == {2.0}


def test_transitions_stay_in_their_episode_and_use_its_final_observation(dataset):
    root, shards = dataset
    u = union(shards)
    gamma = 0.9
    with ShardedBuffer.load_from(root) as r:
        eps = list(r.episodes)
        out = r.sample_transitions(600, n_step=2, gamma=gamma, rng=np.random.default_rng(2))
        for j, t in enumerate(out["index"].tolist()):
            e = next(e for e in eps if e.start <= t < e.stop)
            k = min(2, e.stop - t)
            want_reward = sum(gamma ** i * u["reward"][t + i] for i in range(k))
            assert out["reward"][j] == pytest.approx(want_reward, rel=1e-5)
            if t + 2 < e.stop:
                np.testing.assert_array_equal(out["next_observation"]["state"][j], u["observation"]["state"][t + 2])
            else:
                assert e.has_final_observation  # episodes without one keep no end anchors
                np.testing.assert_array_equal(out["next_observation"]["state"][j], r.final_observation(e.id)["state"])
            np.testing.assert_array_equal(out["observation"]["state"][j], u["observation"]["state"][t])
        drawn = set(out["index"].tolist())
        assert not drawn & {6, 7, 10, 11, 18, 19}  # last 2 steps of episodes without a final observation
        assert {4, 25, 26} <= drawn  # ends of episodes with one


def test_stats_equal_numpy_over_the_union(dataset):
    root, shards = dataset
    u = union(shards)
    with ShardedBuffer.load_from(root) as r:
        stats = r.stats()
        for name, values, axis in [("observation/state", u["observation"]["state"], 0),
                                   ("observation/count", u["observation"]["count"], None),
                                   ("action", u["action"], 0), ("reward", u["reward"], None)]:
            s = stats[name]
            x = values.astype(np.float64)
            np.testing.assert_array_equal(s.count, np.full(s.count.shape, len(x)))
            np.testing.assert_allclose(s.min, x.min(axis=axis)), np.testing.assert_allclose(s.max, x.max(axis=axis))
            np.testing.assert_allclose(s.mean, x.mean(axis=axis), rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(s.std, x.std(axis=axis), rtol=1e-9, atol=1e-12)
            for q, p in (("q10", 0.1), ("q50", 0.5), ("q90", 0.9)):
                err = np.abs(getattr(s, q) - np.quantile(x, p, axis=axis))
                assert (err <= s.quantile_error + 1e-9).all(), (name, q)
        assert set(r.stats("observation")) == {"observation/state", "observation/count"}
