"""`trajstore episodes`, `preview` and `info --json`: values, sizes, frame counts and one-line errors."""

import json

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from tests.cli.buffers import DATA, FPS, H, LENGTHS, W, make_buffer
from trajstore.cli.main import app
from trajstore.ops.preview import LABEL_HEIGHT, to_rgb, write_preview
from trajstore.ops.preview_sheet import CAPTION_LINE, CAPTION_PAD, HEADER_HEIGHT, MIN_WIDTH
from trajstore.replay_buffer import ReplayBuffer
from trajstore.ops.episodes import summarize_episodes
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_episodes_json_rows_and_fps_from_the_camera(tmp_path):
    path = make_buffer(tmp_path / "rb")
    result = cli("episodes", path, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["fps"] == FPS and doc["fps_source"] == "metadata of observation/pixels" and not doc["ring"]
    rows = doc["rows"]
    assert [r["id"] for r in rows] == [0, 1, 2, 3] and [r["steps"] for r in rows] == LENGTHS
    assert [r["task"] for r in rows] == [d["task"] for d in DATA]
    assert [r["success"] for r in rows] == [True, False, True, True]
    assert [r["interrupted"] for r in rows] == [False, False, True, False]
    assert [r["duration_s"] for r in rows] == pytest.approx([n / FPS for n in LENGTHS])
    table = cli("episodes", path).output
    assert "push the T" in table and "0.90" in table and "10 fps (metadata of observation/pixels)" in table
    assert "overwritten" not in table


def test_episodes_of_a_ring_show_overwritten_and_the_open_episode(tmp_path):
    path = make_buffer(tmp_path / "rb", capacity=20, open_steps=3)
    with ReplayBuffer.load_from(path) as rb:
        rows = summarize_episodes(rb).rows
    assert [(r.id, r.steps, r.overwritten, r.open) for r in rows] == [(1, 2, True, False), (2, 9, False, False),
                                                                      (3, 6, False, False), (4, 3, False, True)]
    out = cli("episodes", path).output
    assert "overwritten" in out and "open" in out


def test_episode_fps_from_the_step_space_or_none(tmp_path):
    no_camera_fps = make_buffer(tmp_path / "plain", fps=None)
    doc = json.loads(cli("episodes", no_camera_fps, "--json").output)
    assert doc["fps"] is None and doc["rows"][0]["duration_s"] is None
    assert "no fps in the metadata" in doc["fps_source"]
    assert "durations not shown: no fps" in cli("episodes", no_camera_fps).output
    space = DictSpace({"x": BoxSpace(-1, 1, (2,), np.float32)}, metadata={"fps": 50})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "root", storage_cls_map={"*": HDF5Storage}) as rb:
        rb.extend({"x": np.zeros((25, 2), np.float32)})
        rb.end_episode()
    doc = json.loads(cli("episodes", tmp_path / "root", "--json").output)
    assert doc["fps"] == 50 and doc["fps_source"] == "metadata of the buffer's step space"
    assert doc["rows"][0]["duration_s"] == pytest.approx(0.5)


def test_png_contact_sheet_has_the_expected_size(tmp_path):
    path = make_buffer(tmp_path / "rb", depth=True)
    result = cli("preview", path, "--episode", 2, "--out", tmp_path / "sheet.png", "--every", 2, "--no-plots")
    assert result.exit_code == 0, result.output
    tiles = len(range(0, LENGTHS[2], 2))  # 5
    up = 2  # 32 px wide frames are shown twice as large
    caption = 2 * CAPTION_PAD + 2 * CAPTION_LINE
    block = HEADER_HEIGHT + up * H + LABEL_HEIGHT
    with Image.open(tmp_path / "sheet.png") as im:
        assert im.size == (MIN_WIDTH, caption + 2 * block)  # one row per camera: pixels, depth
        sheet = np.asarray(im.convert("RGB"))
    with ReplayBuffer.load_from(path) as rb:
        shown = rb.get_at(rb.episode(2).start + np.arange(0, LENGTHS[2], 2))["observation"]
    y = caption + HEADER_HEIGHT
    for i in range(tiles):  # PNG frames: the tile is the frame itself, scaled up
        np.testing.assert_array_equal(sheet[y:y + up * H, i * up * W:(i + 1) * up * W],
                                      shown["pixels"][i].repeat(up, 0).repeat(up, 1))
    assert sheet[y + up * H:y + up * H + LABEL_HEIGHT, :up * W].max() > 100  # the label was drawn
    gray = to_rgb(shown["depth"])
    np.testing.assert_array_equal(sheet[y + block:y + block + up * H, :up * W], gray[0].repeat(up, 0).repeat(up, 1))
    only = write_preview(path, 2, tmp_path / "depth.png", camera="observation/depth", plots=False)
    assert only.cameras == ["observation/depth"] and only.frames == LENGTHS[2]  # 9 <= 16: every step
    with Image.open(tmp_path / "depth.png") as im:
        assert im.size == (MIN_WIDTH, caption + block)


def test_mp4_has_one_frame_per_step_and_every_camera(tmp_path):
    av = pytest.importorskip("av")
    path = make_buffer(tmp_path / "rb", depth=True)
    result = cli("preview", path, "--episode", 3, "--out", tmp_path / "ep.mp4", "--no-plots")
    assert result.exit_code == 0, result.output
    with av.open(str(tmp_path / "ep.mp4")) as c:
        stream = c.streams.video[0]
        assert (stream.width, stream.height) == (2 * W, H) and float(stream.average_rate) == FPS
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(stream)]
    assert len(frames) == LENGTHS[3]
    with ReplayBuffer.load_from(path) as rb:
        want = rb.get_episode(3)["observation"]["pixels"]
    err = np.abs(np.stack(frames)[:, :, :W].astype(int) - want.astype(int)).mean()
    assert err < 6  # the left half is the RGB camera (H.264, lossy)


def test_preview_errors_are_one_line(tmp_path):
    path = make_buffer(tmp_path / "rb")
    for args, message in [
        (["--episode", 9, "--out", tmp_path / "x.png"], "episode 9 is not held (the buffer holds ids 0..3)"),
        (["--episode", 0, "--out", tmp_path / "x.gif"], "unknown preview format '.gif'"),
        (["--episode", 0, "--out", tmp_path / "x.png", "--camera", "action"], "has no camera 'action'"),
    ]:
        result = cli("preview", path, *args)
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists() and not (tmp_path / "x.gif").exists()
    space = DictSpace({"x": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "nocam", storage_cls_map={"*": HDF5Storage}) as rb:
        rb.extend({"x": np.zeros((3, 2), np.float32)})
        rb.end_episode()
    result = cli("preview", tmp_path / "nocam", "--episode", 0, "--out", tmp_path / "x.png")
    assert result.exit_code == 2 and "has no camera leaf to preview" in result.output


def test_info_json_and_a_file_that_is_not_a_buffer(tmp_path):
    path = make_buffer(tmp_path / "rb")
    doc = json.loads(cli("info", path, "--json").output)
    assert doc["steps"] == sum(LENGTHS) and doc["episodes"] == 4 and doc["interrupted_episodes"] == 1
    assert {leaf["key"]: leaf["storage"] for leaf in doc["leaves"]}["observation/pixels"] == "ImageStorage"
    assert doc["nbytes"] == sum(s["nbytes"] for s in doc["storages"] + doc["final_observation_storages"]) > 0
    (tmp_path / "README.md").write_text("# not a buffer\n")
    result = cli("info", tmp_path / "README.md")
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {tmp_path / 'README.md'} is not a trajstore buffer folder: it is a file"
