"""kill -9 of `trajstore push` and `trajstore pull` in subprocesses, at moments the test sees happen
(the first new object in the bucket, the staging folder of a pull): the URL then reads as the
previous snapshot or the new one, whole; a push again completes; a pulled folder is absent or whole,
and the pull again removes the staging folder the killed one left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trajstore.remote import push
from trajstore.remote.layout import OBJECTS
from trajstore.replay_buffer import ReplayBuffer
from trajstore.ops.verify import verify_buffer

from tests.remote.conftest import assert_same, make_buffer, record

SRC = str(Path(__file__).resolve().parents[2] / "src")
CLI = [sys.executable, "-c", "import sys; from trajstore.cli.main import app; sys.argv[0] = 'trajstore'; app()"]


def _options(storage_options) -> list[str]:
    endpoint = storage_options["client_kwargs"]["endpoint_url"]
    return ["-o", "key=test", "-o", "secret=test", "-o", f"client_kwargs.endpoint_url={endpoint}",
            "-o", "client_kwargs.region_name=eu-west-1"]


def _start(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(CLI + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _kill_when(proc: subprocess.Popen, seen, limit_s: float = 60.0) -> bool:
    """kill -9 ``proc`` as soon as ``seen()`` is true; False if it ended first."""
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:
        if seen():
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            return True
        time.sleep(0.005)
    proc.communicate()
    return False


def _read_all(url, storage_options):
    with ReplayBuffer.load_from(url, storage_options=storage_options) as rb:
        return rb[:], [(e.start, e.stop, e.data) for e in rb.episodes]


@pytest.mark.parametrize("moment", ["at start", "first new object"])
def test_a_killed_push_leaves_a_whole_snapshot_and_the_next_push_completes(tmp_path, bucket_url, storage_options,
                                                                           s3, moment):
    rb = make_buffer(tmp_path / "rb", episodes=2, chunk_bytes=4096)
    push(tmp_path / "rb", bucket_url, storage_options)
    before = _read_all(bucket_url, storage_options)
    record(rb, 10, 4)  # new chunks, segments and small files to upload
    rb.close()
    with ReplayBuffer.load_from(tmp_path / "rb") as local:
        after = local[:], [(e.start, e.stop, e.data) for e in local.episodes]
    old_objects = set(s3.find(f"{bucket_url}/{OBJECTS}"))
    proc = _start(["push", str(tmp_path / "rb"), bucket_url, *_options(storage_options)])
    seen = (lambda: True) if moment == "at start" else \
        (lambda: len(s3.find(f"{bucket_url}/{OBJECTS}", refresh=True)) > len(old_objects))
    assert _kill_when(proc, seen), "the push ended before the moment came"
    steps, episodes = _read_all(bucket_url, storage_options)
    expected = before if len(episodes) == len(before[1]) else after
    assert episodes == expected[1]
    assert_same(steps, expected[0])
    proc = _start(["push", str(tmp_path / "rb"), bucket_url, *_options(storage_options)])
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    steps, episodes = _read_all(bucket_url, storage_options)
    assert len(episodes) == 6 and episodes == after[1]
    assert_same(steps, after[0])


def test_a_killed_pull_leaves_no_folder_and_a_pull_again_is_whole(tmp_path, bucket_url, storage_options):
    with make_buffer(tmp_path / "rb", episodes=6, chunk_bytes=4096):
        pass
    push(tmp_path / "rb", bucket_url, storage_options)
    target = tmp_path / "copy"
    proc = _start(["pull", bucket_url, str(target), *_options(storage_options)])
    staging = lambda: any(p.name.startswith(".copy.") for p in tmp_path.iterdir())  # noqa: E731
    assert _kill_when(proc, staging), "the pull ended before it made its staging folder"
    assert not target.exists()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".copy.")]
    assert left  # the killed pull's staging folder, which no one else will remove
    proc = _start(["pull", bucket_url, str(target), *_options(storage_options)])
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".copy.")] == []  # removed by the pull again
    assert verify_buffer(target).steps == 72
    with ReplayBuffer.load_from(tmp_path / "rb") as a, ReplayBuffer.load_from(target) as b:
        assert_same(a[:], b[:])
