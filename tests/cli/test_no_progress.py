"""Every command takes ``--progress/--no-progress`` (the README says so): the long ones to hide their bar, the
quick ones so that a script can pass it to all of them."""

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tests.cli.buffers import make_buffer
from trajstore.cli.main import app

runner = CliRunner()


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every leaf command of the (typer's click) group, as (words typed after ``trajstore``, command)."""
    out = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (typer vendors its own click: no isinstance check)
            out += _commands(command, prefix + (name,))
        else:
            out.append((prefix + (name,), command))
    return out


COMMANDS = _commands(typer.main.get_command(app))


def test_the_commands_are_all_found():
    names = {" ".join(words) for words, _ in COMMANDS}
    assert {"record", "info", "stats", "episodes", "formats", "preview", "verify", "copy", "merge", "push", "pull",
            "import lerobot", "import zarr", "import rosbag", "import rlds", "import robomimic", "import aloha",
            "export lerobot", "export zarr", "export robomimic"} <= names


@pytest.mark.parametrize("words", [words for words, _ in COMMANDS], ids=lambda words: " ".join(words))
def test_every_command_takes_no_progress(words):
    command = dict(COMMANDS)[words]
    flags = {flag for param in command.params for flag in (*param.opts, *param.secondary_opts)}
    assert {"--progress", "--no-progress"} <= flags, f"trajstore {' '.join(words)} lacks --no-progress"
    result = runner.invoke(app, [*words, "--help"], terminal_width=200)
    assert result.exit_code == 0 and "--no-progress" in result.output, result.output


@pytest.mark.parametrize("command", ["info", "stats", "episodes"])
def test_quick_commands_run_with_no_progress(tmp_path, command):
    folder = make_buffer(tmp_path / "rb")
    with_flag = runner.invoke(app, [command, str(folder), "--json", "--no-progress"])
    without = runner.invoke(app, [command, str(folder), "--json"])
    assert with_flag.exit_code == 0, with_flag.output
    assert with_flag.stdout == without.stdout and with_flag.stdout.startswith("{")  # no effect on what is printed


def test_formats_runs_with_no_progress():
    result = runner.invoke(app, ["formats", "--no-progress"], terminal_width=200)
    assert result.exit_code == 0 and "lerobot" in result.stdout
