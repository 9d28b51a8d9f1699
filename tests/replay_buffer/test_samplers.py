"""Samplers against plain references: every valid anchor is drawn with the same chance (the same
draws as enumerating them all), windows never cross an episode boundary, padding clamps."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.samplers import anchor_index, draw_anchors, window_indices
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, MemmapStorage

SPACE = DictSpace({"step": BoxSpace(0, 1 << 30, (), np.int64), "obs": BoxSpace(0, 1 << 30, (2,), np.int64)})


def reference_anchors(closed, open_episode, oldest, before, after):
    """Every valid anchor in logical indices, in step order, with its episode's held range: plain loops."""
    out = []
    for start, stop in [*closed, *([open_episode] if open_episode else [])]:
        start = max(start, oldest)
        for a in range(start + before, stop - after):
            out.append((a - oldest, start - oldest, stop - oldest))
    return np.array(out, np.int64).reshape(-1, 3)


@st.composite
def layouts(draw):
    lengths = draw(st.lists(st.integers(1, 12), max_size=8))
    bounds = np.cumsum([0, *lengths])
    closed = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    open_len = draw(st.integers(0, 6))
    appended = int(bounds[-1]) + open_len
    open_episode = (int(bounds[-1]), appended) if open_len else None
    oldest = draw(st.integers(0, appended))
    dropped = draw(st.booleans())  # the table dropped the episodes that left the buffer, or not yet
    if dropped:
        closed = [(s, e) for s, e in closed if e > oldest]
    return closed, open_episode, oldest, appended


@settings(max_examples=300, deadline=None)
@given(layout=layouts(), before=st.integers(0, 4), after=st.integers(0, 4), seed=st.integers(0, 2**32 - 1))
def test_draw_anchors_matches_enumerating_every_anchor(layout, before, after, seed):
    closed, open_episode, oldest, appended = layout
    starts = np.array([s for s, _ in closed], np.int64)
    stops = np.array([e for _, e in closed], np.int64)
    index = anchor_index(starts, stops, before, after)
    ref = reference_anchors(closed, open_episode, oldest, before, after)
    kwargs = dict(oldest=oldest, appended=appended, open_start=open_episode[0] if open_episode else None)
    if len(ref) == 0:
        with pytest.raises(ValueError, match="longest episode"):
            draw_anchors(index, batch_size=4, rng=np.random.default_rng(seed), **kwargs)
        return
    got = np.stack(draw_anchors(index, batch_size=64, rng=np.random.default_rng(seed), **kwargs), axis=1)
    np.testing.assert_array_equal(got, ref[np.random.default_rng(seed).integers(0, len(ref), size=64)])


def test_every_anchor_is_drawn_about_equally():
    index = anchor_index(np.array([0, 5]), np.array([5, 9]), 0, 3)
    anchors, _, _ = draw_anchors(index, oldest=0, appended=9, open_start=None, batch_size=3000,
                                 rng=np.random.default_rng(1))
    assert set(anchors.tolist()) == {0, 1, 5}
    assert np.bincount(anchors)[[0, 1, 5]].min() > 800


def test_draw_anchors_checks_its_arguments():
    index = anchor_index(np.array([0, 5]), np.array([5, 7]), 0, 5)
    with pytest.raises(ValueError, match="longest episode: 5"):
        draw_anchors(index, oldest=0, appended=7, open_start=None, batch_size=4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="batch_size"):
        draw_anchors(index, oldest=0, appended=7, open_start=None, batch_size=0, rng=np.random.default_rng(0))


@given(starts=st.lists(st.integers(0, 20), min_size=1, max_size=6), data=st.data())
def test_window_indices_clamp_to_the_episode(starts, data):
    lengths = data.draw(st.lists(st.integers(1, 6), min_size=len(starts), max_size=len(starts)))
    offsets = np.array(data.draw(st.lists(st.integers(-8, 8), min_size=1, max_size=5)), np.int64)
    s, e = np.array(starts, np.int64), np.array(starts, np.int64) + lengths
    anchors = np.array([data.draw(st.integers(a, b - 1)) for a, b in zip(s, e)], np.int64)
    indices, is_pad = window_indices(anchors, s, e, offsets)
    for b in range(len(s)):
        for t, o in enumerate(offsets.tolist()):
            want = anchors[b] + o
            assert indices[b, t] == min(max(want, s[b]), e[b] - 1)
            assert is_pad[b, t] == (not s[b] <= want < e[b])


def test_the_anchor_index_is_cached_until_the_table_changes():
    table = EpisodeTable()
    table.on_extend(0)
    table.end_episode(5)
    first = table.anchor_index(0, 2)
    assert table.anchor_index(0, 2) is first
    table.on_extend(5)
    assert table.anchor_index(0, 2) is first  # the open episode is not in the index
    table.end_episode(9)
    second = table.anchor_index(0, 2)
    assert second is not first and second.cumulative.tolist() == [0, 3, 5]
    table.drop_before(6)
    assert table.anchor_index(0, 2).cumulative.tolist() == [0, 2]


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
