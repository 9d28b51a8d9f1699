"""`trajstore preview` as a user runs it: --frames / --every / --no-plots, what it prints, one-line errors."""

import pytest
from PIL import Image
from typer.testing import CliRunner

from tests.ops.preview_buffers import make_buffer
from trajstore.cli.main import app

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args] + ["--no-progress"])


@pytest.fixture(scope="module")
def rb(tmp_path_factory):
    return make_buffer(tmp_path_factory.mktemp("pv") / "rb", lengths=[120, 40])


def test_frames_and_every_choose_the_tiles(rb, tmp_path):
    out = tmp_path / "a.png"
    result = cli("preview", rb, "--episode", 0, "--out", out, "--every", 50, "--no-plots")
    assert result.exit_code == 0, result.output
    assert "observation/pixels, observation/wrist, 3 frames" in result.output  # steps 0, 50, 100
    result = cli("preview", rb, "--episode", 0, "--out", out, "--frames", 5, "--no-plots",
                 "--camera", "observation/pixels")
    assert result.exit_code == 0 and "observation/pixels, 5 frames" in result.output, result.output
    with Image.open(out) as im:
        assert im.width == 640  # 5 tiles of 64 px: the sheet's minimum width


def test_default_prints_the_plots_and_the_leaves_left_out(rb, tmp_path):
    pytest.importorskip("matplotlib")
    result = cli("preview", rb, "--episode", 1, "--out", tmp_path / "a.png")
    assert result.exit_code == 0, result.output
    assert "16 frames" in result.output and "plots of observation/state, action, reward, done" in result.output
    assert "not plotted: observation/wide (32 dims, more than 16), note (text)" in result.output


@pytest.mark.parametrize("args, message", [
    (["--frames", 0], "error: --frames must be a whole number >= 1, got 0"),
    (["--every", 0], "error: --every must be a whole number >= 1, got 0"),
    (["--frames", 4, "--every", 2], "error: give --frames or --every, not both"),
    (["--episode", 7], "error: episode 7 is not held (the buffer holds ids 0..1)"),
    (["--camera", "observation/state"], "has no camera 'observation/state'; its cameras: "
                                        "['observation/pixels', 'observation/wrist']"),
])
def test_errors_say_what_was_expected(rb, tmp_path, args, message):
    base = {"--episode": 0, "--out": tmp_path / "x.png"}
    for k in args[0::2]:
        base.pop(k, None)
    flat = [str(a) for kv in base.items() for a in kv]
    result = cli("preview", rb, *flat, *args)
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_frames_with_an_mp4_is_refused(rb, tmp_path):
    result = cli("preview", rb, "--episode", 0, "--out", tmp_path / "x.mp4", "--every", 5)
    assert result.exit_code == 2
    assert "--frames and --every choose the frames of a .png sheet; an .mp4 preview shows every step" in result.output
