"""A CHW camera stored as PNG frames: dataset, sample and sample_windows hand CHW float32 in [0, 1]
(stored / 255), the default is as stored; the normaliser skips images or normalises them per channel."""

from __future__ import annotations

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

H, W, N = 6, 8, 10
SPACE = DictSpace({"observation": DictSpace({
    "pixels": BoxSpace(0, 255, (3, H, W), np.uint8, metadata={"kind": "image", "layout": "CHW"}),
    "state": BoxSpace(-100, 100, (2,), np.float32)}),
    "action": BoxSpace(-1, 1, (2,), np.float32)})


def frames():
    return np.random.default_rng(0).integers(0, 256, (N, 3, H, W), dtype=np.uint8)


@pytest.fixture
def rb(tmp_path):
    state = np.stack([np.arange(N), -2 * np.arange(N)], 1).astype(np.float32)
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=tmp_path / "rb", capacity=None,
                             **dict_storage_kwargs_from_space(SPACE, kind_kwargs={"image": {"format": "PNG"}}))
    rb.extend({"observation": {"pixels": frames(), "state": state}, "action": state / 100})
    rb.end_episode()
    yield rb
    rb.close()


def test_sample_and_windows_give_chw_float_equal_to_stored_over_255(rb):
    want = frames().astype(np.float32) / np.float32(255)
    batch, idx = rb.sample(5, rng=np.random.default_rng(1), return_indices=True, image_layout="CHW",
                           image_dtype="float32")
    got = batch["observation"]["pixels"]
    assert got.dtype == np.float32 and got.shape == (5, 3, H, W) and 0 <= got.min() and got.max() <= 1
    np.testing.assert_array_equal(got, want[idx])
    np.testing.assert_array_equal(batch["observation"]["state"][:, 0], idx)  # other leaves as they are
    plain = rb.sample(4, rng=np.random.default_rng(1))  # the default: as stored (CHW uint8, like rb[i])
    assert plain["observation"]["pixels"].dtype == np.uint8 and plain["observation"]["pixels"].shape == (4, 3, H, W)
    hwc = rb.sample(3, rng=np.random.default_rng(2), image_layout="HWC", return_indices=True)
    np.testing.assert_array_equal(hwc[0]["observation"]["pixels"], frames()[hwc[1]].transpose(0, 2, 3, 1))
    win = rb.sample_windows(4, 3, rng=np.random.default_rng(3), image_layout="CHW", image_dtype="float32")
    start = win["observation"]["state"][:, 0, 0].astype(int)
    assert win["observation"]["pixels"].shape == (4, 3, 3, H, W)
    for b, s in enumerate(start):
        np.testing.assert_array_equal(win["observation"]["pixels"][b], want[s:s + 3])
    data, is_pad = rb.sample_windows(6, delta_indices={"observation/pixels": [-1, 0]}, rng=np.random.default_rng(4),
                                     image_dtype="float32")
    anchor = data["observation"]["state"][:, 0].astype(int)
    np.testing.assert_array_equal(data["observation"]["pixels"][:, 1], want[anchor])
    np.testing.assert_array_equal(data["observation"]["pixels"][:, 0], want[np.maximum(anchor - 1, 0)])
    assert is_pad["observation/pixels"][:, 0].tolist() == (anchor == 0).tolist()
    with pytest.raises(ValueError, match="image_layout must be one of"):
        rb.sample(2, image_layout="NCHW")
    with pytest.raises(ValueError, match="image_dtype must be one of"):
        rb.sample_windows(2, 2, image_dtype="float16")


def test_dataset_gives_chw_float_and_the_normaliser_skips_or_normalises_per_channel(rb):
    torch = pytest.importorskip("torch")
    from trajstore.training.torch import Normalizer, ReplayBufferDataset

    ds = ReplayBufferDataset(rb, image_layout="CHW", image_dtype="float32")
    item = ds[7]
    torch.testing.assert_close(item["observation"]["pixels"], torch.from_numpy(frames()[7]).float() / 255,
                               rtol=0, atol=0)
    stats = rb.stats()
    cam = stats["observation/pixels"]
    assert cam.reduction == "per_channel" and tuple(cam.broadcast_shape) == (3, 1, 1)
    np.testing.assert_allclose(cam.mean, frames().mean(axis=(0, 2, 3)))  # per channel over steps and pixels
    np.testing.assert_allclose(cam.std, frames().std(axis=(0, 2, 3)))
    batch = {"observation": {k: v[None] for k, v in item["observation"].items()}, "action": item["action"][None]}
    skipped = ds.normalizer().normalize(batch)  # images="skip" by default: the frames pass through
    assert skipped["observation"]["pixels"] is batch["observation"]["pixels"]
    state = stats["observation/state"]
    torch.testing.assert_close(skipped["observation"]["state"].double(),
                               (batch["observation"]["state"].double() - torch.as_tensor(state.mean))
                               / torch.as_tensor(state.std), rtol=1e-6, atol=1e-6)
    per_channel = ds.normalizer(images="per_channel").normalize(batch)["observation"]["pixels"]
    mean = torch.as_tensor(cam.mean / 255)[:, None, None]
    std = torch.as_tensor(cam.std / 255)[:, None, None]
    want = (torch.from_numpy(frames()[7]).double() / 255 - mean) / std
    torch.testing.assert_close(per_channel[0].double(), want, rtol=1e-5, atol=1e-5)
    # the whole buffer normalised per channel: mean 0, std 1 in every channel
    every = torch.from_numpy(frames()).float() / 255
    norm = Normalizer(stats, image_keys=ds.image_keys, image_layout="CHW", image_dtype="float32", images="per_channel")
    out = norm.normalize({"observation": {"pixels": every}})["observation"]["pixels"]
    torch.testing.assert_close(out.mean(dim=(0, 2, 3)).double(), torch.zeros(3, dtype=torch.float64), atol=1e-5,
                               rtol=0)
    torch.testing.assert_close(out.std(dim=(0, 2, 3), correction=0).double(), torch.ones(3, dtype=torch.float64),
                               atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="images must be one of"):
        ds.normalizer(images="whole")
