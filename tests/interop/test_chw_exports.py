"""Exports of a buffer with a CHW camera (3, H, W): every format gets HWC frames, imports give CHW back."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

H, W, N = 8, 10, 6
CAM = BoxSpace(0, 255, (3, H, W), np.uint8, metadata={"kind": "image", "layout": "CHW", "fps": 10})
SPACE = DictSpace({"observation": DictSpace({"pixels": CAM, "state": BoxSpace(-1, 1, (2,), np.float32)}),
                   "action": BoxSpace(-1, 1, (2,), np.float32)})


def frames():
    """(N, 3, H, W): every channel of every pixel distinct, so a wrong transpose cannot pass."""
    x = np.arange(N * 3 * H * W, dtype=np.int64).reshape(N, 3, H, W)
    return ((x * 7 + 3) % 251).astype(np.uint8)


def hwc(x):
    return x.transpose(0, 2, 3, 1)


@pytest.fixture
def rb_path(tmp_path):
    cams = frames()
    state = np.linspace(-1, 1, 2 * N, dtype=np.float32).reshape(N, 2)
    with ReplayBuffer.create(DictStorage, SPACE, cache_path=tmp_path / "rb", capacity=None,
                             **dict_storage_kwargs_from_space(SPACE, kind_kwargs={"image": {"format": "PNG"}})) as rb:
        for a, b in ((0, 2), (2, N)):
            rb.extend({"observation": {"pixels": cams[a:b], "state": state[a:b]}, "action": state[a:b]})
            rb.end_episode()
        assert np.array_equal(rb[:]["observation"]["pixels"], cams)
    return tmp_path / "rb"


def test_zarr_export_writes_hwc_frames_and_the_import_gives_chw_back(rb_path, tmp_path):
    zarr = pytest.importorskip("zarr")
    from trajstore.interop.zarr import export_zarr, import_zarr

    export_zarr(rb_path, tmp_path / "out.zarr", compressor=None)
    group = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")
    pixels = group["data/observation.pixels"]
    assert pixels.shape == (N, H, W, 3) and pixels.chunks == (1, H, W, 3)  # Diffusion Policy's (N, H, W, C)
    assert np.array_equal(pixels[:], hwc(frames()))
    assert pixels.attrs["trajstore_layout"] == "CHW"
    assert "trajstore_layout" not in group["data/observation.state"].attrs
    import_zarr(tmp_path / "out.zarr", tmp_path / "back", camera="png")
    with ReplayBuffer.load_from(tmp_path / "back") as back:
        assert back.space["observation"]["pixels"].shape == (3, H, W)
        assert np.array_equal(back[:]["observation"]["pixels"], frames())


def test_zarr_jpeg2k_export_of_a_chw_camera_is_framed(rb_path, tmp_path):
    zarr = pytest.importorskip("zarr")
    pytest.importorskip("imagecodecs")
    from trajstore.interop.zarr import export_zarr

    summary = export_zarr(rb_path, tmp_path / "out.zarr", lossless=True)
    assert summary.frame_codec is not None  # the CHW camera is a frame array, compressed as frames
    pixels = zarr.open_group(str(tmp_path / "out.zarr"), mode="r")["data/observation.pixels"]
    assert np.array_equal(pixels[:], hwc(frames()))


def test_lerobot_png_export_writes_hwc_and_the_import_gives_chw_back(rb_path, tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    from PIL import Image

    from trajstore.interop.lerobot import export_lerobot, import_lerobot

    export_lerobot(rb_path, tmp_path / "lr", camera="image")
    info = json.loads((tmp_path / "lr" / "meta" / "info.json").read_text())
    (key, feature), = [(k, v) for k, v in info["features"].items() if v["dtype"] == "image"]
    assert feature["shape"] == [H, W, 3] and feature["names"] == ["height", "width", "channels"]
    table = pq.read_table(next((tmp_path / "lr" / "data").rglob("*.parquet")))
    pngs = [np.asarray(Image.open(io.BytesIO(cell["bytes"]))) for cell in table.column(key).to_pylist()]
    assert np.array_equal(np.stack(pngs), hwc(frames()))  # LeRobot's (H, W, C) frames
    import_lerobot(tmp_path / "lr", tmp_path / "back", camera="png", progress=False)
    with ReplayBuffer.load_from(tmp_path / "back") as back:
        assert back.space["observation"]["pixels"] == CAM  # the kept leaf: (3, H, W), layout CHW
        assert np.array_equal(back[:]["observation"]["pixels"], frames())


def test_lerobot_video_export_of_a_chw_camera(rb_path, tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("av")
    from trajstore.interop.lerobot import export_lerobot, import_lerobot

    export_lerobot(rb_path, tmp_path / "lr")
    info = json.loads((tmp_path / "lr" / "meta" / "info.json").read_text())
    video = [v for v in info["features"].values() if v["dtype"] == "video"]
    assert len(video) == 1 and video[0]["shape"] == [H, W, 3]
    import_lerobot(tmp_path / "lr", tmp_path / "back", camera="png", progress=False)
    with ReplayBuffer.load_from(tmp_path / "back") as back:
        got = back[:]["observation"]["pixels"]
    assert got.shape == (N, 3, H, W)


def test_robomimic_export_writes_hwc_frames(rb_path, tmp_path):
    h5py = pytest.importorskip("h5py")
    from trajstore.interop.robomimic import export_robomimic

    export_robomimic(rb_path, tmp_path / "out.hdf5")
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        obs = f["data/demo_1/obs/pixels"]
        assert obs.shape == (N - 2, H, W, 3) and obs.compression == "gzip"  # robomimic's image obs
        assert np.array_equal(obs[:], hwc(frames())[2:])
        nxt = f["data/demo_1/next_obs/pixels"]
        assert np.array_equal(nxt[:-1], hwc(frames())[3:])
        assert np.array_equal(nxt[-1], hwc(frames())[-1])  # no final observation: the last one repeated
