"""kill -9 of `trajstore copy` and `trajstore merge` in a subprocess, at moments the test sees happen in
the hidden staging folder beside the destination (it appears, its buffer is created, it holds
committed episodes): the destination is then absent (or whole, if the rename won the race), and the
same command run again succeeds, removes the staging folder the killed run left, and writes every
episode. And the rule by which a staging folder counts as left behind (:func:`remove_stale_staging`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trajstore._fs import STALE_UNOWNED_SECONDS, remove_stale_staging
from trajstore.ops.verify import verify_buffer
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.metadata import read_meta

from tests.cli.buffers import make_buffer

SRC = str(Path(__file__).resolve().parents[2] / "src")
CLI = [sys.executable, "-c", "import sys; from trajstore.cli.main import app; sys.argv[0] = 'trajstore'; app()"]
EPISODES = 60


def _buffer(path: Path, episodes: int, first: int = 0) -> Path:
    return make_buffer(path, lengths=[3] * episodes, data=[{"n": first + k} for k in range(episodes)],
                       interrupted=[False] * episodes)


def _run(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(CLI + args + ["--no-progress"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _staging(dst: Path) -> list[Path]:
    if not dst.parent.exists():
        return []
    return [p for p in dst.parent.iterdir() if p.name.startswith(f".{dst.name}.") and p.name.endswith(".partial")]


def _building(dst: Path) -> list[Path]:
    """The folders a run may be writing the new buffer into: its staging folder (or ``dst`` itself)."""
    return _staging(dst) + ([dst] if dst.exists() else [])


def _committed_steps(dst: Path) -> int:
    """Steps committed in the folder being built (0 before its buffer exists)."""
    for folder in _building(dst):
        try:
            return int(read_meta(folder)["ring"]["count"])
        except Exception:  # noqa: BLE001 - not made yet, or renamed meanwhile
            return 0
    return 0


MOMENTS = {
    "folder made": lambda dst: bool(_building(dst)),
    "buffer created": lambda dst: any((p / "trajstore.json").exists() for p in _building(dst)),
    "20 episodes committed": lambda dst: _committed_steps(dst) >= 20 * 3,
    "40 episodes committed": lambda dst: _committed_steps(dst) >= 40 * 3,
}


def _kill_when(proc: subprocess.Popen, seen, limit_s: float = 120.0) -> bool:
    """kill -9 ``proc`` as soon as ``seen()`` is true; False if it ended first."""
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:
        if seen():
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            return True
        time.sleep(0.002)
    proc.communicate()
    return False


def _data(path: Path) -> list:
    with ReplayBuffer.load_from(path) as rb:
        return [e.data for e in rb.episodes]


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["copy", "merge"])
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_killed_copy_or_merge_leaves_no_partial_destination_and_runs_again(tmp_path, tool, moment):
    if tool == "copy":
        sources = [_buffer(tmp_path / "src", EPISODES)]
    else:
        sources = [_buffer(tmp_path / f"src{i}", EPISODES // 3, i * EPISODES // 3) for i in range(3)]
    dst = tmp_path / "out" / "dst"
    args = [tool, *map(str, sources), str(dst)]
    killed = _kill_when(_run(args), lambda: MOMENTS[moment](dst))
    assert killed, f"the {tool} ended before the moment came"
    if dst.exists():  # killed after the rename: then it is whole
        assert _data(dst) == [{"n": k} for k in range(EPISODES)]
    else:
        assert _staging(dst), "the killed run's staging folder should be left for the next run to remove"
    if dst.exists():
        return
    proc = _run(args)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert _staging(dst) == []
    assert [p.name for p in dst.parent.iterdir()] == ["dst"]  # no owner file left either
    assert verify_buffer(dst).steps == EPISODES * 3
    assert _data(dst) == [{"n": k} for k in range(EPISODES)]


# -- which staging folders count as left behind ------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _make_staging(parent: Path, pid: int, owner: dict | None, age_s: float = 0.0) -> Path:
    folder = parent / f".dst.{pid}.partial"
    folder.mkdir()
    (folder / "trajstore.json").write_text("{}")
    if owner is not None:
        (parent / f".dst.{pid}.partial.owner").write_text(json.dumps(owner))
    if age_s:
        t = time.time() - age_s
        os.utime(folder, (t, t))
    return folder


def test_only_staging_folders_of_dead_runs_on_this_host_are_removed(tmp_path):
    from trajstore._fs import _process_start

    host = socket.gethostname()
    dead, dead1, dead2, dead3, dead4 = (_dead_pid() for _ in range(5))
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = _make_staging(tmp_path, alive.pid, {"host": host, "pid": alive.pid, "start": _process_start(alive.pid)})
        reused = _make_staging(tmp_path, os.getppid(), {"host": host, "pid": os.getppid(), "start": "another:1"})
        gone = _make_staging(tmp_path, dead, {"host": host, "pid": dead, "start": "x:1"})
        other_host = _make_staging(tmp_path, dead1, {"host": host + "-elsewhere", "pid": dead1, "start": None})
        old_unowned = _make_staging(tmp_path, dead2, None, age_s=STALE_UNOWNED_SECONDS + 60)
        new_unowned = _make_staging(tmp_path, dead3, None)
        other_name = tmp_path / f".dst2.{dead}.partial"
        other_name.mkdir()
        owner_only = tmp_path / f".dst.{dead4}.partial.owner"  # killed before its folder was made
        owner_only.write_text(json.dumps({"host": host, "pid": dead4, "start": None}))
        if any(_pid_alive_now(p) for p in (dead, dead1, dead2, dead3, dead4)):
            pytest.skip("a process id this test takes as dead was reused meanwhile")
        removed = remove_stale_staging(tmp_path / "dst")
        assert sorted(removed) == sorted([reused, gone, old_unowned, tmp_path / f".dst.{dead4}.partial"])
        assert live.exists() and other_host.exists() and new_unowned.exists() and other_name.exists()
        assert not reused.exists() and not gone.exists() and not old_unowned.exists() and not owner_only.exists()
        assert not (tmp_path / f".dst.{dead}.partial.owner").exists()
    finally:
        alive.kill()
        alive.wait()


def _pid_alive_now(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
