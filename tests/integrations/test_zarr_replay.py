"""Diffusion Policy zarr layout: buffer -> zarr -> buffer and zarr -> buffer -> zarr round trips."""

import json
import warnings

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
pytest.importorskip("imagecodecs")

from tests.integrations.zarr_helpers import EPISODE_LENGTHS, make_buffer, make_dp_group  # noqa: E402
from trajstore.interop.zarr import export_zarr, import_zarr  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.spaces import tree  # noqa: E402
from trajstore.testing import psnr  # noqa: E402

LEAVES = ("observation/pixels", "observation/agent_pos", "action", "count", "terminated")


def _flat(rb):
    return dict(zip((tree.path_name(p) for p in tree.leaf_paths(rb.space)), tree.flatten(rb.space, rb[:])))


@pytest.mark.parametrize("compressor", [None, "jpeg2k", "jpegxl"])
def test_buffer_to_zarr_to_buffer_is_exact_with_raw_or_lossless_frames(tmp_path, compressor):
    data = make_buffer(tmp_path / "rb")
    export_zarr(tmp_path / "rb", tmp_path / "z", compressor=compressor, lossless=True)
    import_zarr(tmp_path / "z", tmp_path / "back", camera="png")
    with ReplayBuffer.load_from(tmp_path / "rb") as a, ReplayBuffer.load_from(tmp_path / "back") as b:
        assert b.space == a.space  # names, dtypes, bounds and metadata (fps 15, units) restored
        assert list(tree.leaf_paths(b.space)) == list(tree.leaf_paths(a.space))  # leaf order too
        got = _flat(b)
        np.testing.assert_array_equal(got["observation/pixels"], data["observation"]["pixels"])
        for name in ("action", "count", "terminated"):
            np.testing.assert_array_equal(got[name], data[name])
            assert got[name].dtype == data[name].dtype
        np.testing.assert_array_equal(got["observation/agent_pos"], data["observation"]["agent_pos"])
        assert [(e.start, e.stop) for e in b.episodes] == [(0, 5), (5, 14), (14, 18)]
        assert [e.data for e in b.episodes] == [e.data for e in a.episodes]
        assert [e.data for e in b.episodes][2] == {"task": "push 2", "success": False, "seed": 2}
        assert [e.interrupted for e in b.episodes] == [False, True, False]
        assert [e.done for e in b.episodes] == [True, False, True]


def test_lossy_frames_stay_within_bound_and_lowdim_is_exact(tmp_path):
    data = make_buffer(tmp_path / "rb")
    for codec, min_db in (("jpeg2k", 40.0), ("jpegxl", 38.0)):
        export_zarr(tmp_path / "rb", tmp_path / codec, compressor=codec)
        frames = zarr.open_group(str(tmp_path / codec), mode="r")["data/observation.pixels"][:]
        expected = data["observation"]["pixels"]
        assert not np.array_equal(frames, expected)  # lossy indeed
        assert psnr(frames, expected).min() >= min_db, (codec, psnr(frames, expected).min())
        assert np.abs(frames.astype(int) - expected).mean() < 2.0
        np.testing.assert_array_equal(zarr.open_group(str(tmp_path / codec), mode="r")["data/action"][:], data["action"])
    raw = sum(f.stat().st_size for f in (tmp_path / "jpeg2k" / "data" / "observation.pixels").glob("[0-9]*"))
    assert raw < data["observation"]["pixels"].nbytes / 2  # compressed


def test_export_layout_is_diffusion_policys(tmp_path):
    make_buffer(tmp_path / "rb")
    summary = export_zarr(tmp_path / "rb", tmp_path / "z", key_map={"observation/pixels": "img",
                                                                    "observation/agent_pos": "state"})
    assert summary.steps == sum(EPISODE_LENGTHS) and summary.episodes == 3
    assert summary.keys == {"observation/pixels": "img", "observation/agent_pos": "state", "action": "action",
                            "count": "count", "terminated": "terminated"}
    assert json.loads((tmp_path / "z" / ".zgroup").read_text())["zarr_format"] == 2
    g = zarr.open_group(str(tmp_path / "z"), mode="r")
    assert sorted(g["data"].array_keys()) == ["action", "count", "img", "state", "terminated"]
    ends = g["meta/episode_ends"]
    assert ends.dtype == np.int64 and ends[:].tolist() == [5, 14, 18]
    img = json.loads((tmp_path / "z" / "data" / "img" / ".zarray").read_text())
    assert img["chunks"] == [1, 24, 32, 3] and img["dtype"] == "|u1"
    # Only keys Diffusion Policy's own Jpeg2k(level, codecformat, ...) accepts, and its level 50.
    assert img["compressor"]["id"] == "imagecodecs_jpeg2k" and img["compressor"]["level"] == 50
    assert set(img["compressor"]) <= {"id", "level", "codecformat", "colorspace", "tile", "reversible",
                                      "bitspersample", "resolutions", "numthreads", "verbose"}
    action = json.loads((tmp_path / "z" / "data" / "action" / ".zarray").read_text())
    assert action["chunks"][1:] == [2] and action["chunks"][0] >= 18 and action["compressor"]["id"] == "blosc"
    assert g["data/img"].attrs["trajstore_path"] == "observation/pixels"


