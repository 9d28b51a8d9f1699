"""ReplayBufferDataset camera frames as HWC/CHW, uint8/float32; images_to_float; Normalizer in each layout."""

import multiprocessing as mp

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from trajstore.training.torch import Normalizer, ReplayBufferDataset, images_to_float  # noqa: E402

H, W = 6, 10
SPACE = DictSpace({
    "observation": DictSpace({
        "pixels": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC"}),
        "depth": BoxSpace(0, 255, (H, W), np.uint8, metadata={"kind": "depth"}),
        "state": BoxSpace(-1e3, 1e3, (2,), np.float32)}),
    "action": BoxSpace(0, 255, (2,), np.uint8)})
LENGTHS = [5, 7]
DELTA = {"observation/pixels": [-1, 0, 1], "action": [0, 1]}


def make(path):
    rb = ReplayBuffer.create(DictStorage, SPACE, cache_path=path, multiprocessing=True,
                             **dict_storage_kwargs_from_space(SPACE))
    rng = np.random.default_rng(0)
    g = 0
    for n in LENGTHS:
        pix = rng.integers(0, 256, (n, H, W, 3), dtype=np.uint8)
        pix[:, :, :, 0] = np.arange(g, g + n)[:, None, None] * 20  # channel 0 codes the step
        rb.extend({"observation": {"pixels": pix, "depth": pix[..., 1],
                                   "state": np.stack([np.arange(g, g + n)] * 2, 1).astype(np.float32)},
                   "action": np.full((n, 2), 7, np.uint8)})
        rb.end_episode()
        g += n
    return rb


def _frames(item):
    return item["observation"]["pixels"]


@pytest.mark.parametrize("windows", [False, True])
def test_layouts_and_dtypes_equal_hwc_uint8_transposed(tmp_path, windows):
    with make(tmp_path / "rb") as rb:
        kw = {"delta_indices": DELTA} if windows else {}
        base = ReplayBufferDataset(rb, **kw)
        assert base.image_keys == ["observation/pixels"]
        chw = ReplayBufferDataset(rb, image_layout="CHW", **kw)
        f32 = ReplayBufferDataset(rb, image_layout="CHW", image_dtype="float32", **kw)
        hwc32 = ReplayBufferDataset(rb, image_dtype="float32", **kw)
        lead = (3,) if windows else ()
        idx = list(range(len(base)))
        for a, b, c, d in zip(base.__getitems__(idx), chw.__getitems__(idx), f32.__getitems__(idx),
                              hwc32.__getitems__(idx)):
            ref = _frames(a)
            assert ref.dtype == torch.uint8 and ref.shape == (*lead, H, W, 3)
            want = ref.movedim(-1, -3)
            assert _frames(b).dtype == torch.uint8 and _frames(b).shape == (*lead, 3, H, W)
            assert torch.equal(_frames(b), want)
            assert _frames(c).dtype == torch.float32 and _frames(c).shape == (*lead, 3, H, W)
            assert torch.equal(_frames(c), want.to(torch.float32) / 255)
            assert float(_frames(c).min()) >= 0 and float(_frames(c).max()) <= 1
            assert torch.equal(_frames(d), ref.to(torch.float32) / 255)
            for other in (b, c, d):  # other leaves untouched: depth, uint8 action, is_pad
                assert torch.equal(other["observation"]["depth"], a["observation"]["depth"])
                assert other["observation"]["depth"].dtype == torch.uint8
                assert torch.equal(other["action"], a["action"]) and other["action"].dtype == torch.uint8
                if windows:
                    assert torch.equal(other["is_pad"]["observation/pixels"], a["is_pad"]["observation/pixels"])
        if windows:  # padding is kept: the first anchor of an episode repeats its frame at offset -1
            first = f32[0]
            assert first["is_pad"]["observation/pixels"].tolist() == [True, False, False]
            assert torch.equal(_frames(first)[0], _frames(first)[1])


def test_bad_options_are_refused(tmp_path):
    with make(tmp_path / "rb") as rb:
        with pytest.raises(ValueError, match="image_layout must be one of"):
            ReplayBufferDataset(rb, image_layout="NCHW")
        with pytest.raises(ValueError, match="image_dtype must be one of"):
            ReplayBufferDataset(rb, image_dtype="float16")
        with pytest.raises(ValueError, match="image_layout"):
            Normalizer(rb.stats(), image_layout="chw")
        assert ReplayBufferDataset(rb, image_dtype=np.float32).image_dtype == "float32"


