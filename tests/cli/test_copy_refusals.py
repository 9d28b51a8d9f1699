"""copy / merge refusals: an all-damaged selection with skip_damaged, an output folder inside its source (or
holding it), a folder that appears at the output while copying, a full disk (the error names the output
and the copy is closed); the CLI prints trajstore's warnings as one ``warning:`` line."""

import errno
import gc
import os
import subprocess
import warnings

import pytest
from typer.testing import CliRunner

from tests.cli.buffers import make_buffer
from tests.replay_buffer.test_damaged_payload import build, damaged_steps
from trajstore._fs import staged_folder
from trajstore.cli.main import app
from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.errors import InvalidValueError, StorageExistsError
from trajstore.ops import copy, copy_episodes, merge_buffers
from trajstore.replay_buffer import ReplayBuffer

runner = CliRunner()


@pytest.fixture
def damaged(tmp_path):
    """A PNG buffer of 3 episodes whose episode 1 lost a payload file."""
    path = tmp_path / "rb"
    build(path, "PNG")
    damaged_steps(path, "PNG")
    return path


def test_skip_damaged_with_every_selected_episode_damaged_writes_nothing(damaged, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DamagedBufferWarning)
        with pytest.raises(DamagedDataError, match=r"every selected episode is damaged \(episode\(s\) 1\)"):
            copy_episodes(damaged, tmp_path / "out", episodes=[1], skip_damaged=True)
        assert not (tmp_path / "out").exists()
        assert [p.name for p in tmp_path.iterdir()] == ["rb"]  # no staging folder left
        summary = copy_episodes(damaged, tmp_path / "empty", episodes=[1], skip_damaged=True, allow_empty=True)
        assert (summary.episodes, summary.skipped) == (0, [(str(damaged), 1)])
    result = runner.invoke(app, ["copy", str(damaged), str(tmp_path / "cli"), "--episodes", "1", "--skip-damaged",
                                 "--no-progress"])
    assert result.exit_code == 1 and "every selected episode is damaged" in result.output, result.output
    assert not (tmp_path / "cli").exists()
    result = runner.invoke(app, ["copy", str(damaged), str(tmp_path / "cli2"), "--episodes", "0,1", "--skip-damaged",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    with ReplayBuffer.load_from(tmp_path / "cli2") as rb:
        assert [e.data["k"] for e in rb.episodes] == [0]


@pytest.mark.parametrize("command", ["info", "episodes"])
def test_cli_prints_a_damaged_folder_warning_as_one_line(damaged, command):
    result = runner.invoke(app, [command, str(damaged)])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    warned = [line for line in lines if line.startswith("warning: ")]
    assert len(warned) == 1 and "000" in warned[0] and "missing" in warned[0], result.stderr
    assert "DamagedBufferWarning" not in result.stderr and ".py:" not in result.stderr


def test_copy_or_merge_into_its_own_source_is_refused(tmp_path):
    src = make_buffer(tmp_path / "src")
    other = make_buffer(tmp_path / "other")
    with pytest.raises(InvalidValueError, match=r"src/sub lies inside the source .*src"):
        copy_episodes(src, src / "sub")
    with pytest.raises(StorageExistsError):  # a folder holding data: that comes first
        copy_episodes(src, src)
    with pytest.raises(InvalidValueError, match=r"lies inside the source .*src"):
        merge_buffers([other, src], src / "storage" / "m")
    link = tmp_path / "link"
    link.symlink_to(src)
    with pytest.raises(InvalidValueError, match=r"link/sub lies inside the source .*src"):
        copy_episodes(src, link / "sub")
    assert sorted(p.name for p in src.iterdir()) == sorted(p.name for p in other.iterdir())  # nothing added
    for args in (["copy", str(src), str(src / "sub")], ["merge", str(other), str(src), str(src / "sub")]):
        result = runner.invoke(app, [*args, "--no-progress"])
        assert result.exit_code == 2 and str(src / "sub") in result.output and "Traceback" not in result.output
        assert not (src / "sub").exists()


def test_a_folder_that_appears_at_the_output_while_staging_is_storage_exists(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(StorageExistsError, match=f"{out} appeared while copying"):
        with staged_folder(out) as staging:
            staging.mkdir()
            (staging / "a").write_text("mine")
            out.mkdir()
            (out / "b").write_text("theirs")  # another copy finished first
    assert [p.name for p in out.iterdir()] == ["b"] and (out / "b").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # the staging folder and its owner file are gone


def test_a_full_disk_error_names_the_output_folder(tmp_path, monkeypatch):
    src = make_buffer(tmp_path / "src")
    real = copy._copy_episode

    def full(rb, k, out, progress):
        if k == 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(rb, k, out, progress)

    monkeypatch.setattr(copy, "_copy_episode", full)
    with pytest.raises(OSError, match=f"{tmp_path / 'dst'}: No space left on device") as info:
        copy_episodes(src, tmp_path / "dst")
    assert info.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def _mounted_tmpfs(path):
    if os.geteuid() != 0:
        return False
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_a_copy_onto_a_full_tmpfs_is_closed_and_named(tmp_path):
    """A real full disk: the flush fails too; the copy is given up closed (no 'was not closed' warning)."""
    mnt = tmp_path / "mnt"
    if not _mounted_tmpfs(mnt):
        pytest.skip("needs root and tmpfs to fill a disk")
    try:
        src = make_buffer(tmp_path / "src", lengths=(400, 400, 400, 400))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(OSError, match=f"{mnt / 'c'}: No space left on device"):
                copy_episodes(src, mnt / "c")
            gc.collect()
        assert not [w for w in caught if "was not closed" in str(w.message)]
        assert os.listdir(mnt) == []
    finally:
        gc.collect()  # files a failing copy left open would keep the mount busy
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
