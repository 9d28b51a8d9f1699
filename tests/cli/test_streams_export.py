"""`trajstore export lerobot|zarr STREAMBUF OUT --fps/--anchor/--how/--tolerance`: a stream buffer exported
through its aligned view, read back with trajstore's own importers, gives the view's values."""

import json

import numpy as np
import pytest

pytest.importorskip("pyarrow")  # trajstore.interop.lerobot writes parquet

from tests.cli.stream_buffers import make_stream_buffer, run
from trajstore.interop.lerobot.export import export_lerobot
from trajstore.interop.zarr import export_zarr
from trajstore.ops.stream_export import aligned_for_export, export_stream_buffer, parse_how, parse_tolerance
from trajstore.replay_buffer import ReplayBuffer
from trajstore.streams import StreamBuffer


@pytest.fixture(scope="module")
def sbuf(tmp_path_factory):
    return make_stream_buffer(tmp_path_factory.mktemp("streams") / "sb")


def aligned_values(path, **kwargs):
    with StreamBuffer.load_from(path) as buf:
        view = buf.aligned(**kwargs)
        lengths = [len(e) for e in view.episodes]
        return view.get_at(slice(0, len(view))), lengths


def read_all(path):
    with ReplayBuffer.load_from(path) as rb:
        return rb.get_at(slice(0, len(rb))), [len(e) for e in rb.episodes], [e.data for e in rb.episodes], rb.space


def test_lerobot_export_at_the_anchor_reads_back_as_the_aligned_view(sbuf, tmp_path):
    r = run("export", "lerobot", sbuf, tmp_path / "lr", "--fps", "30", "--anchor", "wrist", "--how", "joints=linear",
            "--tolerance", "gripper=0.005", "--images")
    assert r.exit_code == 0, r.output
    assert "exported 2 episodes, 59 frames at 30 fps" in r.output
    # gripper (50 Hz, previous) lies more than 5 ms before 40 of the 59 frames: said, as LeRobot drops the masks
    assert "LeRobot has no place for is_pad: 40 of 59 frames of 'gripper'" in " ".join(r.output.split())
    info = json.loads((tmp_path / "lr" / "meta" / "info.json").read_text())
    # the streams are the features; the view's own timestamp and is_pad leaves are not exported
    assert list(info["features"]) == ["wrist", "joints", "gripper", "timestamp", "frame_index", "episode_index",
                                      "index", "task_index"]
    assert info["features"]["timestamp"]["dtype"] == "float32" and info["fps"] == 30
    r = run("import", "lerobot", tmp_path / "lr", tmp_path / "back", "--camera", "png", "--no-progress")
    assert r.exit_code == 0, r.output
    got, lengths, data, space = read_all(tmp_path / "back")
    want, want_lengths = aligned_values(sbuf, anchor="wrist", how={"joints": "linear"}, tolerance={"gripper": 0.005})
    assert lengths == want_lengths == [30, 29]
    assert [d["task"] for d in data] == ["pick", "place"]
    np.testing.assert_array_equal(got["wrist"], want["wrist"])  # PNG: exact
    np.testing.assert_array_equal(got["joints"], want["joints"])
    np.testing.assert_array_equal(got["gripper"], want["gripper"])  # a scalar leaf comes back shape ()
    # the values are really aligned: joints linear at the camera times (500 Hz, exact on a linear signal)
    t = (want["timestamp"][:30] - want["timestamp"][0]) / 1e9
    np.testing.assert_allclose(got["joints"][:30, 0], t / 0.002 / 8, rtol=0, atol=1e-4)
    # gripper: previous sample (50 Hz): value = its time in s, never after the frame's time
    assert np.all(got["gripper"][:30] <= t + 1e-9) and np.all(t - got["gripper"][:30] < 0.020)
    assert "is_pad" not in space.keys() and "timestamp" not in space.keys()


def test_lerobot_export_on_a_rate_grid(sbuf, tmp_path):
    r = run("export", "lerobot", sbuf, tmp_path / "lr", "--fps", "50", "--images")
    assert r.exit_code == 0, r.output
    want, want_lengths = aligned_values(sbuf, rate_hz=50.0)
    r = run("import", "lerobot", tmp_path / "lr", tmp_path / "back", "--camera", "png", "--no-progress")
    assert r.exit_code == 0, r.output
    got, lengths, _, _ = read_all(tmp_path / "back")
    # each episode: 50 Hz from the latest first sample (0) to the earliest last (wrist: 0.967 s) -> 49 steps
    assert lengths == want_lengths == [49, 49]
    np.testing.assert_array_equal(got["wrist"], want["wrist"])
    np.testing.assert_array_equal(got["joints"], want["joints"])
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "lr" / "data" / "chunk-000" / "file-000.parquet")
    ts = np.asarray(table.column("timestamp").to_numpy())
    np.testing.assert_allclose(ts[:49], np.arange(49) / 50, atol=1e-6)  # LeRobot's own time: frame_index / fps
    np.testing.assert_allclose((want["timestamp"][:49] - want["timestamp"][0]) / 1e9, ts[:49], atol=1e-6)


