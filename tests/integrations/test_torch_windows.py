"""ReplayBufferDataset of windows and of selected episodes: every anchor once per epoch, with workers."""

import multiprocessing as mp

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from trajstore.training.torch import ReplayBufferDataset  # noqa: E402

SPACE = DictSpace({"step_id": BoxSpace(0, 2**40, (), np.int64), "action": BoxSpace(-1e6, 1e6, (2,), np.float32)})
LENGTHS = [5, 9, 3, 12]
DELTA = {"step_id": [-1, 0], "action": range(4)}


def make(path):
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, multiprocessing=True,
                             **dict_storage_kwargs_from_space(SPACE))
    g = 0
    for k, n in enumerate(LENGTHS):
        ids = np.arange(g, g + n, dtype=np.int64)
        rb.extend({"step_id": ids, "action": np.stack([ids, -ids], 1).astype(np.float32)})
        rb.end_episode(good=k != 1)
        g += n
    return rb


def reference(rb, pad, episodes=None):
    """(anchor, its episode's [start, stop)) for every valid anchor, in step order."""
    before, after = (0, 0) if pad else (1, 3)
    return [(a, e.start, e.stop) for e in rb.episodes if episodes is None or e.id in episodes
            for a in range(e.start + before, e.stop - after)]


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
@pytest.mark.parametrize("pad", [True, False])
def test_two_workers_read_every_anchor_once_per_epoch(tmp_path, start_method, pad):
    with make(tmp_path / "rb") as rb:
        dataset = ReplayBufferDataset(rb, delta_indices=DELTA, pad=pad)
        expected = reference(rb, pad)
        assert len(dataset) == len(expected)
        loader = DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2,
                            multiprocessing_context=mp.get_context(start_method),
                            generator=torch.Generator().manual_seed(0))
        for _ in range(2):  # two epochs
            anchors = []
            for batch in loader:
                assert batch["step_id"].shape[1:] == (2,) and batch["action"].shape[1:] == (4, 2)
                assert batch["is_pad"]["action"].dtype == torch.bool and batch["is_pad"]["action"].shape[1:] == (4,)
                for ids, act, pad_act in zip(batch["step_id"].numpy(), batch["action"].numpy(),
                                             batch["is_pad"]["action"].numpy()):
                    anchor = int(ids[1])
                    start, stop = next((s, e) for a, s, e in expected if a == anchor)
                    want = np.clip(anchor + np.arange(4), start, stop - 1)
                    np.testing.assert_array_equal(act[:, 0], want)
                    np.testing.assert_array_equal(pad_act, want != anchor + np.arange(4))
                    anchors.append(anchor)
            assert sorted(anchors) == [a for a, _, _ in expected]


def test_item_order_and_selected_episodes(tmp_path):
    with make(tmp_path / "rb") as rb:
        good = rb.select_episodes(lambda e: e.data["good"])
        windows = ReplayBufferDataset(rb, delta_indices=DELTA, pad=False, episodes=good)
        expected = reference(rb, False, good)
        assert [int(windows[i]["step_id"][1]) for i in range(len(windows))] == [a for a, _, _ in expected]
        steps = ReplayBufferDataset(rb, episodes=good)
        ids = [int(steps[i]["step_id"]) for i in range(len(steps))]
        assert ids == [a for e in rb.episodes if e.id in good for a in range(e.start, e.stop)]
        batch = steps.__getitems__([0, len(steps) - 1])
        assert [int(b["step_id"]) for b in batch] == [ids[0], ids[-1]]
        with pytest.raises(TypeError):
            ReplayBufferDataset(rb, pad=False)
        with pytest.raises(ValueError):
            ReplayBufferDataset(rb, delta_indices={"nope": [0]})
