"""The PNG preview: 16 frames per camera by default, tiles equal to the buffer's frames, sizes, plots, caption."""

import sys

import numpy as np
import pytest
from PIL import Image

from tests.ops.preview_buffers import DATA, H, W, WH, WW
from trajstore.ops.preview import write_preview
from trajstore.ops.preview_plots import EXTRA_NOTE
from trajstore.ops.preview_sheet import (CAPTION_LINE, CAPTION_PAD, HEADER_HEIGHT, LABEL_HEIGHT, MIN_WIDTH,
                                         caption_text, tile_scale)
from trajstore.replay_buffer import ReplayBuffer

EVEN16 = [0, 20, 40, 60, 80, 100, 120, 140, 159, 179, 199, 219, 239, 259, 279, 299]


def frames_at(path, episode, steps):
    with ReplayBuffer.load_from(path) as rb:
        batch = rb.get_at(rb.episode(episode).start + np.asarray(steps))
    return batch["observation"]["pixels"], batch["observation"]["wrist"]


def tiles(sheet, origin, n, th, tw, columns=16):
    x0, y0 = origin
    return [sheet[y0 + (i // columns) * (th + LABEL_HEIGHT):][:th, x0 + (i % columns) * tw:][:, :tw] for i in range(n)]


def test_300_steps_give_16_frames_per_camera_equal_to_the_buffers(buffer300, tmp_path):
    result = write_preview(buffer300, 0, tmp_path / "s.png", plots=False)
    assert result.frames == 16 and result.steps == EVEN16
    assert result.cameras == ["observation/pixels", "observation/wrist"]
    (up_p, _), (up_w, _) = tile_scale(H, W), tile_scale(WH, WW)
    assert (up_p, up_w) == (2, 4)  # both narrower than 64 px: shown scaled up
    ph, pw, wh, ww = H * up_p, W * up_p, WH * up_w, WW * up_w
    width = max(MIN_WIDTH, 16 * pw, 16 * ww)  # 1280
    caption_h = 2 * CAPTION_PAD + 2 * CAPTION_LINE  # episode line + data line
    height = caption_h + (HEADER_HEIGHT + ph + LABEL_HEIGHT) + (HEADER_HEIGHT + wh + LABEL_HEIGHT)
    with Image.open(tmp_path / "s.png") as im:
        assert im.size == result.size == (width, height) == (1280, 236)
        sheet = np.asarray(im.convert("RGB"))
    assert result.tiles_at == {"observation/pixels": (0, caption_h + HEADER_HEIGHT),
                               "observation/wrist": (0, caption_h + 2 * HEADER_HEIGHT + ph + LABEL_HEIGHT)}
    pixels, wrist = frames_at(buffer300, 0, EVEN16)
    for got, want in zip(tiles(sheet, result.tiles_at["observation/pixels"], 16, ph, pw), pixels):
        np.testing.assert_array_equal(got, want.repeat(up_p, 0).repeat(up_p, 1))
    for got, want in zip(tiles(sheet, result.tiles_at["observation/wrist"], 16, wh, ww), wrist):
        np.testing.assert_array_equal(got, want.repeat(up_w, 0).repeat(up_w, 1))
    # a tile at a neighbouring step would differ (every frame is distinct noise)
    assert not np.array_equal(tiles(sheet, result.tiles_at["observation/pixels"], 9, ph, pw)[8],
                              frames_at(buffer300, 0, [160])[0][0].repeat(2, 0).repeat(2, 1))


def test_every_50_gives_6_frames_at_0_50_to_250(buffer300, tmp_path):
    result = write_preview(buffer300, 0, tmp_path / "s.png", every=50, camera="observation/pixels", plots=False)
    assert result.steps == [0, 50, 100, 150, 200, 250] and result.frames == 6
    assert result.cameras == ["observation/pixels"]
    with Image.open(tmp_path / "s.png") as im:
        sheet = np.asarray(im.convert("RGB"))
        assert im.width == MIN_WIDTH and im.height == 2 * CAPTION_PAD + 2 * CAPTION_LINE + HEADER_HEIGHT + 2 * H + \
            LABEL_HEIGHT
    pixels, _ = frames_at(buffer300, 0, result.steps)
    for got, want in zip(tiles(sheet, result.tiles_at["observation/pixels"], 6, 2 * H, 2 * W), pixels):
        np.testing.assert_array_equal(got, want.repeat(2, 0).repeat(2, 1))


def test_a_large_frame_is_shown_smaller_and_a_wide_enough_one_as_it_is():
    assert tile_scale(96, 96) == (1, 1)
    assert tile_scale(480, 480) == (1, 2)
    assert tile_scale(480, 640) == (1, 3)
    assert tile_scale(12, 20) == (4, 1)


def test_plots_make_the_sheet_taller_and_are_named(buffer300, tmp_path):
    pytest.importorskip("matplotlib")
    bare = write_preview(buffer300, 0, tmp_path / "bare.png", plots=False)
    full = write_preview(buffer300, 0, tmp_path / "full.png")
    assert full.size[0] == bare.size[0] and full.size[1] > bare.size[1] + 150
    assert full.plots == ["observation/state", "action", "reward", "done"]
    assert full.notes == ["not plotted: observation/wide (32 dims, more than 16), note (text)"]
    assert full.tiles_at == bare.tiles_at  # the plots are below the frames
    with Image.open(tmp_path / "full.png") as im:
        below = np.asarray(im.convert("RGB"))[bare.size[1]:]
    assert (below < 128).any(axis=-1).mean() > 0.01  # lines, ticks and titles drawn below the frames
    assert "plots of observation/state, action, reward, done" in full.line()


def test_without_matplotlib_the_sheet_is_written_and_names_the_extra(buffer300, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    result = write_preview(buffer300, 0, tmp_path / "s.png")
    bare = write_preview(buffer300, 0, tmp_path / "bare.png", plots=False)
    assert result.plots == [] and result.notes[-1] == f"no plots: {EXTRA_NOTE}"
    assert "pip install 'trajstore[preview]'" in result.line()
    assert result.size[0] == bare.size[0] and result.size[1] > bare.size[1]  # only the note lines more


def test_caption_has_the_episode_and_its_data():
    text = caption_text(0, 300, DATA[0], duration_s=30.0, time_source="at 10 fps, metadata of observation/pixels")
    assert text == ("episode 0: 300 steps, 30.00 s (at 10 fps, metadata of observation/pixels)\n"
                    "task: push the T to the goal · success: true · seed: 7")
    data_first = caption_text(4, 9, {"seed": 3, "success": False, "task": "stack", "operator": "ana"},
                              interrupted=True)
    assert data_first == "episode 4: 9 steps, interrupted\ntask: stack · success: false · seed: 3 · operator: ana"
    assert caption_text(1, 2, {}).endswith("(no episode data)")
    assert caption_text(1, 2, {}, overwritten=True).startswith(
        "episode 1: 2 steps, oldest steps overwritten (steps counted from the first held one)\n")


def test_large_frames_are_reduced_by_an_integer_factor():
    from trajstore.ops.preview_sheet import camera_block, scaled_for_display

    frames = np.random.default_rng(1).integers(0, 256, (2, 480, 640, 3), dtype=np.uint8)
    shown = scaled_for_display(frames)
    assert shown.shape == (2, 160, 214, 3)  # 1/3 (ceil), as Pillow's reduce
    np.testing.assert_array_equal(shown[1], np.asarray(Image.fromarray(frames[1]).reduce(3)))
    block = camera_block("cam", frames, [0, 5], [0.0, 0.5])
    assert block.size == (2 * 214, HEADER_HEIGHT + 160 + LABEL_HEIGHT)
