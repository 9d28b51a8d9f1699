"""ALOHA import: episode selections (index = the N of episode_N.hdf5), key_map, files ignored, the CLI."""

from __future__ import annotations

import numpy as np
import pytest

from tests.interop_aloha import episodes as E
from trajstore.errors import InvalidValueError
from trajstore.interop.aloha import import_aloha
from trajstore.replay_buffer import ReplayBuffer


@pytest.fixture
def src(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    held = {n: E.write_raw(folder / f"episode_{n}.hdf5", n, steps=4 + n) for n in (0, 2, 5, 11)}
    return folder, held


def _files(out):
    return [e.data["file"] for e in ReplayBuffer.load_from(out).episodes]


@pytest.mark.parametrize("episodes, want", [
    ("0,5,11", ["episode_0.hdf5", "episode_5.hdf5", "episode_11.hdf5"]),
    ("steps > 6", ["episode_5.hdf5", "episode_11.hdf5"]),
    ([11, 2], ["episode_11.hdf5", "episode_2.hdf5"]),  # a list is imported in the order given
])
def test_selection(src, tmp_path, episodes, want):
    folder, held = src
    summary = import_aloha(folder, tmp_path / "out", episodes=episodes, camera="png")
    assert _files(tmp_path / "out") == want
    assert summary.steps == sum(4 + int(w.split("_")[1].split(".")[0]) for w in want)
    rb = ReplayBuffer.load_from(tmp_path / "out")
    e = rb.episodes[0]
    n = int(want[0].split("_")[1].split(".")[0])
    np.testing.assert_array_equal(rb[e.start:e.stop]["observation"]["qpos"], held[n]["qpos"])


@pytest.mark.parametrize("episodes, message", [([3], r"episodes \[3\] are not in the source"),
                                               ("steps > 100", "selects none"),
                                               ([0, 0], "more than once")])
def test_bad_selection(src, tmp_path, episodes, message):
    with pytest.raises(InvalidValueError, match=message):
        import_aloha(src[0], tmp_path / "out", episodes=episodes)
    assert not (tmp_path / "out").exists()


def test_other_files_ignored(src, tmp_path):
    folder, _ = src
    (folder / "notes.txt").write_text("not an episode")
    (folder / "episode_1.h5").write_bytes(b"ignored: not .hdf5")
    (folder / "mirror_episode_3.hdf5").write_bytes(b"ignored: another name")
    (folder / "sub").mkdir()
    E.write_raw(folder / "sub" / "episode_7.hdf5", 7)  # subfolders are not searched
    import_aloha(folder, tmp_path / "out", camera="png")
    assert _files(tmp_path / "out") == ["episode_0.hdf5", "episode_2.hdf5", "episode_5.hdf5", "episode_11.hdf5"]


def test_key_map(src, tmp_path):
    folder, held = src
    summary = import_aloha(folder, tmp_path / "out", camera="png", episodes=[0],
                           key_map={"/observations/images/top": "observation/images/front", "action": "act/joints"})
    assert summary.leaves["observations/images/top"] == "observation/images/front"
    assert summary.leaves["action"] == "act/joints"
    got = ReplayBuffer.load_from(tmp_path / "out")[0:4]
    np.testing.assert_array_equal(got["act"]["joints"], held[0]["action"])
    np.testing.assert_array_equal(got["observation"]["images"]["front"], held[0]["images"]["top"])
    assert set(got["observation"]["images"]) == {"front", "angle"}


@pytest.mark.parametrize("key_map, message", [
    ({"observations/wrist": "x"}, r"names \['observations/wrist'\].*they hold \['action'"),
    ({"action": "observation/qpos"}, "one leaf cannot be another"),
    ({"action": "observation"}, "one leaf cannot be another or hold it"),
    ({"action": "a//b"}, "not of the form"),
])
def test_bad_key_map(src, tmp_path, key_map, message):
    with pytest.raises(InvalidValueError, match=message):
        import_aloha(src[0], tmp_path / "out", key_map=key_map)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fps", [0, -1.0, float("nan"), "50", True])
def test_bad_fps(src, tmp_path, fps):
    with pytest.raises(InvalidValueError, match="fps"):
        import_aloha(src[0], tmp_path / "out", fps=fps)


def test_unknown_camera(src, tmp_path):
    with pytest.raises(ValueError, match="camera must be one of"):
        import_aloha(src[0], tmp_path / "out", camera="gif")


def _cli(*args):
    import typer
    from typer.testing import CliRunner

    from trajstore.cli.aloha import import_aloha_command

    app = typer.Typer()
    app.command("aloha")(import_aloha_command)
    app.command("other")(lambda: None)  # two commands: typer keeps the "aloha" name
    return CliRunner().invoke(app, ["aloha", *map(str, args)])


def test_cli(src, tmp_path):
    folder, held = src
    result = _cli(folder, tmp_path / "out", "--episodes", "2,11", "--key", "action=act", "--camera", "png",
                  "--fps", "25", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "imported 2 episodes (21 steps, 5 leaves)" in result.output
    rb = ReplayBuffer.load_from(tmp_path / "out")
    assert [e.data["file"] for e in rb.episodes] == ["episode_2.hdf5", "episode_11.hdf5"]
    np.testing.assert_array_equal(rb[0:6]["act"], held[2]["action"])
    assert rb.space["observation"]["images"]["top"].metadata["fps"] == 25


def test_cli_errors(src, tmp_path):
    folder, _ = src
    result = _cli(folder, tmp_path / "out", "--key", "action")
    assert result.exit_code == 2 and "expected NAME=TARGET" in result.output
    result = _cli(folder, tmp_path / "out", "--key", "nope=x")
    assert result.exit_code == 2 and "error:" in result.output and "nope" in result.output
    (folder / "episode_99.hdf5").write_bytes(b"garbage")
    result = _cli(folder, tmp_path / "out")
    assert result.exit_code == 2 and "episode_99.hdf5: not an HDF5 file" in result.output
    assert not (tmp_path / "out").exists()


def test_selection_over_episode_data(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    for n, sim in ((0, True), (1, False), (2, True)):
        E.write_raw(folder / f"episode_{n}.hdf5", n, sim=sim)
    import_aloha(folder, tmp_path / "out", episodes="sim == false", camera="png")
    assert _files(tmp_path / "out") == ["episode_1.hdf5"]
    meta = dict(ReplayBuffer.load_from(tmp_path / "out").space.metadata)["aloha"]
    assert list(meta["episodes"]) == [1] and dict(meta["attrs"]) == {"sim": False}