def test_zarr_export_keeps_the_anchor_times_and_masks(sbuf, tmp_path):
    r = run("export", "zarr", sbuf, tmp_path / "z", "--anchor", "gripper", "--how", "joints=nearest",
            "--tolerance", "wrist=0.01", "--compressor", "raw", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "exported 2 episodes (101 steps, 7 arrays" in r.output
    r = run("import", "zarr", tmp_path / "z", tmp_path / "back", "--camera", "png", "--no-progress")
    assert r.exit_code == 0, r.output
    got, lengths, data, space = read_all(tmp_path / "back")
    want, want_lengths = aligned_values(sbuf, anchor="gripper", how={"joints": "nearest"}, tolerance={"wrist": 0.01})
    assert lengths == want_lengths == [50, 51]
    assert [d["task"] for d in data] == ["pick", "place"]
    for key in ("wrist", "joints", "gripper", "timestamp"):
        np.testing.assert_array_equal(got[key], want[key])
    for name in ("wrist", "joints", "gripper"):
        np.testing.assert_array_equal(got["is_pad"][name], want["is_pad"][name])
    assert got["is_pad"]["wrist"].sum() > 0 and not got["is_pad"]["gripper"].any()  # real flags were carried
    assert str(space["timestamp"].dtype) == "int64"


def test_python_api_takes_a_view(sbuf, tmp_path):
    with StreamBuffer.load_from(sbuf) as buf:
        view = buf.aligned(anchor="wrist")
        res = export_lerobot(view, tmp_path / "lr", fps=30, camera="image")
        assert res.frames == 59 and res.episodes == [0, 1]
        res = export_zarr(view, tmp_path / "z", compressor=None, exclude=["timestamp", "is_pad/wrist",
                                                                          "is_pad/joints", "is_pad/gripper"])
        assert res.steps == 59 and set(res.keys) == {"wrist", "joints", "gripper"}
    summary, notes = export_stream_buffer("zarr", sbuf, tmp_path / "z2", anchor="wrist", compressor=None,
                                          episodes=[1])
    assert summary.episodes == 1 and summary.steps == 29 and notes == []


def test_an_anchor_far_from_the_fps_is_noted(sbuf, tmp_path):
    r = run("export", "lerobot", sbuf, tmp_path / "lr", "--fps", "30", "--anchor", "joints", "--images")
    assert r.exit_code == 0, r.output
    assert "note: the anchor stream 'joints' runs at 500 Hz" in r.output
    with StreamBuffer.load_from(sbuf) as buf:
        _, notes = aligned_for_export(buf, fps=500, anchor="joints")
        assert notes == []


def test_bad_options_are_refused_before_anything_is_written(sbuf, tmp_path):
    out = tmp_path / "lr"
    r = run("export", "lerobot", sbuf, out)
    assert r.exit_code == 2 and "--anchor NAME" in r.output and "--fps HZ" in r.output
    r = run("export", "lerobot", sbuf, out, "--fps", "30", "--how", "joints=cubic")
    assert r.exit_code == 2 and "--how" in r.output and "cubic" in r.output
    r = run("export", "lerobot", sbuf, out, "--fps", "30", "--how", "nope=linear")
    assert r.exit_code == 2 and "nope" in r.output
    r = run("export", "zarr", sbuf, tmp_path / "z", "--fps", "30", "--tolerance", "wrist=-1")
    assert r.exit_code == 2 and "--tolerance" in r.output
    r = run("export", "lerobot", sbuf, out, "--anchor", "wrist", "--fps", "30", "--how", "wrist=linear")
    assert r.exit_code == 2 and "wrist" in r.output  # linear needs float leaves: the camera is uint8
    assert not out.exists() and not (tmp_path / "z").exists()
    from tests.cli.buffers import make_buffer

    rb = make_buffer(tmp_path / "rb")
    r = run("export", "zarr", rb, tmp_path / "z", "--anchor", "wrist")
    assert r.exit_code == 2 and "not a stream buffer" in r.output


def test_option_parsing():
    assert parse_how(["joints=linear", "ft=nearest"]) == {"joints": "linear", "ft": "nearest"}
    assert parse_tolerance(["joints=0.02"]) == {"joints": 0.02}
    with pytest.raises(ValueError, match="given twice"):
        parse_how(["a=linear", "a=previous"])
    with pytest.raises(ValueError, match="STREAM=VALUE"):
        parse_tolerance(["0.02"])