def test_episode_selection_exports_those_episodes_only(tmp_path):
    data = make_buffer(tmp_path / "rb")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        ids = rb.select_episodes(lambda e: not e.interrupted)
        summary = export_zarr(rb, tmp_path / "z", compressor=None, episodes=ids)
        assert not rb.closed  # a buffer handed in stays open
    assert summary.episodes == 2 and summary.steps == 9
    g = zarr.open_group(str(tmp_path / "z"), mode="r")
    assert g["meta/episode_ends"][:].tolist() == [5, 9]
    expected = np.concatenate([data["action"][:5], data["action"][14:18]])
    np.testing.assert_array_equal(g["data/action"][:], expected)
    import_zarr(tmp_path / "z", tmp_path / "back", camera="png")
    with ReplayBuffer.load_from(tmp_path / "back") as b:
        assert [e.data["seed"] for e in b.episodes] == [0, 2]


def test_open_episode_is_not_exported(tmp_path):
    make_buffer(tmp_path / "rb")
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=False) as rb:
        rb.extend(rb[:3])  # an episode being recorded
        summary = export_zarr(rb, tmp_path / "z", compressor=None)
        with pytest.raises(ValueError, match="episodes .* are not ended episodes"):
            export_zarr(rb, tmp_path / "z2", episodes=[rb.episodes[-1].id])
    assert summary.steps == 18 and summary.episodes == 3
    assert not (tmp_path / "z2").exists()


def test_diffusion_policy_group_to_buffer_to_zarr_is_equal(tmp_path):
    arrays = make_dp_group(tmp_path / "dp")
    summary = import_zarr(tmp_path / "dp", tmp_path / "rb", camera="png")
    assert summary.episodes == 3 and summary.steps == 17
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [(e.start, e.stop) for e in rb.episodes] == [(0, 6), (6, 10), (10, 17)]
        assert all(e.data == {} and e.done for e in rb.episodes)
        img = rb.space["img"]
        assert img.metadata == {"kind": "image", "layout": "HWC", "fps": 10}  # DEFAULT_FPS
        assert rb.space["keypoint"].shape == (9, 2) and rb.space["state"].dtype == np.float32
        assert type(rb.storage.storages["img"]).__name__ == "ImageStorage"
        np.testing.assert_array_equal(rb[:]["keypoint"], arrays["keypoint"])
    export_zarr(tmp_path / "rb", tmp_path / "again", compressor=None)
    g = zarr.open_group(str(tmp_path / "again"), mode="r")
    assert sorted(g["data"].array_keys()) == sorted(arrays)
    for key, value in arrays.items():
        back = g[f"data/{key}"][:]
        assert back.dtype == value.dtype
        np.testing.assert_array_equal(back, value)
    assert g["meta/episode_ends"][:].tolist() == [6, 10, 17]


def test_float_frames_named_in_image_keys_become_uint8_and_export_as_float(tmp_path):
    arrays = make_dp_group(tmp_path / "dp", img_dtype=np.float32)
    with pytest.warns(UserWarning, match="looks like camera frames"):
        import_zarr(tmp_path / "dp", tmp_path / "as_float")
    with ReplayBuffer.load_from(tmp_path / "as_float") as rb:
        assert rb.space["img"].dtype == np.float32 and "kind" not in rb.space["img"].metadata
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import_zarr(tmp_path / "dp", tmp_path / "rb", image_keys=["img"], fps=20, camera="png",
                    key_map={"img": "observation/image", "state": "observation/state"})
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        leaf = rb.space["observation"]["image"]
        assert leaf.dtype == np.uint8 and leaf.metadata["fps"] == 20 and leaf.metadata["zarr_dtype"] == "float32"
        np.testing.assert_array_equal(rb[:]["observation"]["image"], arrays["img"].astype(np.uint8))
    export_zarr(tmp_path / "rb", tmp_path / "again", compressor="jpeg2k")
    g = zarr.open_group(str(tmp_path / "again"), mode="r")
    assert sorted(g["data"].array_keys()) == ["action", "img", "keypoint", "state"]  # keys came back
    np.testing.assert_array_equal(g["data/img"][:], arrays["img"])  # float32, and not JPEG-coded
    assert g["data/img"].dtype == np.float32


def test_nested_groups_under_data_become_nested_leaves(tmp_path):
    make_dp_group(tmp_path / "dp")
    g = zarr.open_group(str(tmp_path / "dp"), mode="r+")
    wrist = g.create_array("data/obs/wrist", shape=(17, 3), chunks=(17, 3), dtype=np.float64)
    wrist[:] = np.arange(51.0).reshape(17, 3)
    import_zarr(tmp_path / "dp", tmp_path / "rb", camera="png")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        np.testing.assert_array_equal(rb[:]["obs"]["wrist"], np.arange(51.0).reshape(17, 3))


def test_import_reads_a_zip_and_blocks_cross_no_episode(tmp_path, monkeypatch):
    import zipfile

    from trajstore.interop.zarr import import_ as zarr_import

    arrays = make_dp_group(tmp_path / "dp")
    with zipfile.ZipFile(tmp_path / "dp.zarr.zip", "w") as zf:
        for f in sorted((tmp_path / "dp").rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(tmp_path / "dp").as_posix())
    monkeypatch.setattr(zarr_import, "BLOCK_BYTES", 3 * 16 * 20 * 3)  # a few steps a block
    import_zarr(tmp_path / "dp.zarr.zip", tmp_path / "rb", camera="png")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [len(e) for e in rb.episodes] == [6, 4, 7]
        np.testing.assert_array_equal(rb[:]["img"], arrays["img"])
        np.testing.assert_array_equal(rb[:]["state"], arrays["state"])