def test_two_fork_workers_send_uint8_chw_and_the_helper_makes_floats(tmp_path):
    with make(tmp_path / "rb") as rb:
        ds = ReplayBufferDataset(rb, delta_indices=DELTA, image_layout="CHW")
        ref = ReplayBufferDataset(rb, delta_indices=DELTA)
        loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True,
                            multiprocessing_context=mp.get_context("fork"))
        seen = 0
        for start, batch in zip(range(0, len(ds), 4), loader):
            frames = batch["observation"]["pixels"]
            assert frames.dtype == torch.uint8 and frames.shape[1:] == (3, 3, H, W)
            out = images_to_float(batch, ds.image_keys, device="cpu")
            got = out["observation"]["pixels"]
            assert got.dtype == torch.float32 and got.shape == frames.shape
            assert 0 <= float(got.min()) and float(got.max()) <= 1
            want = torch.stack([_frames(ref[i]) for i in range(start, start + len(got))]).movedim(-1, -3)
            assert torch.equal(got, want.to(torch.float32) / 255)
            assert batch["observation"]["pixels"].dtype == torch.uint8  # the input is not modified
            assert out["action"].dtype == torch.uint8 and out["is_pad"]["action"].dtype == torch.bool
            seen += len(got)
        assert seen == len(ds)
        # keys=None: every uint8 tensor of >= 4 axes (the frames, not the (B, T, 2) action)
        auto = images_to_float(batch)
        assert auto["observation"]["pixels"].dtype == torch.float32 and auto["action"].dtype == torch.uint8
        with pytest.raises(KeyError, match="observation/missing"):
            images_to_float(batch, ["observation/missing"])
        with pytest.raises(TypeError, match="observation/state"):
            images_to_float(batch, ["observation/state"])


@pytest.mark.parametrize("mode", ["mean_std", "min_max"])
def test_normalizer_gives_the_same_values_in_every_layout_and_dtype(tmp_path, mode):
    with make(tmp_path / "rb") as rb:
        stats = rb.stats()
        assert tuple(stats["observation/pixels"].broadcast_shape) == (3,)
        base = ReplayBufferDataset(rb, delta_indices=DELTA)
        ref_norm = base.normalizer(mode, images="per_channel")
        idx = list(range(len(base)))
        ref = torch.stack([_frames(ref_norm.normalize(x)) for x in base.__getitems__(idx)])
        s = stats["observation/pixels"]
        mean = torch.as_tensor(s.mean, dtype=torch.float32)
        if mode == "mean_std":  # per channel, along the last axis of HWC frames
            raw = torch.stack([_frames(x) for x in base.__getitems__(idx)]).to(torch.float32)
            torch.testing.assert_close(ref, (raw - mean) / torch.as_tensor(s.std, dtype=torch.float32))
        for layout, dtype in [("CHW", "uint8"), ("CHW", "float32"), ("HWC", "float32")]:
            ds = ReplayBufferDataset(rb, delta_indices=DELTA, image_layout=layout, image_dtype=dtype)
            norm = ds.normalizer(mode, images="per_channel")
            got = torch.stack([_frames(norm.normalize(x)) for x in ds.__getitems__(idx)])
            if layout == "CHW":
                got = got.movedim(-3, -1)
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
            back = torch.stack([_frames(norm.unnormalize(norm.normalize(x))) for x in ds.__getitems__(idx)])
            want = torch.stack([_frames(x) for x in ds.__getitems__(idx)]).to(torch.float32)
            torch.testing.assert_close(back, want, rtol=1e-5, atol=1e-4 if dtype == "uint8" else 1e-6)
        # uint8 CHW from the workers, floats on the main side: a normalizer for float32 frames
        chw = ReplayBufferDataset(rb, delta_indices=DELTA, image_layout="CHW")
        norm = chw.normalizer(mode, image_dtype="float32", images="per_channel")
        batch = images_to_float({"observation": {"pixels": torch.stack([_frames(x) for x in chw.__getitems__(idx)])}})
        torch.testing.assert_close(_frames(norm.normalize(batch)).movedim(-3, -1), ref, rtol=1e-5, atol=1e-5)
        # the statistics of HWC frames refuse CHW frames with a message naming the leaf
        chw_u8 = {"observation": {"pixels": torch.stack([_frames(x) for x in chw.__getitems__(idx)])}}
        with pytest.raises(ValueError, match="observation/pixels"):
            ref_norm.normalize(chw_u8)
        # other leaves normalise as before
        torch.testing.assert_close(chw.normalizer(mode, images="per_channel").normalize(chw[0])["observation"]["state"],
                                   Normalizer(stats, mode).normalize(base[0])["observation"]["state"])


