"""`trajstore export lerobot|zarr STREAMBUF`: --streams, --exclude, --no-progress, --anchor without --fps, and
the notes and refusals that name what to do on the command line."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("pyarrow")  # trajstore.interop.lerobot writes parquet

from tests.cli.stream_buffers import make_imu_buffer, make_stream_buffer
from trajstore.cli.main import app
from trajstore.errors import UnknownLeafError
from trajstore.interop.lerobot.export import export_lerobot
from trajstore.ops.stream_export import anchor_fps, export_stream_buffer, gaps_note
from trajstore.replay_buffer import ReplayBuffer
from trajstore.streams import StreamBuffer

runner = CliRunner()


def run(*args):
    r = runner.invoke(app, [str(a) for a in args])
    return r, " ".join(r.output.split())


@pytest.fixture(scope="module")
def imu(tmp_path_factory):
    return make_imu_buffer(tmp_path_factory.mktemp("imu") / "sb")


@pytest.fixture(scope="module")
def sbuf(tmp_path_factory):
    return make_stream_buffer(tmp_path_factory.mktemp("streams") / "sb")


def lerobot_features(out):
    return list(json.loads((out / "meta" / "info.json").read_text())["features"])


def test_a_leaf_lerobot_cannot_hold_is_refused_naming_both_ways_round_it(imu, tmp_path):
    r, text = run("export", "lerobot", imu, tmp_path / "lr", "--anchor", "cam", "--fps", "10")
    assert r.exit_code == 2
    assert "leaf 'imu/covariance': shape (3, 3) is not exported" in text
    assert "--exclude imu/covariance" in text and "--streams cam --streams cmd" in text
    assert not (tmp_path / "lr").exists()


def test_exclude_leaves_the_leaf_out(imu, tmp_path):
    out = tmp_path / "lr"
    r, text = run("export", "lerobot", imu, out, "--anchor", "cam", "--fps", "10", "--exclude", "imu/covariance",
                  "--images", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "exported 2 episodes, 18 frames at 10 fps" in text
    assert lerobot_features(out)[:3] == ["cam", "imu.gyro", "cmd"]
    r, _ = run("import", "lerobot", out, tmp_path / "back", "--camera", "png", "--no-progress")
    assert r.exit_code == 0, r.output
    with ReplayBuffer.load_from(tmp_path / "back") as rb:
        got = rb.get_at(slice(0, len(rb)))
    # gyro (previous) at the camera times k * 100 ms: sample 10 k; episode 1 lacks frames 3 and 6
    cam1 = np.delete(np.arange(10), [3, 6])
    np.testing.assert_array_equal(got["imu"]["gyro"][:, 0], np.concatenate([np.arange(10), cam1]) * 10)
    r, text = run("export", "lerobot", imu, tmp_path / "lr2", "--anchor", "cam", "--fps", "10", "--exclude", "imu/nope")
    assert r.exit_code == 2 and "imu/nope" in text and "imu/covariance" in text
    with StreamBuffer.load_from(imu) as buf, pytest.raises(UnknownLeafError, match="imu/nope"):
        export_lerobot(buf.aligned(anchor="cam"), tmp_path / "lr3", fps=10, exclude=["imu/nope"])


def test_streams_picks_the_streams_of_both_exports(imu, tmp_path):
    r, text = run("export", "lerobot", imu, tmp_path / "lr", "--anchor", "cam", "--fps", "10", "--streams", "cam",
                  "--streams", "cmd", "--images", "--no-progress")
    assert r.exit_code == 0, r.output
    features = lerobot_features(tmp_path / "lr")
    assert features[:2] == ["cam", "cmd"] and "imu.gyro" not in features
    r, text = run("export", "zarr", imu, tmp_path / "z", "--anchor", "imu", "--streams", "imu", "--no-progress",
                  "--compressor", "raw")
    assert r.exit_code == 0, r.output
    assert "(200 steps, 4 arrays" in text  # imu/gyro, imu/covariance, timestamp, is_pad.imu
    import zarr

    assert sorted(zarr.open_group(str(tmp_path / "z"), mode="r")["data"].keys()) == [
        "imu.covariance", "imu.gyro", "is_pad.imu", "timestamp"]
    # the other options must name included streams; a stream that is not one is refused naming the option
    r, text = run("export", "zarr", imu, tmp_path / "z2", "--anchor", "imu", "--streams", "imu", "--how", "cmd=nearest")
    assert r.exit_code == 2 and "--how: stream 'cmd' is not among the exported streams" in text
    r, text = run("export", "zarr", imu, tmp_path / "z2", "--anchor", "imu", "--streams", "gps")
    assert r.exit_code == 2 and "--streams: 'gps' is not a stream of the buffer" in text
    from tests.cli.buffers import make_buffer

    r, text = run("export", "lerobot", make_buffer(tmp_path / "rb"), tmp_path / "lr2", "--streams", "cam")
    assert r.exit_code == 2 and "not a stream buffer" in text and "--streams" in text
    assert not (tmp_path / "z2").exists() and not (tmp_path / "lr2").exists()


def test_anchor_without_fps_records_the_fps_metadata_else_the_measured_rate(imu, tmp_path):
    r, text = run("export", "lerobot", imu, tmp_path / "lr", "--anchor", "cmd", "--exclude", "imu/covariance",
                  "--images", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "note: no --fps: recording 20 fps, the fps metadata of the anchor stream 'cmd'" in text
    assert "40 frames at 20 fps" in text
    r, text = run("export", "lerobot", imu, tmp_path / "lr2", "--anchor", "cam", "--streams", "cam", "--images",
                  "--no-progress")
    assert r.exit_code == 0, r.output
    assert "note: no --fps: recording 10 fps, the measured median rate of the anchor stream 'cam'" in text
    assert json.loads((tmp_path / "lr2" / "meta" / "info.json").read_text())["fps"] == 10
    with StreamBuffer.load_from(imu) as buf:
        assert anchor_fps(buf, "cmd")[0] == 20.0 and anchor_fps(buf, "imu")[0] == pytest.approx(100.0)


def test_a_frame_rate_error_names_the_cli_option(sbuf, tmp_path):
    # a replay buffer without fps metadata: the refusal names --fps (and fps= for Python)
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"action": BoxSpace(-1, 1, (2,), np.float32)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"action": np.zeros((3, 2), np.float32)})
        rb.end_episode()
    r, text = run("export", "lerobot", tmp_path / "rb", tmp_path / "lr")
    assert r.exit_code == 2 and "no leaf has metadata 'fps'" in text and "on the command line --fps" in text
    r, text = run("export", "lerobot", sbuf, tmp_path / "lr2", "--fps", "0")
    assert r.exit_code == 2 and "--fps must be a positive number of Hz" in text
    assert not (tmp_path / "lr").exists() and not (tmp_path / "lr2").exists()


def test_gaps_of_the_anchor_are_noted_per_episode(imu, sbuf, tmp_path):
    r, text = run("export", "lerobot", imu, tmp_path / "lr", "--anchor", "cam", "--fps", "10", "--streams", "cam",
                  "--images", "--no-progress")
    assert r.exit_code == 0, r.output
    assert ("note: the anchor stream 'cam' has 2 gaps (dropped samples, periods over 1.5 x its median 100 ms) in 1 "
            "of the 2 exported episodes (episode 1: 2)") in text
    assert "frame_index / fps (10)" in text and "--fps HZ without --anchor" in text
    with StreamBuffer.load_from(imu) as buf:
        assert gaps_note(buf, "cam", [0], 10) is None  # episode 0 has none
        assert gaps_note(buf, "cmd", [0, 1], 20) is None
    # on a regular grid there is no anchor stream, and no such note
    r, text = run("export", "lerobot", sbuf, tmp_path / "lr2", "--fps", "30", "--images", "--no-progress")
    assert r.exit_code == 0 and "note: the anchor stream" not in text
    _, notes = export_stream_buffer("lerobot", sbuf, tmp_path / "lr3", anchor="wrist", fps=30, camera="image",
                                    episodes=[1])
    [gaps] = [n for n in notes if " gap" in n]
    assert gaps.startswith("the anchor stream 'wrist' has 1 gap (")
    assert "in 1 of the 1 exported episodes (episode 1: 1)" in gaps


def test_export_lerobot_takes_no_progress(sbuf, tmp_path):
    r, _ = run("export", "lerobot", "--help")
    assert "--no-progress" in r.output and "--exclude" in r.output and "--streams" in r.output
    r, text = run("export", "lerobot", sbuf, tmp_path / "lr", "--fps", "30", "--images", "--no-progress")
    assert r.exit_code == 0 and "frame/s" not in r.output


def test_zarr_refusal_names_every_leaf_and_the_cli_option(tmp_path):
    from trajstore.errors import UnsupportedSpaceError
    from trajstore.interop.zarr import export_zarr
    from trajstore.spaces import BoxSpace, DictSpace, TextSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    space = DictSpace({"action": BoxSpace(-1, 1, (2,), np.float32), "task": TextSpace(20), "note": TextSpace(20)})
    with ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                             **dict_storage_kwargs_from_space(space)) as rb:
        rb.extend({"action": np.zeros((3, 2), np.float32), "task": ["a", "b", "c"], "note": ["x", "y", "z"]})
        rb.end_episode()
    with pytest.raises(UnsupportedSpaceError, match=r"exclude=\['task', 'note'\] \(on the command line "
                                                    r"--exclude task --exclude note\)"):
        export_zarr(tmp_path / "rb", tmp_path / "z")
    r, text = run("export", "zarr", tmp_path / "rb", tmp_path / "z", "--exclude", "task", "--exclude", "note",
                  "--no-progress")
    assert r.exit_code == 0 and "1 array" in text
