"""Samplers: windows never cross an episode boundary, and every valid window can be drawn."""

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.samplers import uniform_windows, window_starts
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, MemmapStorage

SPACE = DictSpace({"step": BoxSpace(0, 1 << 30, (), np.int64), "obs": BoxSpace(0, 1 << 30, (2,), np.int64)})


def test_window_starts():
    eps = [Episode(0, 0, 5, False, True), Episode(1, 5, 7, False, True), Episode(2, 7, 11, False, False)]
    assert window_starts(eps, 3).tolist() == [0, 1, 2, 7, 8]
    assert window_starts(eps, 1).tolist() == list(range(11))
    with pytest.raises(ValueError, match="window"):
        window_starts(eps, 0)
    with pytest.raises(ValueError, match="longest: 5"):
        uniform_windows(eps, 6, 4, np.random.default_rng(0))


def test_uniform_windows_cover_every_start():
    eps = [Episode(0, 0, 5, False, True), Episode(1, 5, 9, False, True)]
    idx = uniform_windows(eps, 4, 2000, np.random.default_rng(1))
    assert idx.shape == (2000, 4)
    assert set(idx[:, 0].tolist()) == {0, 1, 5}
    assert np.all(np.diff(idx, axis=1) == 1)
    counts = np.bincount(idx[:, 0], minlength=6)[[0, 1, 5]]
    assert counts.min() > 500  # each of the 3 windows about 1/3 of the draws


def test_buffer_sample_windows_stay_inside_episodes():
    rb = ReplayBuffer.create(DictStorage, SPACE, capacity=20,
                             storage_cls_map={"step": MemmapStorage, "obs": MemmapStorage})
    episode_of = {}
    g = 0
    for e, length in enumerate([7, 3, 9, 6, 8]):
        ids = np.arange(g, g + length)
        rb.extend({"step": ids, "obs": np.stack([ids, ids * 2], 1)})
        rb.end_episode()
        episode_of.update({int(i): e for i in ids})
        g += length
    # 33 steps appended into 20 slots: the oldest held step is 13, in the middle of episode 2
    out = rb.sample_windows(500, 4, rng=np.random.default_rng(2))
    assert out["step"].shape == (500, 4) and out["obs"].shape == (500, 4, 2)
    assert np.all(np.diff(out["step"], axis=1) == 1)
    assert np.all(out["step"] >= 13)
    for row in out["step"]:
        assert len({episode_of[int(s)] for s in row}) == 1
    np.testing.assert_array_equal(out["obs"][..., 1], out["step"] * 2)
    rb.close()
