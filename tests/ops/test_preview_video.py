"""The MP4 preview: the plots beside the video, a cursor at the current step."""

import numpy as np
import pytest

from tests.cli.buffers import H, W, make_buffer
from trajstore.ops.preview import write_preview
from trajstore.ops.preview_plots import CURSOR_RGB, plot_series
from trajstore.ops.preview_video import MIN_PANEL_HEIGHT, PANEL_COLUMN_WIDTH, panel_size, scale_factor
from trajstore.replay_buffer import ReplayBuffer


def test_the_cursor_is_drawn_at_the_step_in_every_subplot():
    pytest.importorskip("matplotlib")
    n = 50
    plot = plot_series({"a": np.arange(n, dtype=float)[:, None], "b": np.ones((n, 2))}, width=400, height=300,
                       columns=1)
    assert plot.size == (400, 300) and len(plot.axes) == 2
    a, b = plot.axes
    assert a.bottom <= b.top and a.x_min == 0 and a.x_max == n - 1  # stacked, x axis = steps 0..n-1
    for step in (0, 20, 49):
        img = plot.with_cursor(step)
        for box in plot.axes:
            x = box.x_of(step)
            assert (img[box.top + 1:box.bottom - 1, x] == CURSOR_RGB).all()
        assert (img != plot.pixels).any(axis=-1).sum() == pytest.approx(2 * sum(x.bottom - x.top for x in plot.axes),
                                                                         abs=8)
    assert plot.axes[0].x_of(49) - plot.axes[0].x_of(0) == pytest.approx(a.right - a.left, abs=1)


def test_panel_and_scale_arithmetic():
    assert panel_size(24, 2) == (PANEL_COLUMN_WIDTH, MIN_PANEL_HEIGHT, 1)
    assert panel_size(24, 4) == (PANEL_COLUMN_WIDTH, 600, 1)  # 150 px per plot
    assert panel_size(24, 6) == (2 * PANEL_COLUMN_WIDTH, 450, 2)
    assert panel_size(481, 1) == (PANEL_COLUMN_WIDTH, 482, 1)  # even for 4:2:0
    assert scale_factor(24, 360) == 15 and scale_factor(480, 482) == 1


@pytest.fixture(scope="module")
def smooth(tmp_path_factory):
    """One 40-step episode of smooth frames (cheap to encode), leaves observation/state and action."""
    return make_buffer(tmp_path_factory.mktemp("pv") / "rb", lengths=[40], data=[{"task": "t"}],
                       interrupted=(False,))


def test_mp4_has_the_plots_beside_the_video(smooth, tmp_path):
    av = pytest.importorskip("av")
    pytest.importorskip("matplotlib")
    result = write_preview(smooth, 0, tmp_path / "ep.mp4")
    video_w = W
    width, height, _ = panel_size(H, 2)
    k = scale_factor(H, height)
    assert (width, height, k) == (PANEL_COLUMN_WIDTH, MIN_PANEL_HEIGHT, 15)
    assert result.size == (k * video_w + width, height) and result.size[0] > k * video_w
    assert result.frames == 40 and result.plots == ["observation/state", "action"]
    with av.open(str(tmp_path / "ep.mp4")) as c:
        stream = c.streams.video[0]
        assert (stream.width, stream.height) == result.size
        frames = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(stream)])
    assert len(frames) == 40
    with ReplayBuffer.load_from(smooth) as rb:
        want = rb.get_episode(0)["observation"]["pixels"]
    left = frames[:, :k * H, :k * W].astype(int)
    err = np.abs(left - want.repeat(k, 1).repeat(k, 2).astype(int)).mean()
    assert err < 6  # H.264 is lossy; the camera is there, scaled by k
    panel = frames[:, :, k * video_w:].astype(int)
    red = (panel[..., 0] - panel[..., 1] > 60) & (panel[..., 0] - panel[..., 2] > 60)  # 4:2:0 blurs its colour
    cols = [np.flatnonzero(red[i].sum(0) > 40) for i in (0, 20, 39)]
    assert all(len(c) for c in cols)
    assert cols[0].mean() < cols[1].mean() < cols[2].mean()  # the cursor moves right with the step


def test_mp4_without_plots_is_the_cameras_alone(smooth, tmp_path):
    pytest.importorskip("av")
    result = write_preview(smooth, 0, tmp_path / "ep.mp4", plots=False)
    assert result.size == (W, H) and result.plots == []
