"""How an export's file appears: never over something that appeared at OUT meanwhile (a user's file, another
export's), and temporary files of killed exports are removed by the next export of that OUT."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import h5py
import numpy as np
import pytest

import trajstore.interop.robomimic.export as export_module
from trajstore._fs import owner_record
from trajstore.errors import StorageExistsError
from trajstore.interop.robomimic import export_robomimic
from trajstore.interop.robomimic._publish import remove_stale_temps

from .files import recorded


def _hidden(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _during_write(monkeypatch, action):
    """Run ``action()`` once the export's data is written to its temporary file, before it is published."""
    real = export_module._write

    def write(*args, **kwargs):
        real(*args, **kwargs)
        action()
    monkeypatch.setattr(export_module, "_write", write)


@pytest.mark.parametrize("what", ["file", "folder", "dangling symlink"])
def test_something_appearing_at_out_while_exporting_is_kept(tmp_path, monkeypatch, what):
    out = tmp_path / "o.hdf5"

    def appear():
        if what == "file":
            out.write_bytes(b"precious user data")
        elif what == "folder":
            out.mkdir()
        else:
            out.symlink_to(tmp_path / "nowhere")
    _during_write(monkeypatch, appear)
    with recorded(tmp_path / "rb") as rb:
        with pytest.raises(StorageExistsError, match="o.hdf5 appeared while exporting .another process wrote "
                                                     "it.; nothing was written there"):
            export_robomimic(rb, out)
    if what == "file":
        assert out.read_bytes() == b"precious user data"
    elif what == "folder":
        assert out.is_dir() and list(out.iterdir()) == []
    else:
        assert out.is_symlink() and os.readlink(out) == str(tmp_path / "nowhere")
    assert _hidden(tmp_path) == []  # the temporary file and its owner record are gone


def test_two_exports_to_one_out_one_wins_the_other_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "o.hdf5"
    with recorded(tmp_path / "rb") as rb:
        second = []

        def another_export():  # runs, and finishes, while the first export's file is written
            if not second:
                second.append(None)
                second.append(export_robomimic(rb, out, episodes=[2]))
        _during_write(monkeypatch, another_export)
        with pytest.raises(StorageExistsError, match="appeared while exporting"):
            export_robomimic(rb, out, episodes=[0, 1])
    assert second[1].episodes == [2]
    with h5py.File(out, "r") as f:  # the winner's file, whole
        assert sorted(f["data"]) == ["demo_0"] and f["data/demo_0"].attrs["num_samples"] == 5
        np.testing.assert_array_equal(f["data/demo_0/obs/agent_pos"][:, 0], [2] * 5)
    assert _hidden(tmp_path) == []


KILLED = """
import os, signal, sys
import trajstore.interop.robomimic.export as ex
real = ex._write
def write(*args, **kwargs):
    real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # killed once the temporary file holds the data
ex._write = write
ex.export_robomimic(sys.argv[1], sys.argv[2])
"""


def test_a_killed_exports_temporary_file_is_removed_by_the_next_export(tmp_path):
    with recorded(tmp_path / "rb"):
        pass
    out = tmp_path / "o.hdf5"
    proc = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path / "rb"), str(out)], env=dict(os.environ),
                          capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    left = _hidden(tmp_path)
    assert not out.exists() and len(left) == 2, left  # the file and its owner record
    temp = tmp_path / next(n for n in left if n.endswith(".partial"))
    assert temp.stat().st_size > 0 and temp.name.startswith(".o.hdf5.")
    owner = json.loads((tmp_path / (temp.name + ".owner")).read_text())
    assert owner["host"] == socket.gethostname() and isinstance(owner["pid"], int)

    result = export_robomimic(tmp_path / "rb", out)
    assert result.episodes == [0, 1, 2]
    assert _hidden(tmp_path) == []
    with h5py.File(out, "r") as f:
        assert [f[f"data/demo_{e}"].attrs["num_samples"] for e in range(3)] == [4, 3, 5]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_only_temporaries_of_dead_exports_on_this_host_are_removed(tmp_path):
    host = socket.gethostname()
    out = tmp_path / "o.hdf5"
    dead, dead_owner_only = (_dead_pid() for _ in range(2))
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        def temp(pid, owner, token="0123abcd"):
            path = tmp_path / f".o.hdf5.{pid}-{token}.partial"
            path.write_bytes(b"x" * 100)
            if owner is not None:
                (tmp_path / (path.name + ".owner")).write_text(json.dumps(owner))
            return path

        mine = owner_record()
        live = temp(alive.pid, {"host": host, "pid": alive.pid, "start": None})
        this_run = temp(os.getpid(), mine, "00000001")  # this process's own (another export running now)
        reused = temp(os.getpid(), {**mine, "start": "another-boot:1"}, "00000002")  # an earlier holder of the id
        gone = temp(dead, {"host": host, "pid": dead, "start": "x:1"})
        elsewhere = temp(dead, {"host": host + "-elsewhere", "pid": dead, "start": None}, "00000003")
        owner_only = tmp_path / f".o.hdf5.{dead_owner_only}-0123abcd.partial.owner"
        owner_only.write_text(json.dumps({"host": host, "pid": dead_owner_only, "start": None}))
        other_out = tmp_path / f".p.hdf5.{dead}-0123abcd.partial"
        other_out.write_bytes(b"x")
        if any(_alive(p) for p in (dead, dead_owner_only)):
            pytest.skip("a process id this test takes as dead was reused meanwhile")
        removed = remove_stale_temps(out)
        assert sorted(removed) == sorted([reused, gone, tmp_path / owner_only.name[:-len(".owner")]])
        for kept in (live, this_run, elsewhere, other_out):
            assert kept.exists(), kept.name
        for path in (reused, gone, owner_only):
            assert not path.exists(), path.name
        assert not (tmp_path / (gone.name + ".owner")).exists() and (tmp_path / (live.name + ".owner")).exists()
    finally:
        alive.kill()
        alive.wait()
