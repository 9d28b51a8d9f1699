"""Channel-first (CHW) cameras: routed to frame storages, transposed in and out, `rb[i]` as appended."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from trajstore.errors import FormatError, InvalidValueError, RoutingWarning, UnsupportedSpaceError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage, ImageStorage, SpaceStorage, dict_storage_kwargs_from_space
from trajstore.storages.frames._frame_layout import FrameLayout
from trajstore.testing import moving_scene, psnr

H, W = 48, 64


def chw(c=3, dtype=np.uint8, **meta):
    high = np.iinfo(dtype).max if np.dtype(dtype).kind == "u" else 1
    return BoxSpace(0, high, (c, H, W), dtype, metadata={"kind": "image", "layout": "CHW", **meta})


def step_space(cam):
    return DictSpace({"observation": DictSpace({"cam": cam, "state": BoxSpace(-1, 1, (2,), np.float32)}),
                      "action": BoxSpace(-1, 1, (2,), np.float32)})


def frames_chw(n, seed=0):
    """Smooth moving frames ``(n, 3, H, W)`` uint8 (a camera, not noise: JPEG's case)."""
    return np.ascontiguousarray(moving_scene(n, H, W, seed).transpose(0, 3, 1, 2))


def record(path, space, cams, **routing):
    """A buffer of ``len(cams)`` steps in two episodes, appended one step and one batch at a time."""
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=None,
                             **dict_storage_kwargs_from_space(space, **routing))
    n = len(cams)
    state = np.linspace(-1, 1, 2 * n, dtype=np.float32).reshape(n, 2)
    for i in range(n // 2):  # one step at a time
        rb.append({"observation": {"cam": cams[i], "state": state[i]}, "action": state[i]})
    rb.end_episode()
    rb.extend({"observation": {"cam": cams[n // 2:], "state": state[n // 2:]}, "action": state[n // 2:]})  # a batch
    rb.end_episode()
    return rb


def cam_storage_json(path):
    return json.loads((path / "storage" / "observation.cam" / "storage.json").read_text())


def test_frame_layout_round_trips_single_frames_and_batches():
    layout = FrameLayout.of(chw())
    assert layout.name == "CHW" and layout.stored_shape((3, H, W)) == (H, W, 3)
    assert layout.user_shape((H, W, 3)) == (3, H, W)
    x = frames_chw(4)
    stored = layout.to_stored(x)
    assert stored.shape == (4, H, W, 3) and stored.flags.c_contiguous
    assert np.array_equal(stored[1, 5, 7], x[1, :, 5, 7])  # pixel (5, 7) of frame 1: its 3 channels
    assert np.array_equal(layout.to_user(stored), x) and layout.to_user(stored).flags.c_contiguous
    assert np.array_equal(layout.to_stored(x[2]), stored[2])  # one frame (3, H, W)
    hwc = FrameLayout.of(BoxSpace(0, 255, (H, W, 3), np.uint8))
    assert hwc.name == "HWC" and hwc.to_stored(stored) is stored  # nothing copied for HWC
    grey = FrameLayout.of(BoxSpace(0, 255, (H, W), np.uint8, metadata={"layout": "CHW"}))
    assert grey.name == "HWC"  # (H, W) has no channel axis: stored as is


def test_chw_png_round_trip_is_exact_and_reopens(tmp_path):
    cams = frames_chw(10)
    space = step_space(chw())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RoutingWarning)  # a CHW uint8 camera is no longer refused
        kwargs = dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG"}})
    assert kwargs["storage_cls_map"]["observation/cam"] is ImageStorage
    with record(tmp_path / "rb", space, cams, kind_kwargs={"image": {"format": "PNG"}}) as rb:
        assert rb[3]["observation"]["cam"].shape == (3, H, W)
        assert np.array_equal(rb[3]["observation"]["cam"], cams[3])
        assert np.array_equal(rb[np.arange(10)]["observation"]["cam"], cams)
        assert np.array_equal(rb[[7, 2, 7]]["observation"]["cam"], cams[[7, 2, 7]])  # requested order, repeats
    assert cam_storage_json(tmp_path / "rb")["config"]["layout"] == "CHW"
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:  # reopened from disk
        got = rb[:]["observation"]["cam"]
        assert got.shape == (10, 3, H, W) and got.flags.c_contiguous and np.array_equal(got, cams)
    # the frames on disk are channel last: the chunk holds (H, W, 3) PNGs of the transposed frames
    raw = SpaceStorage.load_from(tmp_path / "rb" / "storage" / "observation.cam")
    assert isinstance(raw, ImageStorage) and raw.space == chw()
    raw.close()


def test_chw_jpeg_round_trip_is_close(tmp_path):
    cams = frames_chw(8, seed=1)
    with record(tmp_path / "rb", step_space(chw()), cams) as rb:  # the default routing: JPEG
        got = rb[:]["observation"]["cam"]
    assert got.shape == cams.shape
    db = psnr(got.transpose(0, 2, 3, 1), cams.transpose(0, 2, 3, 1))
    assert db.min() > 30, db  # ~41 dB measured: the same frames stored HWC read back alike


def test_chw_and_hwc_jpeg_store_the_same_frames(tmp_path):
    cams = frames_chw(4, seed=2)
    a = ImageStorage.create(chw(), cache_path=tmp_path / "chw")
    b = ImageStorage.create(BoxSpace(0, 255, (H, W, 3), np.uint8), cache_path=tmp_path / "hwc")
    a.extend(cams)
    b.extend(cams.transpose(0, 2, 3, 1))
    assert np.array_equal(a[:], b[:].transpose(0, 3, 1, 2))  # bit for bit the same JPEG decode
    assert "layout" not in b.descriptor()["config"]  # a channel-last folder records nothing (as before)
    a.close(), b.close()


def test_chw_video_round_trip(tmp_path):
    pytest.importorskip("av")
    from trajstore.storages import VideoStorage

    cams = frames_chw(12, seed=3)
    space = step_space(chw(fps=10))
    with record(tmp_path / "rb", space, cams, kind_storage_cls={"image": VideoStorage}) as rb:
        assert rb[2]["observation"]["cam"].shape == (3, H, W)
    v = VideoStorage.create(chw(), cache_path=tmp_path / "v")
    v.extend(cams[:3])
    assert np.array_equal(v[[2, 0]], cams[[2, 0]])  # not flushed yet: the raw frames, exactly as appended
    v.close()
    assert psnr(VideoStorage.load_from(tmp_path / "v")[:].transpose(0, 2, 3, 1), cams[:3].transpose(0, 2, 3, 1)).min() > 30
    assert cam_storage_json(tmp_path / "rb")["type"] == "video"
    assert cam_storage_json(tmp_path / "rb")["config"]["layout"] == "CHW"
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        got = rb[:]["observation"]["cam"]
    assert got.shape == cams.shape
    assert psnr(got.transpose(0, 2, 3, 1), cams.transpose(0, 2, 3, 1)).min() > 30


@pytest.mark.parametrize("shape", [(1, H, W), (H, W)])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_single_channel_chw_png_is_exact(tmp_path, shape, dtype):
    space = BoxSpace(0, np.iinfo(dtype).max, shape, dtype, metadata={"kind": "depth", "layout": "CHW"})
    assert not ImageStorage.accepts(space)  # JPEG takes RGB only
    s = ImageStorage.create(space, cache_path=tmp_path / "d", format="PNG")
    x = np.random.default_rng(0).integers(0, np.iinfo(dtype).max, (5, *shape), dtype=dtype)
    s.extend(x)
    assert np.array_equal(s[:], x) and s[1].shape == shape
    s.close()
    with ImageStorage.load_from(tmp_path / "d") as s:
        assert np.array_equal(s[[4, 0]], x[[4, 0]])


def test_old_folder_without_layout_reads_as_hwc_and_a_bad_record_is_refused(tmp_path):
    hwc = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image"})
    s = ImageStorage.create(hwc, cache_path=tmp_path / "old", format="PNG")
    x = moving_scene(3, H, W)
    s.extend(x)
    s.close()
    desc = json.loads((tmp_path / "old" / "storage.json").read_text())
    assert "layout" not in desc["config"]
    with ImageStorage.load_from(tmp_path / "old") as s:
        assert np.array_equal(s[:], x)
    desc["config"]["layout"] = "CHW"  # a record the space does not declare
    (tmp_path / "old" / "storage.json").write_text(json.dumps(desc))
    with pytest.raises(FormatError, match="recorded in layout 'CHW', but the space declares 'HWC'"):
        ImageStorage.load_from(tmp_path / "old")
    desc["config"]["layout"] = "NCHW"
    (tmp_path / "old" / "storage.json").write_text(json.dumps(desc))
    with pytest.raises(FormatError, match="layout must be 'HWC' or 'CHW', got 'NCHW'"):
        ImageStorage.load_from(tmp_path / "old")


def test_a_wrong_shape_names_the_leaf(tmp_path):
    # declared CHW with the channel last: refused by routing (naming the leaf), stored raw
    bad = BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "CHW"})
    with pytest.warns(RoutingWarning, match=r"leaf 'observation/cam'.*got layout 'CHW' with shape \(48, 64, 3\)"):
        kwargs = dict_storage_kwargs_from_space(step_space(bad))
    assert kwargs["storage_cls_map"] == {"*": HDF5Storage}
    with pytest.raises(UnsupportedSpaceError, match=r"'observation/cam'.*layout 'CHW' with shape"):
        dict_storage_kwargs_from_space(step_space(bad), key_storage_cls={"observation/cam": ImageStorage})
    # a frame of the wrong shape appended to a CHW camera: the error names the leaf
    with record(tmp_path / "rb", step_space(chw()), frames_chw(4)) as rb:
        with pytest.raises(InvalidValueError, match="observation/cam"):
            rb.append({"observation": {"cam": frames_chw(1)[0].transpose(1, 2, 0), "state": np.zeros(2, np.float32)},
                       "action": np.zeros(2, np.float32)})
        assert len(rb) == 4


@pytest.mark.parametrize("leaf", [chw(c=4), chw(dtype=np.float32)], ids=["4-channels", "float32"])
def test_float_and_4_channel_chw_cameras_stay_raw_with_a_warning(leaf):
    with pytest.warns(RoutingWarning, match="leaf 'observation/cam'.*stored raw.*a float or 4-channel camera"):
        kwargs = dict_storage_kwargs_from_space(step_space(leaf))
    assert kwargs["storage_cls_map"] == {"*": HDF5Storage}
