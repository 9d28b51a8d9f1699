"""The two commands, registered on a local typer app as cli/main.py will register them."""

from __future__ import annotations

import h5py
import typer
from typer.testing import CliRunner

from trajstore.cli.robomimic import export_robomimic_command, import_robomimic_command
from trajstore.replay_buffer import ReplayBuffer

from .files import FIXTURE

app = typer.Typer()
app.command("import")(import_robomimic_command)
app.command("export")(export_robomimic_command)
runner = CliRunner()


def test_import_then_export(tmp_path):
    res = runner.invoke(app, ["import", str(FIXTURE), str(tmp_path / "b"), "--mask", "train", "--episodes", "1",
                              "--camera", "png", "--key", "obs/object=observation/cube", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert f"imported 1 episode (16 steps, 10 leaves) into {tmp_path / 'b'}" in res.output
    with ReplayBuffer.load_from(tmp_path / "b") as rb:
        assert rb.episode(0).data["demo"] == "demo_1" and "cube" in rb.space["observation"].spaces
    res = runner.invoke(app, ["export", str(tmp_path / "b"), str(tmp_path / "x.hdf5"), "--key",
                              "observation/cube=obs/object", "--mask", "all=0", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "exported 1 demo (16 samples, 10 datasets each; masks all 1)" in res.output
    with h5py.File(tmp_path / "x.hdf5", "r") as f:
        assert f["data/demo_0/obs/object"].shape == (16, 10) and f["mask/all"][:].tolist() == [b"demo_0"]
    res = runner.invoke(app, ["export", str(tmp_path / "b"), str(tmp_path / "y.hdf5"), "--val-fraction", "1",
                              "--no-progress"])
    assert res.exit_code == 0 and "masks train 0, valid 1" in res.output, res.output


def test_errors_exit_2_on_one_line(tmp_path):
    res = runner.invoke(app, ["import", str(FIXTURE), str(tmp_path / "b"), "--mask", "nope", "--no-progress"])
    assert res.exit_code == 2 and "error:" in res.output and "no filter key mask/nope" in res.output
    res = runner.invoke(app, ["import", str(FIXTURE), str(tmp_path / "b"), "--key", "obs/object", "--no-progress"])
    assert res.exit_code == 2 and "expected NAME=TARGET" in res.output
    res = runner.invoke(app, ["export", str(tmp_path / "nothere"), str(tmp_path / "x.hdf5"), "--no-progress"])
    assert res.exit_code == 2 and "error:" in res.output
    assert not (tmp_path / "b").exists() and not (tmp_path / "x.hdf5").exists()


def test_a_leaf_renamed_at_import_comes_back_under_its_key(tmp_path):
    res = runner.invoke(app, ["import", str(FIXTURE), str(tmp_path / "b"), "--episodes", "0", "--camera", "png",
                              "--key", "obs/agentview_image=observation/images/front", "--no-progress"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["export", str(tmp_path / "b"), str(tmp_path / "x.hdf5"), "--no-progress"])
    assert res.exit_code == 0, res.output
    with h5py.File(tmp_path / "x.hdf5", "r") as f, h5py.File(FIXTURE, "r") as src:
        assert "images_front" not in f["data/demo_0/obs"]
        for key in ("obs/agentview_image", "next_obs/agentview_image"):
            assert (f[f"data/demo_0/{key}"][:] == src[f"data/demo_0/{key}"][:]).all(), key
