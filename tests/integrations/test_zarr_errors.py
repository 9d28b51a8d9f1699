"""Diffusion Policy zarr layout: bad input is refused before anything is written; codecs; the CLI."""

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")
imagecodecs = pytest.importorskip("imagecodecs")

from typer.testing import CliRunner  # noqa: E402

from tests.integrations.zarr_helpers import make_buffer, make_dp_group  # noqa: E402
from trajstore.cli.main import app  # noqa: E402
from trajstore.errors import FormatError, StorageExistsError, UnknownLeafError, UnsupportedSpaceError  # noqa: E402
from trajstore.interop.zarr.codecs import codec_classes, frame_compressor  # noqa: E402
from trajstore.interop.zarr import export_zarr, import_zarr  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.spaces import BoxSpace, DictSpace, TextSpace  # noqa: E402
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space  # noqa: E402


def _nothing_made(tmp_path, name="rb"):
    assert not (tmp_path / name).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_missing_episode_ends(tmp_path):
    make_dp_group(tmp_path / "dp")
    del zarr.open_group(str(tmp_path / "dp"), mode="r+")["meta"]["episode_ends"]
    with pytest.raises(FormatError, match="meta/episode_ends is missing"):
        import_zarr(tmp_path / "dp", tmp_path / "rb")
    _nothing_made(tmp_path)


@pytest.mark.parametrize("ends, episode", [((6, 6, 17), 1), ((10, 6, 17), 1), ((0, 6, 17), 0)])
def test_episode_ends_not_increasing(tmp_path, ends, episode):
    make_dp_group(tmp_path / "dp")
    zarr.open_group(str(tmp_path / "dp"), mode="r+")["meta/episode_ends"][:] = np.array(ends, np.int64)
    with pytest.raises(FormatError, match=f"not strictly increasing.*episode {episode} ends at {ends[episode]}"):
        import_zarr(tmp_path / "dp", tmp_path / "rb")
    _nothing_made(tmp_path)


def test_array_of_another_length_is_named(tmp_path):
    make_dp_group(tmp_path / "dp", extra={"reward": np.zeros(16, np.float32)})
    with pytest.raises(FormatError, match=r"data/reward has 16 steps, meta/episode_ends says 17"):
        import_zarr(tmp_path / "dp", tmp_path / "rb")
    _nothing_made(tmp_path)