def test_a_camera_read_at_the_anchor_only_and_a_stored_chw_leaf(tmp_path):
    with make(tmp_path / "rb") as rb:
        kw = {"delta_indices": {"action": [0, 1]}}
        hwc, chw = ReplayBufferDataset(rb, **kw), ReplayBufferDataset(rb, image_layout="CHW", **kw)
        assert _frames(chw[3]).shape == (3, H, W) and torch.equal(_frames(chw[3]), _frames(hwc[3]).permute(2, 0, 1))
    space = DictSpace({"cam": BoxSpace(0, 255, (3, H, W), np.uint8, metadata={"kind": "image", "layout": "CHW"})})
    frames = np.random.default_rng(1).integers(0, 256, (4, 3, H, W), dtype=np.uint8)
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "chw",  # stored CHW: PNG frames, exact
                             **dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}})) as rb:
        rb.extend({"cam": frames})
        rb.end_episode()
        as_hwc = ReplayBufferDataset(rb)[2]["cam"]
        assert as_hwc.shape == (H, W, 3) and torch.equal(as_hwc, torch.from_numpy(frames[2]).permute(1, 2, 0))
        assert torch.equal(ReplayBufferDataset(rb, image_layout="CHW")[2]["cam"], torch.from_numpy(frames[2]))
        stats = rb.stats()
        assert tuple(stats["cam"].broadcast_shape) == (3, 1, 1)
        norm = ReplayBufferDataset(rb).normalizer(images="per_channel")
        want = (torch.from_numpy(frames[2]).double() - torch.as_tensor(stats["cam"].mean)[:, None, None]) \
            / torch.as_tensor(stats["cam"].std)[:, None, None]
        torch.testing.assert_close(norm.normalize({"cam": as_hwc})["cam"].double(), want.permute(1, 2, 0),
                                   rtol=1e-5, atol=1e-5)


def test_normalizer_refuses_frames_of_the_other_dtype(tmp_path):
    with make(tmp_path / "rb") as rb:
        cams = ReplayBufferDataset(rb, image_layout="CHW")
        idx = list(range(4))
        batch = {"observation": {"pixels": torch.stack([_frames(x) for x in cams.__getitems__(idx)])}}
        floats = images_to_float(batch, cams.image_keys)
        # uint8 statistics given [0, 1] floats: refused, naming the leaf, both dtypes and the fix
        words = r"'observation/pixels'.*float32.*image_dtype='uint8'.*image_dtype='float32'"
        with pytest.raises(TypeError, match=words):
            cams.normalizer(images="per_channel").normalize(floats)
        # float32 statistics given uint8 frames: refused too
        with pytest.raises(TypeError, match=r"'observation/pixels'.*uint8.*image_dtype='float32'.*images_to_float"):
            cams.normalizer(image_dtype="float32", images="per_channel").normalize(batch)
        # the matching pairs give the same values (mean near 0 over the frames)
        a = cams.normalizer(images="per_channel").normalize(batch)["observation"]["pixels"]
        b = cams.normalizer(image_dtype="float32", images="per_channel").normalize(floats)["observation"]["pixels"]
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        assert abs(float(a.mean())) < 1.0
        # unnormalize takes floats whatever the dtype (normalised values are floats)
        back = cams.normalizer(images="per_channel").unnormalize({"observation": {"pixels": a}})["observation"]["pixels"]
        torch.testing.assert_close(back,
                                   batch["observation"]["pixels"].float(),
                                   rtol=1e-5, atol=1e-4)
        # a float64 frame is floating: accepted by the float32 normalizer
        assert cams.normalizer(image_dtype="float32", images="per_channel").normalize(
            {"observation": {"pixels": floats["observation"]["pixels"].double()}})["observation"]["pixels"].dtype \
            == torch.float64


