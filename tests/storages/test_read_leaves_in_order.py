"""``SpaceStorage.read_leaves_in_order``: the leaves of a selection in its requested order.

The default (read in slot order, then ``[sel.order]``), ``DictStorage`` passing it to each sub-storage and
``ImageStorage`` decoding each frame straight into its first requested row must all give exactly what
``read_leaves`` then ``[sel.order]`` gives: same values, dtypes and shapes, with repeats, unwritten slots,
a subset of leaves (``which``), and through a replay buffer's ring (``rb[idx]``, ``sample``, windows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, ImageStorage, dict_storage_kwargs_from_space
from trajstore.storages._selection import select
from trajstore.storages.base import SpaceStorage
from trajstore.storages.frames import image as image_module

H, W = 16, 24
CAM = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"})
SPACE = DictSpace({"cam": CAM, "state": BoxSpace(-1, 1, (3,), np.float32),
                   "step": BoxSpace(0, 10_000, (), np.int64)})
KWARGS = dict_storage_kwargs_from_space(SPACE, kind_kwargs={"image": {"quality": 80, "chunk_bytes": 3_000}})


def values(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    cam = np.stack([x * 9, y * 11, (x + y) * 4], -1)[None] + rng.integers(0, 60, (n, 1, 1, 3))
    return {"cam": np.clip(cam, 0, 255).astype(np.uint8),
            "state": rng.uniform(-1, 1, (n, 3)).astype(np.float32), "step": np.arange(n, dtype=np.int64)}


def reordered(storage: SpaceStorage, sel, which=None) -> list[np.ndarray]:
    leaves = storage.read_leaves(sel, which)
    return leaves if sel.order is None else [v[sel.order] for v in leaves]


def test_dict_storage_in_order_equals_read_then_reorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = DictStorage.create(SPACE, capacity=30, cache_path=tmp_path / "s", **KWARGS)
    s.set(np.arange(24), values(24, 1))  # slots 24..29 never written
    decoded_into: list[object] = []
    real = ImageStorage._read_into
    monkeypatch.setattr(ImageStorage, "_read_into", lambda self, slots, out, dest=None: (
        decoded_into.append(dest), real(self, slots, out, dest))[1])
    rng = np.random.default_rng(2)
    cases = [rng.integers(0, 30, 80), np.array([29, 3, 3, 0, 29, 3]), np.arange(30), np.array([7]),
             np.array([], np.int64)]
    for idx in cases:
        sel = select(idx, 30)
        for which in (None, [0], [1, 2], [0, 2], []):
            got, want = s.read_leaves_in_order(sel, which), reordered(s, sel, which)
            assert len(got) == len(want) == (3 if which is None else len(which))
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape == (len(idx), *w.shape[1:])
                np.testing.assert_array_equal(g, w)
    # the camera leaf of a reordered request was decoded into request rows (a dest given), not copied after
    assert any(d is not None for d in decoded_into)
    got = s.get(np.array([5, 1, 5]))
    np.testing.assert_array_equal(got["step"], [5, 1, 5])
    np.testing.assert_array_equal(got["cam"][0], got["cam"][2])
    np.testing.assert_array_equal(got["cam"][1], s.get(1)["cam"])
    one = s.get(4)  # a scalar selection drops the leading axis
    assert one["cam"].shape == (H, W, 3) and one["state"].shape == (3,) and one["step"] == 4
    assert not s.get(np.array([27, 25, 27]))["cam"].any()  # never written: zeros, in any order
    s.close()


def test_default_is_read_then_reorder_for_a_plain_storage(tmp_path: Path) -> None:
    state = BoxSpace(-1, 1, (3,), np.float32)
    space = DictSpace({"state": state})
    s = DictStorage.create(space, capacity=10, cache_path=tmp_path / "s", **dict_storage_kwargs_from_space(space))
    data = np.random.default_rng(3).uniform(-1, 1, (10, 3)).astype(np.float32)
    s.set(np.arange(10), {"state": data})
    [sub] = s.parts().values()
    assert type(sub).read_leaves_in_order is SpaceStorage.read_leaves_in_order
    idx = np.array([9, 0, 9, 4])
    [got] = sub.read_leaves_in_order(select(idx, 10))
    np.testing.assert_array_equal(got, data[idx])
    assert got.dtype == np.float32
    s.close()


def test_replay_buffer_reads_equal_the_reordering_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ring that has wrapped: every read kind gives exactly what reading in slot order then reordering gave."""
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=tmp_path / "rb", capacity=40, **KWARGS)
    data = values(97, 5)
    for e in range(0, 97, 7):
        rb.extend({k: v[e:e + 7] for k, v in data.items()})
        rb.end_episode()
    idx = np.random.default_rng(6).integers(0, len(rb), 64)

    def reads() -> list:
        out = [rb[idx], rb[np.array([3, 3, 0])], rb[int(idx[0])],
               rb.sample(32, rng=np.random.default_rng(7)),
               rb.sample_windows(16, 4, rng=np.random.default_rng(8)),
               rb.sample_windows(16, delta_indices={"cam": [-2, 0], "state": [0, 1]}, pad=True,
                                 rng=np.random.default_rng(9)),
               rb.windows_at(np.array([5, 0, 5, 2]), {"cam": [-1, 0], "step": [0]})]
        return out

    now = reads()
    with monkeypatch.context() as m:  # the earlier path: sorted read then [sel.order], everywhere
        m.setattr(ImageStorage, "read_leaves_in_order", SpaceStorage.read_leaves_in_order)
        m.setattr(DictStorage, "read_leaves_in_order", SpaceStorage.read_leaves_in_order)
        before = reads()
    np.testing.assert_array_equal(now[0]["step"], data["step"][-40:][idx])  # the newest 40 steps, in order
    for a, b in zip(now, before):
        _same(a, b)
    rb.close()


def _same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_image_module_keeps_its_earlier_name() -> None:
    assert image_module.ImageStorage.read_in_order is image_module.ImageStorage.read_leaves_in_order
