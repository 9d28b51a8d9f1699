"""``sample_windows`` against a plain reference over random episode layouts, and only the
requested (leaf, offset) steps are read."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trajstore.storages.hdf5._rows as hdf5_module
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.window_plan import window_plan
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, ImageStorage, MemmapStorage, dict_storage_kwargs_from_space
from trajstore.storages.hdf5._direct import DirectRows

INT = dict(low=-(1 << 40), high=1 << 40, dtype=np.int64)  # states hold negated step numbers
SPACE = DictSpace({"anchor": BoxSpace(shape=(), **INT),
                   "observation": DictSpace({"state": BoxSpace(shape=(2,), **INT), "other": BoxSpace(shape=(), **INT)}),
                   "action": BoxSpace(shape=(), **INT)})
MAP = {"anchor": MemmapStorage, "observation/state": MemmapStorage, "observation/other": MemmapStorage,
       "action": MemmapStorage}


def steps(g, n):
    ids = np.arange(g, g + n, dtype=np.int64)
    return {"anchor": ids, "observation": {"state": np.stack([ids, -ids], 1), "other": ids * 3}, "action": ids * 5}


def build(capacity, lengths, open_len):
    rb = ReplayBuffer.create(DictStorage, SPACE, capacity=capacity, storage_cls_map=MAP)
    g = 0
    for n in lengths:
        rb.extend(steps(g, n))
        rb.end_episode()
        g += n
    if open_len:
        rb.extend(steps(g, open_len))
    return rb


def reference_anchors(rb, before, after):
    """Every valid anchor (logical) in step order with its episode's range, from the Episode objects."""
    return np.array([(a, e.start, e.stop) for e in rb.episodes for a in range(e.start + before, e.stop - after)],
                    np.int64).reshape(-1, 3)