def test_images_to_float_refuses_numpy(tmp_path):
    batch = {"cam": np.zeros((2, 3, H, W), np.uint8), "state": np.zeros((2, 2), np.float32)}
    with pytest.raises(TypeError, match=r"'cam'.*NumPy.*to_torch"):
        images_to_float(batch, ["cam"])
    with pytest.raises(TypeError, match=r"'cam'.*NumPy.*to_torch"):
        images_to_float(batch)  # keys=None: a NumPy frame batch is not a silent no-op
    with pytest.raises(TypeError, match=r"'state'.*nothing would be converted"):
        images_to_float({"state": np.zeros((2, 2), np.float32)})
    # torch tensors next to a NumPy non-frame leaf: the frames convert, the rest passes through
    out = images_to_float({"cam": torch.full((2, 3, H, W), 255, dtype=torch.uint8), "idx": np.arange(2)})
    assert out["cam"].dtype == torch.float32 and float(out["cam"].min()) == 1.0
    assert isinstance(out["idx"], np.ndarray)


GRAY = DictSpace({"gray": BoxSpace(0, 255, (H, W), np.uint8, metadata={"kind": "image"}),
                  "depth": BoxSpace(0, 255, (H, W), np.uint8, metadata={"kind": "depth"})})


@pytest.mark.filterwarnings("ignore:leaf 'gray' has kind 'image'")  # (H, W) goes to HDF5, as routing says
def test_grayscale_camera_is_one_channel(tmp_path):
    frames = np.random.default_rng(2).integers(0, 256, (5, H, W), dtype=np.uint8)
    with ReplayBuffer.create(DictStorage, GRAY, cache_path=tmp_path / "g",
                             **dict_storage_kwargs_from_space(GRAY)) as rb:
        rb.extend({"gray": frames, "depth": frames})
        rb.end_episode()
        hwc = ReplayBufferDataset(rb)
        assert hwc.image_keys == ["gray"]  # a depth map is not a camera
        assert torch.equal(hwc[1]["gray"], torch.from_numpy(frames[1]))
        chw = ReplayBufferDataset(rb, image_layout="CHW")
        assert chw[1]["gray"].shape == (1, H, W) and torch.equal(chw[1]["gray"][0], torch.from_numpy(frames[1]))
        assert chw[1]["depth"].shape == (H, W)
        f32 = ReplayBufferDataset(rb, image_layout="CHW", image_dtype="float32")
        g = f32[1]["gray"]
        assert g.dtype == torch.float32 and g.shape == (1, H, W)
        torch.testing.assert_close(g[0], torch.from_numpy(frames[1]).float() / 255)
        hwc32 = ReplayBufferDataset(rb, image_dtype="float32")[1]["gray"]
        assert hwc32.shape == (H, W) and hwc32.dtype == torch.float32
        win = ReplayBufferDataset(rb, image_layout="CHW", delta_indices={"gray": [-1, 0]})[2]["gray"]
        assert win.shape == (2, 1, H, W) and torch.equal(win[1, 0], torch.from_numpy(frames[2]))
        # scalar statistics apply in both layouts and dtypes alike
        s = rb.stats()["gray"]
        want = (torch.from_numpy(frames[1]).double() - float(s.mean)) / float(s.std)
        for ds in (hwc, chw, f32):
            got = ds.normalizer(images="per_channel").normalize(ds[1])["gray"].double().reshape(H, W)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore:leaf 'cam16' has kind 'image'")
def test_a_camera_kind_leaf_left_as_stored_warns(tmp_path):
    space = DictSpace({"cam16": BoxSpace(0, 4095, (H, W, 3), np.uint16, metadata={"kind": "image"}),
                       "rgb": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image"})})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "w",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"cam16": np.ones((2, H, W, 3), np.uint16), "rgb": np.ones((2, H, W, 3), np.uint8)})
        rb.end_episode()
        with pytest.warns(UserWarning, match=r"'cam16' \(shape \(6, 10, 3\), dtype uint16"):
            ds = ReplayBufferDataset(rb, image_layout="CHW")
        assert ds.image_keys == ["rgb"] and ds[0]["cam16"].shape == (H, W, 3) and ds[0]["rgb"].shape == (3, H, W)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ReplayBufferDataset(rb)  # the defaults convert nothing: no warning
