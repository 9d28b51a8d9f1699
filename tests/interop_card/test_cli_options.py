"""``trajstore import/export lerobot|zarr`` options: what the CLI hands the library (--key, --policy-keys,
--episodes and the hidden old --episode, --license, --tag), and ``trajstore formats``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from trajstore.cli.main import app

runner = CliRunner()


@pytest.fixture
def fake_export(monkeypatch):
    pytest.importorskip("pyarrow")  # the lerobot package imports its parquet writer
    import trajstore.interop.lerobot.export as export_module

    calls = []

    def export_lerobot(src, out, **kwargs):
        calls.append((src, out, kwargs))
        return SimpleNamespace(line=lambda: f"exported to {out}")

    monkeypatch.setattr(export_module, "export_lerobot", export_lerobot)
    return calls


@pytest.fixture
def fake_import(monkeypatch):
    pytest.importorskip("pyarrow")  # the lerobot package imports its parquet writer
    import trajstore.interop.lerobot as lerobot_package

    calls = []

    def import_lerobot(src, out, **kwargs):
        calls.append((src, out, kwargs))
        return SimpleNamespace(line=lambda: f"imported into {out}")

    monkeypatch.setattr(lerobot_package, "import_lerobot", import_lerobot)
    return calls


def test_export_lerobot_passes_keys_preset_selection_license_tags(tmp_path, fake_export):
    result = runner.invoke(app, ["export", "lerobot", str(tmp_path), str(tmp_path / "out"), "--no-progress",
                                 "--key", "observation/agent_pos=observation.state",
                                 "--key", "cam=observation.images.top",
                                 "--policy-keys", "--episodes", "success == true", "--license", "mit",
                                 "--tag", "pusht", "--tag", "sim"])
    assert result.exit_code == 0, result.output
    (_, out, kwargs), = fake_export
    assert out == tmp_path / "out" and f"exported to {tmp_path / 'out'}" in result.output
    assert kwargs["key_map"] == {"observation/agent_pos": "observation.state", "cam": "observation.images.top",
                                 "*": "policy"}
    assert kwargs["episodes"] == "success == true"
    assert kwargs["license"] == "mit" and kwargs["tags"] == ("pusht", "sim")


def test_export_lerobot_defaults_and_preset_alone(tmp_path, fake_export):
    assert runner.invoke(app, ["export", "lerobot", str(tmp_path), str(tmp_path / "a"), "--no-progress"]).exit_code == 0
    assert runner.invoke(app, ["export", "lerobot", str(tmp_path), str(tmp_path / "b"), "--no-progress",
                               "--policy-keys"]).exit_code == 0
    first, second = (kwargs for _, _, kwargs in fake_export)
    assert first["episodes"] is None  # the library's defaults: no key_map, license or tags passed
    assert not {"key_map", "license", "tags"} & set(first)
    assert second["key_map"] == "policy"


def test_old_episode_option_still_works_hidden(tmp_path, fake_export, fake_import):
    result = runner.invoke(app, ["export", "lerobot", str(tmp_path), str(tmp_path / "a"), "--no-progress",
                                 "--episode", "2", "--episode", "0"])
    assert result.exit_code == 0, result.output
    assert fake_export[-1][2]["episodes"] == [2, 0]
    assert "--episode is deprecated; use --episodes 2,0" in result.output  # the note (on stderr)
    result = runner.invoke(app, ["import", "lerobot", str(tmp_path), str(tmp_path / "b"), "--no-progress",
                                 "-e", "1"])
    assert result.exit_code == 0, result.output
    assert fake_import[-1][2]["episodes"] == [1]
    both = runner.invoke(app, ["export", "lerobot", str(tmp_path), str(tmp_path / "c"), "--episode", "1",
                               "--episodes", "1"], terminal_width=300)
    assert both.exit_code == 2 and "older --episode, not" in both.output
    for cmd in (["export", "lerobot"], ["import", "lerobot"], ["export", "zarr"]):
        help_text = runner.invoke(app, [*cmd, "--help"], terminal_width=200).output
        assert "--episodes" in help_text and "--episode " not in help_text and "Deprecated" not in help_text


def test_import_lerobot_passes_keys_and_selection(tmp_path, fake_import):
    result = runner.invoke(app, ["import", "lerobot", str(tmp_path), str(tmp_path / "rb"), "--no-progress",
                                 "--key", "observation.images.front=observation/front", "--episodes", "0,3-4",
                                 "--camera", "png"])
    assert result.exit_code == 0, result.output
    (_, out, kwargs), = fake_import
    assert kwargs == {"camera": "png", "episodes": "0,3-4", "key_map": {"observation.images.front":
                                                                        "observation/front"}, "progress": False}
    runner.invoke(app, ["import", "lerobot", str(tmp_path), str(tmp_path / "rb2"), "--no-progress"])
    assert fake_import[-1][2] == {"camera": "jpeg", "episodes": None, "progress": False}
    bad = runner.invoke(app, ["import", "lerobot", str(tmp_path), str(tmp_path / "x"), "--key", "nokey"],
                        terminal_width=300)
    assert bad.exit_code == 2 and "expected NAME=TARGET" in bad.output


def test_export_zarr_episodes_selection_and_old_option(tmp_path):
    pytest.importorskip("zarr")
    import zarr

    from tests.integrations.zarr_helpers import make_buffer

    make_buffer(tmp_path / "rb")  # episodes 0 (success False), 1 (interrupted), 2 (success True)
    result = runner.invoke(app, ["export", "zarr", str(tmp_path / "rb"), str(tmp_path / "z"), "--no-progress",
                                 "--episodes", "seed >= 0 and not interrupted", "--compressor", "raw"])
    assert result.exit_code == 0, result.output
    assert "exported 2 episodes (9 steps, 5 arrays" in result.output and "frames are" not in result.output
    assert zarr.open_group(str(tmp_path / "z"), mode="r")["meta/episode_ends"][:].tolist() == [5, 9]
    result = runner.invoke(app, ["export", "zarr", str(tmp_path / "rb"), str(tmp_path / "z1"), "--no-progress",
                                 "--episode", "1"])
    assert result.exit_code == 0, result.output
    assert "exported 1 episode (9 steps" in result.output
    assert "frames are imagecodecs_jpeg2k" in result.output and "register_codecs()" in result.output
    result = runner.invoke(app, ["export", "zarr", str(tmp_path / "rb"), str(tmp_path / "z2"), "--no-progress",
                                 "--episodes", "success == maybe"])
    assert result.exit_code == 2 and result.output.startswith("error:")
    result = runner.invoke(app, ["export", "zarr", str(tmp_path / "rb"), str(tmp_path / "z3"), "--no-progress",
                                 "--episodes", "7"])
    assert result.exit_code == 2 and "episodes [7] are not held" in result.output
    assert not (tmp_path / "z2").exists() and not (tmp_path / "z3").exists()


def test_formats_command_lists_the_registry():
    from trajstore.cli.formats import formats_command
    from trajstore.interop.formats import FORMATS

    local = typer.Typer()
    local.command("formats")(formats_command)
    local.command("other")(lambda: None)  # two commands: "formats" stays a subcommand
    result = runner.invoke(local, ["formats"], terminal_width=400)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for fmt in FORMATS.values():
        row = next(line for line in lines if line.startswith(f"│ {fmt.name} "))
        assert fmt.title.split()[0] in row
        ways = " / ".join(w for w, fn in (("import", fmt.import_fn), ("export", fmt.export_fn)) if fn)
        assert ways in row
        assert (f"trajstore[{fmt.extra}]" if fmt.extra else " - ") in row
    assert "trajstore[zarr]" in result.output and "import / export" in result.output
    assert "import only" in result.output


def test_import_zarr_episodes_selection(tmp_path):
    pytest.importorskip("zarr")
    import numpy as np

    from tests.integrations.zarr_helpers import make_dp_group
    from trajstore.replay_buffer import ReplayBuffer

    arrays = make_dp_group(tmp_path / "dp")  # episode ends 6, 10, 17
    result = runner.invoke(app, ["import", "zarr", str(tmp_path / "dp"), str(tmp_path / "rb"), "--no-progress",
                                 "--camera", "png", "--episodes", "0,2"])
    assert result.exit_code == 0, result.output
    assert "imported 2 episodes (13 steps, 4 leaves)" in result.output
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert [len(e) for e in rb.episodes] == [6, 7]
        np.testing.assert_array_equal(rb.get_at(slice(0, 13))["state"],
                                      np.concatenate([arrays["state"][:6], arrays["state"][10:17]]))
    result = runner.invoke(app, ["import", "zarr", str(tmp_path / "dp"), str(tmp_path / "rb2"), "--no-progress",
                                 "--episodes", "steps > 5"])
    assert result.exit_code == 0, result.output
    assert "imported 2 episodes (13 steps" in result.output
    result = runner.invoke(app, ["import", "zarr", str(tmp_path / "dp"), str(tmp_path / "rb3"), "--no-progress",
                                 "--episodes", "5"])
    assert result.exit_code == 2 and result.output.startswith("error:") and not (tmp_path / "rb3").exists()
