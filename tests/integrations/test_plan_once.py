"""The window plan is built once per dataset: the torch dataset and the Ray rows check their request
when they are made and reuse it for every ``len()`` and batch (a rebuilt plan would be counted)."""

import sys

import numpy as np
import pytest

from trajstore.errors import UnknownLeafError
from trajstore.replay_buffer import ReplayBuffer, window_plan as plan_module
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
from trajstore.training._ray_rows import make_request, read_rows

SPACE = DictSpace({"step_id": BoxSpace(0, 2**40, (), np.int64), "action": BoxSpace(-1e6, 1e6, (2,), np.float32)})
LENGTHS = [5, 9, 3, 12]
DELTA = {"step_id": [-1, 0], "action": range(4)}


def make(path):
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, **dict_storage_kwargs_from_space(SPACE))
    g = 0
    for n in LENGTHS:
        ids = np.arange(g, g + n, dtype=np.int64)
        rb.extend({"step_id": ids, "action": np.stack([ids, -ids], 1).astype(np.float32)})
        rb.end_episode()
        g += n
    return rb


@pytest.fixture
def plans(monkeypatch):
    """Counts calls of ``window_plan``, wherever a trajstore module imported it from."""
    original, calls = plan_module.window_plan, []

    def counted(*args, **kwargs):
        calls.append(args[1] if len(args) > 1 else kwargs.get("delta_indices"))
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("trajstore") and getattr(module, "window_plan", None) is original:
            monkeypatch.setattr(module, "window_plan", counted)
    return calls


def test_torch_dataset_builds_its_window_plan_once(tmp_path, plans):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from trajstore.training.torch import ReplayBufferDataset

    with make(tmp_path / "rb") as rb:
        dataset = ReplayBufferDataset(rb, delta_indices=DELTA, pad=True, episodes=[1, 3])
        assert len(plans) == 1
        batches = list(DataLoader(dataset, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)))
        assert len(dataset) == 21 and len(batches) == 6  # episodes 1 and 3: 9 + 12 anchors
        assert len(plans) == 1  # 6 batches and 2 len() later: still the one plan
        seen = sorted(int(v) for b in batches for v in b["step_id"][:, 1])
        assert seen == list(range(5, 14)) + list(range(17, 29))  # each anchor once, from its own step


def test_ray_rows_build_the_plan_on_the_driver_only(tmp_path, plans):
    with make(tmp_path / "rb") as rb:
        request = make_request(rb, str(tmp_path / "rb"), storage_options=None, columns=["action"], episodes=None,
                               window=DELTA, pad=False)
        assert len(plans) == 1
    with request.open() as rb:  # what a read task does: the request travels, the plan is not rebuilt
        rows = [read_rows(rb, request, lo, min(lo + 4, request.total)) for lo in range(0, request.total, 4)]
    assert len(plans) == 1
    actions = np.concatenate([r["action"] for r in rows])
    starts = [0, 5, 14, 17]
    anchors = [s + a for s, n in zip(starts, LENGTHS) for a in range(1, n - 3)]  # pad=False: 1 before, 3 after
    assert request.total == len(anchors)
    assert actions.shape == (len(anchors), 4, 2)
    assert actions[:, :, 0].tolist() == [[a + k for k in range(4)] for a in anchors]
    # the column asked for and the row's place (step_id is not read)
    assert set(rows[0]) == {"action", "is_pad/action", "index", "episode", "step"}
    assert np.concatenate([r["index"] for r in rows]).tolist() == anchors


def test_unknown_names_raise_unknown_leaf_error(tmp_path):
    torch = pytest.importorskip("torch")  # noqa: F841
    from trajstore.training.torch import ReplayBufferDataset

    with make(tmp_path / "rb") as rb:
        with pytest.raises(UnknownLeafError, match="nope"):
            ReplayBufferDataset(rb, delta_indices={"nope": [0]})
        with pytest.raises(UnknownLeafError, match="observation"):
            make_request(rb, "x", storage_options=None, columns=["observation/pixels"], episodes=None, window=None,
                         pad=None)


def test_step_space_is_the_one_builder_and_names_unknown_image_keys():
    from trajstore.recording.step import step_space

    obs = DictSpace({"pos": BoxSpace(-1, 1, (2,), np.float32), "cam": BoxSpace(0, 255, (4, 4, 3), np.uint8)})
    space = step_space(obs, BoxSpace(-1, 1, (2,), np.float32), image_keys=["cam"], render_key="frame",
                       frame_shape=(8, 8, 3), fps=10)
    assert sorted(space.spaces) == ["action", "observation", "reward", "terminated", "truncated"]
    assert space.spaces["observation"].spaces["cam"].metadata.to_json() == {"kind": "image", "layout": "HWC", "fps": 10}
    assert space.spaces["observation"].spaces["frame"].shape == (8, 8, 3)
    assert space.spaces["reward"].dtype == np.float32
    with pytest.raises(UnknownLeafError, match="image_keys.*camera"):
        step_space(obs, BoxSpace(-1, 1, (2,), np.float32), image_keys=["camera"])
