"""ALOHA / ACT import, value by value: raw files (exact with camera="png"), compressed files (JPEG within a
tolerance, in the recorder's channel order), episode order by N, episode data, metadata."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from tests.interop_aloha import episodes as E
from trajstore.interop.aloha import import_aloha
from trajstore.replay_buffer import ReplayBuffer


def _episode(rb, k):
    e = rb.episodes[k]
    return e, rb[e.start:e.stop]


def test_raw_exact_with_png(tmp_path):
    src = E.raw_folder(tmp_path / "src", (0, 1, 2, 9, 10))
    summary = import_aloha(tmp_path / "src", tmp_path / "out", camera="png")
    assert (summary.episodes, summary.steps) == (5, 30)
    assert summary.leaves == {"action": "action", "observations/images/angle": "observation/images/angle",
                              "observations/images/top": "observation/images/top",
                              "observations/qpos": "observation/qpos", "observations/qvel": "observation/qvel"}
    rb = ReplayBuffer.load_from(tmp_path / "out")
    assert len(rb) == 30 and len(rb.episodes) == 5
    for k, n in enumerate((0, 1, 2, 9, 10)):  # episode_10 after episode_9
        e, got = _episode(rb, k)
        assert e.data == {"file": f"episode_{n}.hdf5", "sim": True}
        for name in ("qpos", "qvel"):
            assert got["observation"][name].dtype == np.float32
            np.testing.assert_array_equal(got["observation"][name], src[n][name])
        np.testing.assert_array_equal(got["action"], src[n]["action"])
        for cam in E.CAMS:
            np.testing.assert_array_equal(got["observation"]["images"][cam], src[n]["images"][cam])
    space = rb.space
    meta = space["observation"]["images"]["top"].metadata
    assert dict(meta) == {"kind": "image", "layout": "HWC", "fps": 50}
    assert dict(space.metadata)["aloha"] == {"source": "src", "fps": 50, "episodes": [0, 1, 2, 9, 10],
                                              "attrs": {"sim": True}, "cameras": {"angle": "raw", "top": "raw"}}


def test_compressed_decodes_in_recorder_order(tmp_path):
    src = E.compressed_folder(tmp_path / "src", (0, 3))
    summary = import_aloha(tmp_path / "src", tmp_path / "out", camera="png")
    assert summary.leaves["observations/effort"] == "observation/effort"
    assert summary.leaves["base_action"] == "base_action"
    assert "compress_len" not in summary.leaves
    rb = ReplayBuffer.load_from(tmp_path / "out")
    for k, n in enumerate((0, 3)):
        e, got = _episode(rb, k)
        assert e.data == {"file": f"episode_{n}.hdf5", "sim": False, "compress": True}
        for name in ("qpos", "qvel", "effort"):
            np.testing.assert_array_equal(got["observation"][name], src[n][name])
        np.testing.assert_array_equal(got["action"], src[n]["action"])
        np.testing.assert_array_equal(got["base_action"], src[n]["base_action"])
        for cam in E.CAMS:
            frames = got["observation"]["images"][cam]
            want = src[n]["images"][cam]
            assert frames.shape == (E.T, E.H, E.W, 3) and frames.dtype == np.uint8
            err = np.abs(frames.astype(int) - want.astype(int))
            assert err.mean() < 2 and err.max() <= 24  # quality 90, 4:4:4
            # the left half is red-heavy as recorded: no channel swap
            assert (frames[:, :, : E.W // 4, 0] > 180).all() and (frames[:, :, : E.W // 4, 2] < 80).all()
            # the same pixels a plain decode of the stored bytes gives, channels reversed (cv2's order)
            for t, data in enumerate(src[n]["encoded"][cam]):
                plain = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))[..., ::-1]
                assert np.abs(frames[t].astype(int) - plain.astype(int)).max() <= 3
    assert dict(rb.space.metadata)["aloha"]["cameras"] == {"angle": "jpeg", "top": "jpeg"}


def test_compress_len_in_task_config_order(tmp_path):
    # static ALOHA's camera_names are not in name order: compress_len rows follow the recorder, not h5py
    cams = ("cam_high", "cam_low", "cam_left_wrist")
    src = E.compressed_folder(tmp_path / "src", (0,), cams=cams, task_order=cams)
    import_aloha(tmp_path / "src", tmp_path / "out", camera="png")
    rb = ReplayBuffer.load_from(tmp_path / "out")
    assert sorted(rb.space["observation"]["images"].keys()) == sorted(cams)
    got = rb[0:E.T]["observation"]["images"]
    for cam in cams:
        assert np.abs(got[cam].astype(int) - src[0]["images"][cam].astype(int)).mean() < 2


@pytest.mark.parametrize("camera", ["jpeg", "png"])
def test_camera_storage(tmp_path, camera):
    src = E.raw_folder(tmp_path / "src", (0,))
    import_aloha(tmp_path / "src", tmp_path / "out", camera=camera)
    got = ReplayBuffer.load_from(tmp_path / "out")[0:E.T]["observation"]["images"]["top"]
    err = np.abs(got.astype(int) - src[0]["images"]["top"].astype(int))
    assert err.max() == 0 if camera == "png" else err.mean() < 2


def test_fps_and_other_attrs(tmp_path):
    import h5py

    E.raw_folder(tmp_path / "src", (0, 1))
    for n, task in ((0, "cube"), (1, "peg")):
        with h5py.File(tmp_path / "src" / f"episode_{n}.hdf5", "a") as f:
            f.attrs["task"] = task
            f.attrs["robot"] = np.bytes_(b"vx300s")
            f.attrs["offsets"] = np.arange(3, dtype=np.int32)
    import_aloha(tmp_path / "src", tmp_path / "out", fps=30.5, camera="png")
    rb = ReplayBuffer.load_from(tmp_path / "out")
    assert rb.episodes[1].data == {"file": "episode_1.hdf5", "sim": True, "offsets": [0, 1, 2], "robot": "vx300s",
                                   "task": "peg"}
    assert rb.space["observation"]["images"]["top"].metadata["fps"] == 30.5
    assert dict(rb.space.metadata)["aloha"]["attrs"] == {"sim": True, "offsets": [0, 1, 2], "robot": "vx300s"}


def test_legacy_file_without_sim_attr(tmp_path):
    import h5py

    E.raw_folder(tmp_path / "src", (0,))
    with h5py.File(tmp_path / "src" / "episode_0.hdf5", "a") as f:
        del f.attrs["sim"]
    import_aloha(tmp_path / "src", tmp_path / "out", camera="png")
    # no sim invented: the episode data holds what the file holds
    rb = ReplayBuffer.load_from(tmp_path / "out")
    assert rb.episodes[0].data == {"file": "episode_0.hdf5"}
    assert dict(rb.space.metadata)["aloha"]["attrs"] == {}


def test_blocks_cover_long_episode(tmp_path, monkeypatch):
    from trajstore.interop.aloha import import_ as mod

    src = E.compressed_folder(tmp_path / "src", (0,), steps=7)
    monkeypatch.setattr(mod, "BLOCK_BYTES", 3 * (2 * E.H * E.W * 3))  # 2-3 steps a block
    import_aloha(tmp_path / "src", tmp_path / "out", camera="png")
    got = ReplayBuffer.load_from(tmp_path / "out")[0:7]
    np.testing.assert_array_equal(got["observation"]["qpos"], src[0]["qpos"])
    assert np.abs(got["observation"]["images"]["angle"].astype(int) - src[0]["images"]["angle"]).mean() < 3


def test_registry_names_the_importer():
    from trajstore.interop.formats import importer

    assert importer("aloha") is import_aloha
