"""Episode selection (select_episodes, split_episodes, episodes=), sample(return_indices=True), and
every anchor numbered once (count_anchors, anchors_at, windows_at)."""

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"observation": BoxSpace(-1e6, 1e6, (), np.float64), "action": BoxSpace(-1e6, 1e6, (), np.float64),
                   "reward": BoxSpace(-1e6, 1e6, (), np.float32), "terminated": BoxSpace(0, 1, (), np.uint8),
                   "truncated": BoxSpace(0, 1, (), np.uint8)})


def build(lengths, capacity=None, open_len=0):
    rb = ReplayBuffer.create(DictStorage, SPACE, capacity=capacity, **dict_storage_kwargs_from_space(SPACE))
    g = 0
    for k, n in enumerate(lengths + ([open_len] if open_len else [])):
        ids = np.arange(g, g + n, dtype=np.float64)
        rb.extend({"observation": ids, "action": ids, "reward": np.zeros(n, np.float32),
                   "terminated": np.zeros(n, np.uint8), "truncated": np.zeros(n, np.uint8)})
        g += n
        if k < len(lengths):
            rb.end_episode(final_observation=float(g), success=k % 2 == 0)
    return rb


def test_sample_returns_the_logical_indices_it_read():
    rb = build([4, 6], capacity=8)
    batch, idx = rb.sample(50, rng=np.random.default_rng(0), return_indices=True)
    assert idx.dtype == np.int64 and idx.shape == (50,)
    np.testing.assert_array_equal(batch["observation"], rb[idx]["observation"])


def test_select_and_split_by_episode():
    rb = build([3, 4, 5, 6, 7], open_len=2)
    assert rb.select_episodes(lambda e: e.data.get("success", False)) == [0, 2, 4]
    assert rb.select_episodes(lambda e: not e.done) == [5]
    train, val = rb.split_episodes(0.4, seed=3)
    assert sorted(train + val) == [0, 1, 2, 3, 4, 5] and len(val) == 2 and not set(train) & set(val)
    assert (train, val) == rb.split_episodes(0.4, seed=3)
    assert rb.split_episodes(0.0, seed=1) == ([0, 1, 2, 3, 4, 5], [])
    with pytest.raises(ValueError, match="val_fraction"):
        rb.split_episodes(1.5, seed=0)


def test_episodes_restricts_every_sampler():
    rb = build([3, 4, 5, 6], capacity=16, open_len=3)  # 21 steps: episode 0 and most of 1 are gone
    held = {e.id: e for e in rb.episodes}
    chosen = [1, 3, 4]  # 4 is the open one
    allowed = {float(v) for i in chosen for v in rb[held[i].start:held[i].stop]["observation"]}
    rng = np.random.default_rng(0)
    _, idx = rb.sample(300, rng=rng, episodes=chosen, return_indices=True)
    assert {float(v) for v in rb[idx]["observation"]} == allowed
    windows = rb.sample_windows(300, 2, rng=rng, episodes=chosen)
    assert {float(v) for v in windows["observation"][:, 0]} <= allowed
    data, _ = rb.sample_windows(300, delta_indices={"action": [0, 1]}, rng=rng, episodes=[3])
    assert {float(v) for v in data["observation"]} == {float(v) for v in rb[held[3].start:held[3].stop]["observation"]}
    out = rb.sample_transitions(300, rng=rng, episodes=[1])
    assert {float(v) for v in out["observation"]} == {float(v) for v in rb[held[1].start:held[1].stop]["observation"]}
    with pytest.raises(ValueError, match="not held"):
        rb.sample(4, episodes=[0])
    with pytest.raises(TypeError):
        rb.sample(4, episodes="1")


@pytest.mark.parametrize("pad", [True, False])
@pytest.mark.parametrize("episodes", [None, [2, 4], [3, 4]])
def test_every_anchor_is_numbered_once_in_step_order(pad, episodes):
    rb = build([2, 5, 1, 6], capacity=12, open_len=3)
    delta = {"observation": [-1, 0], "action": [0, 1, 2]}
    n = rb.count_anchors(delta, pad=pad, episodes=episodes)
    anchors = rb.anchors_at(np.arange(n), delta, pad=pad, episodes=episodes)
    expected = [a for e in rb.episodes if episodes is None or e.id in episodes
                for a in range(e.start + (0 if pad else 1), e.stop - (0 if pad else 2))]
    assert anchors.tolist() == expected
    data, is_pad = rb.windows_at(np.arange(n)[::-1], delta, pad=pad, episodes=episodes)
    np.testing.assert_array_equal(data["reward"], rb[anchors[::-1]]["reward"])
    assert is_pad["action"].shape == (n, 3)
    with pytest.raises(IndexError):
        rb.windows_at([n], delta, pad=pad, episodes=episodes)


def test_text_selections_of_a_ring_check_ranges_against_the_held_ids():
    import warnings

    from trajstore.errors import InvalidValueError, SelectionWarning
    from trajstore.replay_buffer.episode_query import parse_selection

    rb = build([3, 4, 5, 6], capacity=12)  # episode 0 is dropped, 1 partly overwritten
    assert [e.id for e in rb.episodes] == [1, 2, 3]
    assert parse_selection("1-3").select(rb.episodes) == [1, 2, 3]
    with pytest.raises(InvalidValueError, match=r"episodes \[0, 4, 5, 6, 7\] and 999999999993 more are not held "
                                                r"\(held ids: 1\.\.3\)"):
        parse_selection("0-1000000000000").select(rb.episodes)
    with pytest.warns(SelectionWarning, match=r"'succes' \(did you mean 'success'\?\)"):
        assert parse_selection("succes").select(rb.episodes) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_selection("success").select(rb.episodes) == [2]