def test_not_a_group_and_no_data(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        import_zarr(tmp_path / "nope", tmp_path / "rb")
    g = zarr.open_group(str(tmp_path / "meta_only"), mode="w", zarr_format=2)
    g.create_array("meta/episode_ends", shape=(1,), dtype=np.int64)[:] = [3]
    with pytest.raises(FormatError, match="the data group is missing"):
        import_zarr(tmp_path / "meta_only", tmp_path / "rb")
    _nothing_made(tmp_path)


def test_image_keys_must_name_frames(tmp_path):
    make_dp_group(tmp_path / "dp")
    with pytest.raises(FormatError, match=r"data/state: image_keys names it.*\(N, H, W, 3\)"):
        import_zarr(tmp_path / "dp", tmp_path / "rb", image_keys=["state"])
    with pytest.raises(KeyError, match=r"image_keys names \['camera'\]"):
        import_zarr(tmp_path / "dp", tmp_path / "rb", image_keys=["camera"])
    with pytest.raises(KeyError, match=r"key_map names \['imgs'\]"):
        import_zarr(tmp_path / "dp", tmp_path / "rb", key_map={"imgs": "x"})
    with pytest.raises(FormatError, match="clash"):
        import_zarr(tmp_path / "dp", tmp_path / "rb", key_map={"img": "obs", "state": "obs/state"})
    _nothing_made(tmp_path)


def test_float_frames_that_are_not_whole_numbers_leave_nothing(tmp_path):
    arrays = make_dp_group(tmp_path / "dp", img_dtype=np.float32)
    g = zarr.open_group(str(tmp_path / "dp"), mode="r+")
    img = arrays["img"].copy()
    img[12, 3, 4, 1] = 17.5
    g["data/img"][:] = img
    with pytest.raises(FormatError, match=r"data/img: .*17.5 at index \(12, 3, 4, 1\) is not a whole number in 0..255"):
        import_zarr(tmp_path / "dp", tmp_path / "rb", image_keys=["img"])
    _nothing_made(tmp_path)


def test_out_must_be_new(tmp_path):
    make_dp_group(tmp_path / "dp")
    (tmp_path / "rb").mkdir()
    (tmp_path / "rb" / "keep.txt").write_text("mine")
    with pytest.raises(StorageExistsError):
        import_zarr(tmp_path / "dp", tmp_path / "rb")
    assert (tmp_path / "rb" / "keep.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    import_zarr(tmp_path / "dp", tmp_path / "empty")  # an empty folder is fine
    with ReplayBuffer.load_from(tmp_path / "empty") as rb:
        assert len(rb) == 17


def test_export_refuses_text_leaves_unless_excluded(tmp_path):
    space = DictSpace({"action": BoxSpace(-1, 1, (2,), np.float32), "task": TextSpace(20)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"action": np.zeros((3, 2), np.float32), "task": ["a", "b", "c"]})
        rb.end_episode()
    with pytest.raises(UnsupportedSpaceError, match="leaf 'task': TextSpace"):
        export_zarr(tmp_path / "rb", tmp_path / "z")
    _nothing_made(tmp_path, "z")
    summary = export_zarr(tmp_path / "rb", tmp_path / "z", exclude=["task"])
    assert summary.keys == {"action": "action"}


def test_export_key_errors(tmp_path):
    make_buffer(tmp_path / "rb")
    with pytest.raises(ValueError, match="both map to the zarr key 'action'"):
        export_zarr(tmp_path / "rb", tmp_path / "z", key_map={"count": "action"})
    with pytest.raises(UnknownLeafError, match="not leaves of the buffer"):
        export_zarr(tmp_path / "rb", tmp_path / "z", key_map={"observation/pix": "img"})
    with pytest.raises(ValueError, match="cannot name a zarr array"):
        export_zarr(tmp_path / "rb", tmp_path / "z", key_map={"count": "a/b"})
    with pytest.raises(ValueError, match="compressor must be one of"):
        export_zarr(tmp_path / "rb", tmp_path / "z", compressor="png")
    _nothing_made(tmp_path, "z")


def test_frames_are_readable_by_imagecodecs_own_codec_and_configs_from_newer_writers(tmp_path):
    from imagecodecs.numcodecs import Jpeg2k, Jpegxl

    frame = np.random.default_rng(0).integers(0, 256, (1, 8, 12, 3), dtype=np.uint8)
    for ours, theirs in ((frame_compressor("jpeg2k", lossless=True), Jpeg2k),
                         (frame_compressor("jpegxl", lossless=True), Jpegxl)):
        encoded = ours.encode(frame)
        decoded = theirs.from_config({k: v for k, v in ours.get_config().items() if k != "id"}).decode(encoded)
        np.testing.assert_array_equal(np.asarray(decoded).reshape(frame.shape), frame)
    Jpeg2kFrames, _ = codec_classes()
    newer = Jpeg2k(level=50).get_config()  # has keys (planar, mct, squeeze) Diffusion Policy's copy lacks
    codec = Jpeg2kFrames.from_config(newer)
    assert codec.level == 50 and set(codec.get_config()) == {"id", *Jpeg2kFrames.config_keys}
    out = np.zeros_like(frame)
    codec.decode(Jpeg2k(level=50).encode(frame[0]), out=out)
    assert np.abs(out.astype(int) - frame).mean() < 8  # filled in place


def test_cli_import_export(tmp_path):
    make_dp_group(tmp_path / "dp")
    runner = CliRunner()
    result = runner.invoke(app, ["import", "zarr", str(tmp_path / "dp"), str(tmp_path / "rb"), "--camera", "png",
                                 "--key", "img=observation/image", "--fps", "5", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "imported 3 episodes (17 steps, 4 leaves)" in result.output
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert rb.space["observation"]["image"].metadata["fps"] == 5
    result = runner.invoke(app, ["export", "zarr", str(tmp_path / "rb"), str(tmp_path / "z"), "--compressor", "raw",
                                 "--episode", "2", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "exported 1 episode (7 steps, 4 arrays" in result.output
    g = zarr.open_group(str(tmp_path / "z"), mode="r")
    assert sorted(g["data"].array_keys()) == ["action", "img", "keypoint", "state"]
    result = runner.invoke(app, ["import", "zarr", str(tmp_path / "dp"), str(tmp_path / "rb"), "--no-progress"])
    assert result.exit_code == 2 and result.output.startswith("error:") and "already exists" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    result = runner.invoke(app, ["import", "zarr", str(tmp_path / "dp"), str(tmp_path / "x"), "--image-key", "cam"])
    assert result.exit_code == 2 and "image_keys names ['cam']" in result.output
    result = runner.invoke(app, ["export", "zarr", str(tmp_path / "dp"), str(tmp_path / "y")])  # not a buffer
    assert result.exit_code == 2 and result.output.startswith("error:")