OFFSETS = st.lists(st.integers(-5, 5), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(capacity=st.one_of(st.none(), st.integers(4, 40)), lengths=st.lists(st.integers(1, 9), max_size=8),
       open_len=st.integers(0, 5), obs=OFFSETS, action=OFFSETS, pad=st.booleans(), seed=st.integers(0, 2**31))
def test_windows_match_the_reference(capacity, lengths, open_len, obs, action, pad, seed):
    rb = build(capacity, lengths, open_len)
    delta = {"observation": obs, "action": action}
    every = obs + action + [0]
    before, after = (0, 0) if pad else (-min(every), max(every))
    ref = reference_anchors(rb, before, after)
    if len(ref) == 0:
        with pytest.raises(ValueError, match="longest episode"):
            rb.sample_windows(8, delta_indices=delta, pad=pad, rng=np.random.default_rng(seed))
        return
    data, is_pad = rb.sample_windows(8, delta_indices=delta, pad=pad, rng=np.random.default_rng(seed))
    drawn = ref[np.random.default_rng(seed).integers(0, len(ref), size=8)]
    first = rb.total_steps - len(rb)  # step number of logical index 0
    np.testing.assert_array_equal(data["anchor"], drawn[:, 0] + first)
    for name, offsets, value in [("observation", obs, data["observation"]["other"] // 3),
                                 ("action", action, data["action"] // 5)]:
        want = drawn[:, :1] + np.array(offsets)
        clamped = np.clip(want, drawn[:, 1:2], drawn[:, 2:3] - 1)
        np.testing.assert_array_equal(value, clamped + first)
        np.testing.assert_array_equal(is_pad[name], clamped != want)
        assert pad or not is_pad[name].any()
    assert data["observation"]["state"].shape == (8, len(obs), 2)
    np.testing.assert_array_equal(data["observation"]["state"][..., 1], -data["observation"]["other"] // 3)
    rb.close()


@settings(max_examples=60, deadline=None)
@given(capacity=st.one_of(st.none(), st.integers(4, 40)), lengths=st.lists(st.integers(1, 9), max_size=8),
       open_len=st.integers(0, 5), window=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_the_plain_form_draws_what_it_drew_before(capacity, lengths, open_len, window, seed):
    """The enumeration of every window start, indexed by one rng draw, is what sample_windows(B, window) did."""
    rb = build(capacity, lengths, open_len)
    starts = np.array([a for e in rb.episodes for a in range(e.start, e.stop - window + 1)], np.int64)
    if len(starts) == 0:
        with pytest.raises(ValueError, match="longest episode"):
            rb.sample_windows(5, window, rng=np.random.default_rng(seed))
        return
    out = rb.sample_windows(5, window, rng=np.random.default_rng(seed))
    chosen = starts[np.random.default_rng(seed).integers(0, len(starts), size=5)]
    first = rb.total_steps - len(rb)
    np.testing.assert_array_equal(out["anchor"], chosen[:, None] + np.arange(window) + first)
    assert out["observation"]["state"].shape == (5, window, 2)
    rb.close()


def test_unnamed_leaves_are_read_at_the_anchor_and_names_may_be_leaves():
    rb = build(None, [6, 4], 0)
    data, is_pad = rb.sample_windows(16, delta_indices={"observation/state": [0], "action": range(-2, 1)},
                                     rng=np.random.default_rng(0))
    assert data["anchor"].shape == (16,) and data["observation"]["other"].shape == (16,)
    assert data["observation"]["state"].shape == (16, 1, 2) and data["action"].shape == (16, 3)
    np.testing.assert_array_equal(data["observation"]["state"][:, 0, 0], data["anchor"])
    assert set(is_pad) == {"observation/state", "action"} and is_pad["action"].shape == (16, 3)
    rb.close()


@pytest.mark.parametrize("kwargs, error, match", [
    ({}, TypeError, "window length or delta_indices"),
    ({"window": 2, "delta_indices": {"action": [0]}}, TypeError, "not both"),
    ({"window": 2, "pad": True}, TypeError, "pad goes with delta_indices"),
    ({"window": 0}, ValueError, "window"),
    ({"delta_indices": {}}, ValueError, "empty"),
    ({"delta_indices": ["action"]}, TypeError, "mapping"),
    ({"delta_indices": {"actoin": [0]}}, ValueError, "actoin"),
    ({"delta_indices": {"observation": [0], "observation/state": [1]}}, ValueError, "twice"),
    ({"delta_indices": {"action": []}}, ValueError, "non-empty"),
    ({"delta_indices": {"action": [0.5]}}, ValueError, "ints"),
    ({"delta_indices": {"action": [0]}, "batch_size": 0}, ValueError, "batch_size"),
])
def test_bad_requests_raise(kwargs, error, match):
    rb = build(None, [6], 0)
    batch_size = kwargs.pop("batch_size", 4)
    with pytest.raises(error, match=match):
        rb.sample_windows(batch_size, **kwargs)
    rb.close()


def test_leaves_sharing_offsets_form_one_group():
    plan = window_plan(SPACE, {"observation": [-1, 0], "action": [-1, 0]})
    assert [(g.offsets.tolist(), g.leaves, g.windowed) for g in plan.groups] == [
        ([0], (0,), (False,)), ([-1, 0], (1, 2, 3), (True, True, True))]
    assert plan.names == {"observation": 1, "action": 1} and (plan.before, plan.after) == (1, 0)


def test_only_the_requested_leaf_offsets_are_read(tmp_path, monkeypatch):
    space = DictSpace({
        "observation": DictSpace({"pixels": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata={"kind": "image"}),
                                  "state": BoxSpace(-1e9, 1e9, (), np.float32)}),
        "action": BoxSpace(-1e9, 1e9, (), np.float32),
        "reward": BoxSpace(-1e9, 1e9, (), np.float32),
    })
    rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", capacity=30,
                             **dict_storage_kwargs_from_space(space))
    g = 0
    for n in [9, 12, 7, 10, 5]:  # 43 steps in a ring of 30: wrapped, the oldest episode cut
        ids = np.arange(g, g + n, dtype=np.float32)
        rb.extend({"observation": {"pixels": np.zeros((n, 8, 8, 3), np.uint8), "state": ids},
                   "action": ids, "reward": ids})
        rb.end_episode()
        g += n
    pixel_slots, datasets = [], []
    original_read, original_rows = ImageStorage._read_into, hdf5_module.read_rows

    def counting_read(self, slots, out, dest=None):  # every frame decode, in slot or in request order
        pixel_slots.append(slots.copy())
        return original_read(self, slots, out, dest)

    def counting_rows(ds, sel, row_bytes):
        datasets.append((ds.name, sel.slots.copy()))
        return original_rows(ds, sel, row_bytes)

    original_direct = DirectRows.read

    def counting_direct(self, i, slots):  # numeric leaves on disk are read from the file's bytes
        datasets.append((self._leaves[i].ds.name, slots.copy()))
        return original_direct(self, i, slots)

    monkeypatch.setattr(ImageStorage, "_read_into", counting_read)
    monkeypatch.setattr(hdf5_module, "read_rows", counting_rows)
    monkeypatch.setattr(DirectRows, "read", counting_direct)
    data, _ = rb.sample_windows(32, delta_indices={"observation/pixels": [-1], "observation/state": [-3, -1, 0],
                                                   "action": range(4)}, rng=np.random.default_rng(3))
    monkeypatch.undo()
    first = rb.total_steps - len(rb)
    anchors = data["reward"].astype(np.int64) - first  # unnamed: read at the anchor

    def slots(offsets):
        ep = {a: next(e for e in rb.episodes if e.start <= a < e.stop) for a in set(anchors.tolist())}
        wanted = {min(max(a + o, ep[a].start), ep[a].stop - 1) for a in anchors.tolist() for o in offsets}
        return sorted((i + rb._views.current().ring.head) % 30 for i in wanted)

    assert len(pixel_slots) == 1 and pixel_slots[0].tolist() == slots([-1])
    by_dataset = {}
    for name, read in datasets:
        by_dataset.setdefault(name.rsplit("/", 1)[-1], []).append(sorted(read.tolist()))
    assert {k: len(v) for k, v in by_dataset.items()} == {"state": 1, "action": 1, "reward": 1}, by_dataset
    for leaf, offsets in [("state", [-3, -1, 0]), ("action", range(4)), ("reward", [0])]:
        assert by_dataset[leaf][0] == slots(offsets), leaf
    np.testing.assert_array_equal(data["action"][:, 0], data["reward"])
    rb.close()
