"""``push`` of a damaged folder (a payload file missing, no writer): refused with ``DamagedDataError``
naming the file, before anything is made at the URL, and never diagnosed as a writer's race."""

from __future__ import annotations

import re
import shutil

import pytest
from typer.testing import CliRunner

from trajstore.cli.main import app
from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.remote import push
from trajstore.remote.snapshot import take_snapshot

from tests.remote.conftest import make_buffer

CHUNK = "storage/observation.rgb/chunks/000001.bin"


@pytest.fixture
def damaged(tmp_path):
    """A closed three-episode buffer (small image chunks) whose second rgb chunk is deleted."""
    with make_buffer(tmp_path / "rb", episodes=3, chunk_bytes=2000):
        pass
    (tmp_path / "rb" / CHUNK).unlink()
    return tmp_path / "rb"


def test_push_refuses_a_damaged_folder_naming_the_file_and_uploads_nothing(tmp_path, damaged):
    target = tmp_path / "remote"
    with pytest.raises(DamagedDataError, match=re.escape(CHUNK)) as info:
        push(damaged, target.as_uri())
    assert "reused" not in str(info.value)
    assert not target.exists()  # nothing made, nothing uploaded


def test_a_copy_of_an_unchanging_damaged_folder_is_damage_not_a_race(tmp_path, damaged):
    # The copy alone (no read-only open first): a payload file an index names is missing while
    # nothing in the folder changes, so no writer deleted it.
    with pytest.raises(DamagedDataError, match=re.escape(CHUNK)):
        take_snapshot(damaged, tmp_path / "staged")


def test_cli_push_of_a_damaged_folder_prints_one_line_and_exits_1(tmp_path, damaged):
    out = CliRunner().invoke(app, ["push", str(damaged), (tmp_path / "remote").as_uri(), "--no-progress"])
    assert out.exit_code == 1, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and CHUNK in lines[0], out.output
    assert not (tmp_path / "remote").exists()


def test_a_healthy_copy_of_the_damaged_folder_pushes(tmp_path, damaged):
    from trajstore.ops.copy import copy_episodes

    with pytest.warns(DamagedBufferWarning), ReplayBuffer.load_from(damaged) as rb:
        lost = set(rb.damaged.episodes)
    assert lost and len(lost) < 3
    copy_episodes(damaged, tmp_path / "copy", skip_damaged=True)
    report = push(tmp_path / "copy", (tmp_path / "remote").as_uri())
    assert report.generation == 1 and report.steps == 12 * (3 - len(lost))
    shutil.rmtree(tmp_path / "remote")
