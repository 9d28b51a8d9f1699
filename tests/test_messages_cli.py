"""The CLI's errors speak CLI: a misspelt option gets click's suggestion, and the library's Python advice
(``read_only=True``, ``skip_damaged=True``) is printed as what to type instead."""

import warnings

import pytest
import typer
from typer.testing import CliRunner

from tests.cli.buffers import make_buffer
from tests.replay_buffer.test_damaged_payload import build, damaged_steps
from trajstore.cli._advice import READING_COMMANDS, cli_words
from trajstore.cli._output import fail
from trajstore.cli.main import app
from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.errors import LockedError, ReadOnlyError
from trajstore.replay_buffer import ReplayBuffer

runner = CliRunner()

LOCK_ADVICE = (f"by another process; the commands that only read it ({READING_COMMANDS}) run meanwhile; to write "
               "to it (record --resume), let the other writer finish or stop it, then run the command again")


def _one_line(text):
    return " ".join(text.split())


def test_a_misspelt_option_gets_click_s_suggestion(tmp_path):
    result = runner.invoke(app, ["record", "--out", str(tmp_path / "rb"), "--capacty", "100"])
    assert result.exit_code == 2
    assert "No such option: --capacty (Possible options: --capacity)" in _one_line(result.output)
    assert not (tmp_path / "rb").exists()


def test_the_lock_error_of_the_library_is_printed_in_cli_words(tmp_path, capsys):
    folder = make_buffer(tmp_path / "rb")
    with ReplayBuffer.load_from(folder, read_only=False):
        with pytest.raises(LockedError) as info:
            ReplayBuffer.load_from(folder, read_only=False)
    assert "open it with read_only=True" in str(info.value)  # the library speaks Python ...
    assert isinstance(fail(info.value), typer.Exit)
    printed = _one_line(capsys.readouterr().err)
    assert printed == f"error: {folder} is open for writing elsewhere {LOCK_ADVICE}"  # ... the CLI its own words
    assert "read_only" not in printed


def test_record_resume_on_a_folder_being_written(tmp_path):
    pytest.importorskip("gym_pusht")  # the sim extra
    out = tmp_path / "rb"
    assert runner.invoke(app, ["record", "--out", str(out), "--episodes", "1", "--max-steps", "3",
                               "--no-progress"]).exit_code == 0
    with ReplayBuffer.load_from(out, read_only=False):
        result = runner.invoke(app, ["record", "--out", str(out), "--episodes", "1", "--max-steps", "3",
                                     "--no-progress", "--resume"])
    assert result.exit_code == 2
    assert _one_line(result.stderr) == f"error: {out} is open for writing elsewhere {LOCK_ADVICE}"


def test_copy_of_a_damaged_folder_says_pass_skip_damaged(tmp_path):
    damaged = tmp_path / "rb"
    build(damaged, "PNG")
    damaged_steps(damaged, "PNG")
    result = runner.invoke(app, ["copy", str(damaged), str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 1
    error = _one_line(result.stderr)
    assert "; pass --skip-damaged to copy the other episodes" in error and "skip_damaged=" not in error
    result = runner.invoke(app, ["copy", str(damaged), str(tmp_path / "out"), "--episodes", "1", "--skip-damaged",
                                 "--no-progress"])
    assert result.exit_code == 1
    assert _one_line(result.stderr).endswith("nothing was written (to write an empty buffer: pass --allow-empty)")


def test_the_damaged_folder_warning_names_the_command_that_lists_the_damage(tmp_path):
    damaged = tmp_path / "rb"
    build(damaged, "PNG")
    damaged_steps(damaged, "PNG")
    result = runner.invoke(app, ["info", str(damaged)])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and warned[0].endswith("the other steps read as usual (`trajstore verify PATH` lists them)")


def test_an_empty_selection_says_pass_allow_empty(tmp_path):
    src = make_buffer(tmp_path / "src")
    result = runner.invoke(app, ["copy", str(src), str(tmp_path / "dst"), "--episodes", "task == 'none'",
                                 "--no-progress"])
    assert result.exit_code == 2
    error = _one_line(result.stderr)
    assert error.endswith("nothing was written (to write an empty buffer: pass --allow-empty)") and "=True" not in error


def test_the_writer_s_refusal_of_a_damaged_folder_in_cli_words(tmp_path):
    damaged = tmp_path / "rb"
    build(damaged, "PNG")
    damaged_steps(damaged, "PNG")
    with pytest.raises(DamagedDataError) as info:
        ReplayBuffer.load_from(damaged, read_only=False)
    text = cli_words(_one_line(str(info.value)))
    assert text.endswith(f"a writer refuses a damaged folder (nothing was written): the commands that only read it "
                         f"({READING_COMMANDS}) read the other episodes; copy them out with "
                         "`trajstore copy SRC DST --skip-damaged`")


def test_the_read_only_refusal_in_cli_words(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DamagedBufferWarning)
        with ReplayBuffer.load_from(folder, read_only=True) as rb, pytest.raises(ReadOnlyError) as info:
            rb.end_episode()
    assert cli_words(str(info.value)) == (f"ReplayBuffer at {folder} is read-only; write to it with a command "
                                          "that writes (record --resume)")
