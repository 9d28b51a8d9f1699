"""One push per URL, enforced (:mod:`trajstore.remote.push_lock`): a second push while one runs fails at
once naming the first; a push that lost its lock, or whose manifest another push replaced, stops before
its manifest and deletes nothing; retention keeps objects written after the lock was taken; a stale lock
(expired, or its process gone) is taken over. And two pushing processes with a reader, against the S3
server: generations are written once each, the reader never meets a missing object, and the final
manifest names no missing object."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import threading
import time

import pytest

from trajstore.errors import PushConflictError
from trajstore.remote import push
from trajstore.remote.layout import MANIFEST, OBJECTS
from trajstore.remote.manifest import Manifest
from trajstore.remote.push_lock import LOCK_NAME
from trajstore.replay_buffer import ReplayBuffer

from tests.remote.conftest import make_buffer, record


@pytest.fixture(params=["s3", "file"])
def target(request, tmp_path):
    """``(url, storage_options, fs, root)`` of a fresh URL on the S3 server or on the local file system."""
    if request.param == "s3":
        s3 = request.getfixturevalue("s3")
        url = request.getfixturevalue("bucket_url")
        return url, request.getfixturevalue("storage_options"), s3, url.removeprefix("s3://")
    from fsspec.implementations.local import LocalFileSystem

    root = tmp_path / "published"
    return root.as_uri(), None, LocalFileSystem(), str(root)


def _objects(fs, root) -> set[str]:
    fs.invalidate_cache()
    return {p.rsplit("/", 1)[-1] for p in fs.find(f"{root}/{OBJECTS}")}


def _manifest(fs, root) -> Manifest:
    return Manifest.from_bytes(fs.cat_file(f"{root}/{MANIFEST}"), "manifest")


def _buffer(tmp_path, name="rb", episodes=2):
    with make_buffer(tmp_path / name, episodes=episodes, chunk_bytes=4096):
        pass
    return tmp_path / name


def test_a_second_push_while_one_runs_fails_at_once_naming_the_first(tmp_path, target):
    url, options, fs, root = target
    folder = _buffer(tmp_path)
    inside, release, outcome = threading.Event(), threading.Event(), []

    def hold(sent, total):  # the first push waits here, holding the lock, until the test is done
        inside.set()
        release.wait(120)

    first = threading.Thread(target=lambda: outcome.append(push(folder, url, options, progress=hold)))
    first.start()
    try:
        assert inside.wait(120)
        with pytest.raises(PushConflictError, match=f"{url}: another push.*pid {os.getpid()} on "
                                                    f"{socket.gethostname()}"):
            push(folder, url, options)
    finally:
        release.set()
        first.join()
    assert outcome[0].generation == 1 and _manifest(fs, root).generation == 1
    again = push(folder, url, options)  # the lock was given back; nothing changed: the generation stays
    assert (again.generation, again.unchanged) == (1, True)


@pytest.mark.parametrize("move", ["lock taken over", "manifest replaced"])
def test_a_push_that_lost_the_race_stops_before_its_manifest_and_deletes_nothing(tmp_path, target, move):
    url, options, fs, root = target
    if move == "lock taken over" and url.startswith("file:"):
        pytest.skip("a local push lock is the kernel's: it cannot expire or be taken over while held")
    push(_buffer(tmp_path, "a"), url, options, retain_seconds=0)
    before_objects, before = _objects(fs, root), _manifest(fs, root)
    other = Manifest(before.generation + 1, before.files, time.time())

    def meddle(sent, total):
        if move == "lock taken over":
            fs.pipe_file(f"{root}/{LOCK_NAME}", json.dumps({"host": "elsewhere", "pid": 7, "token": "x",
                                                            "expires": time.time() + 600}).encode())
        else:
            fs.pipe_file(f"{root}/{MANIFEST}", other.to_bytes())

    with pytest.raises(PushConflictError, match="elsewhere" if move == "lock taken over" else "generation 2"):
        push(_buffer(tmp_path, "b", episodes=3), url, options, retain_seconds=0, progress=meddle)
    assert _manifest(fs, root).to_bytes() == (before if move == "lock taken over" else other).to_bytes()
    assert _objects(fs, root) >= before_objects  # nothing deleted


def test_retention_keeps_objects_written_after_the_lock_was_taken(tmp_path, target):
    url, options, fs, root = target
    push(_buffer(tmp_path, "a"), url, options, retain_seconds=0)
    first = _manifest(fs, root)
    push(_buffer(tmp_path, "b", episodes=3), url, options, retain_seconds=0)
    time.sleep(1.1)  # S3 dates objects to the second: the first push's objects are now older than a new lock
    stray = "0" * 32  # as if another push uploaded it meanwhile, for a manifest of its own

    def upload(sent, total):
        fs.pipe_file(f"{root}/{OBJECTS}/{stray}", b"another push's object")

    report = push(_buffer(tmp_path, "c", episodes=4), url, options, retain_seconds=0, progress=upload)
    named = {e.key.rsplit("/", 1)[-1] for m in (_manifest(fs, root), ) for e in m.files.values()}
    gone = {e.key.rsplit("/", 1)[-1] for e in first.files.values()} - _objects(fs, root)
    assert report.deleted_objects == len(gone) > 0  # the first push's objects no kept snapshot names did go
    assert stray in _objects(fs, root) and stray not in named


def test_a_stale_lock_is_taken_over_and_a_live_one_of_another_host_is_not(tmp_path, bucket_url, storage_options,
                                                                          s3):
    url, options, fs, root = bucket_url, storage_options, s3, bucket_url.removeprefix("s3://")
    folder = _buffer(tmp_path)
    live = {"host": "elsewhere", "pid": 1, "token": "t", "acquired": time.time(), "expires": time.time() + 600}
    fs.pipe_file(f"{root}/{LOCK_NAME}", json.dumps(live).encode())
    with pytest.raises(PushConflictError, match="pid 1 on elsewhere"):
        push(folder, url, options)
    assert not fs.exists(f"{root}/{MANIFEST}")
    for stale in ({**live, "expires": time.time() - 1},  # expired
                  {**live, "host": socket.gethostname(), "pid": _dead_pid(), "start": None}):  # its process is gone
        fs.pipe_file(f"{root}/{LOCK_NAME}", json.dumps(stale).encode())
        push(folder, url, options)
        fs.invalidate_cache()
        assert not fs.exists(f"{root}/{LOCK_NAME}")  # taken over, then removed at the end
    assert _manifest(fs, root).generation == 1  # the second push found nothing changed


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- two pushing processes and a reader ------------------------------------------------------------------

ROUNDS = 6


def _pusher(name: str, folder: str, url: str, options: dict, barrier, results) -> None:
    """Record one more episode, then push, ``ROUNDS`` times; the two pushers start each push together."""
    out = []
    try:
        rb = make_buffer(folder, episodes=1, chunk_bytes=4096)
        with rb:
            for i in range(ROUNDS):
                record(rb, 10 + i, 1)
                barrier.wait(120)
                try:
                    out.append(("ok", push(folder, url, options).generation))
                except PushConflictError as exc:
                    out.append(("conflict", str(exc)))
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        out.append(("error", f"{type(exc).__name__}: {exc}"))
    results.put((name, out))


def _reader(url: str, options: dict, stop, results) -> None:
    """Open the URL and read every step until ``stop``; report each failure."""
    opens, failures = 0, []
    while not stop.is_set():
        try:
            with ReplayBuffer.load_from(url, storage_options=options) as rb:
                rb[:]
                opens += 1
        except Exception as exc:  # noqa: BLE001 - reported by the test
            if "is not a published trajstore buffer" not in str(exc):  # before the first push
                failures.append(f"{type(exc).__name__}: {exc}")
    results.put(("reader", (opens, failures)))


def test_two_pushers_and_a_reader_on_one_url(tmp_path, bucket_url, storage_options, s3):
    ctx = multiprocessing.get_context("spawn")
    barrier, stop, results = ctx.Barrier(2), ctx.Event(), ctx.Queue()
    pushers = [ctx.Process(target=_pusher, args=(n, str(tmp_path / n), bucket_url, storage_options, barrier, results))
               for n in ("a", "b")]
    reader = ctx.Process(target=_reader, args=(bucket_url, storage_options, stop, results))
    for p in (*pushers, reader):
        p.start()
    got = dict(results.get(timeout=600) for _ in pushers)
    stop.set()
    got.update([results.get(timeout=600)])
    for p in (*pushers, reader):
        p.join(60)
    outcomes = got["a"] + got["b"]
    assert not [o for o in outcomes if o[0] == "error"], outcomes
    generations = sorted(g for kind, g in outcomes if kind == "ok")
    assert generations == list(range(1, len(generations) + 1)), outcomes  # each generation written once
    conflicts = [text for kind, text in outcomes if kind == "conflict"]
    assert all("another push to this URL is under way" in text for text in conflicts), conflicts
    opens, failures = got["reader"]
    assert failures == [], failures[:3]
    s3.invalidate_cache()
    final = _manifest(s3, bucket_url.removeprefix("s3://"))
    assert final.generation == generations[-1]
    present = {p.rsplit("/", 1)[-1] for p in s3.find(f"{bucket_url}/{OBJECTS}")}
    assert [e.key for e in final.files.values() if e.key.rsplit("/", 1)[-1] not in present] == []
    assert not s3.exists(f"{bucket_url}/{LOCK_NAME}")
    print(f"two pushers: {len(generations)} pushes, {len(conflicts)} refused, reader: {opens} opens")
    if not conflicts:
        pytest.skip(f"the two pushes of each round never overlapped ({len(generations)} pushes, {opens} opens)")


def test_a_held_lock_is_refreshed_while_the_push_runs_and_removed_at_the_end(bucket_url, s3):
    from trajstore.remote.push_lock import PushLock

    root = bucket_url.removeprefix("s3://")
    path = f"{root}/{LOCK_NAME}"
    with PushLock(s3, root, bucket_url, local=False, s3=True, seconds=0.6) as lock:
        first = json.loads(s3.cat_file(path))
        assert (first["host"], first["pid"]) == (socket.gethostname(), os.getpid())
        deadline = time.monotonic() + 120
        while json.loads(s3.cat_file(path))["expires"] == first["expires"] and time.monotonic() < deadline:
            time.sleep(0.05)
        again = json.loads(s3.cat_file(path))
        assert again["expires"] > first["expires"] and again["token"] == first["token"]
        lock.confirm()  # still ours
    s3.invalidate_cache()
    assert not s3.exists(path)


def test_trajstore_push_while_another_push_holds_the_url_is_one_line_naming_it(tmp_path, bucket_url,
                                                                              storage_options, s3):
    from typer.testing import CliRunner

    from trajstore.cli.main import app

    root = bucket_url.removeprefix("s3://")
    s3.pipe_file(f"{root}/{LOCK_NAME}", json.dumps({"host": "robot-3", "pid": 4711, "token": "t",
                                                    "acquired": time.time(), "expires": time.time() + 600}).encode())
    endpoint = storage_options["client_kwargs"]["endpoint_url"]
    out = CliRunner().invoke(app, ["push", str(_buffer(tmp_path)), bucket_url, "--no-progress", "-o", "key=test",
                                   "-o", "secret=test", "-o", f"client_kwargs.endpoint_url={endpoint}",
                                   "-o", "client_kwargs.region_name=eu-west-1"])
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "another push to this URL is under way" in lines[0]
    assert "pid 4711 on robot-3" in lines[0] and bucket_url in lines[0]
    assert not s3.exists(f"{root}/{MANIFEST}")


def test_a_manifest_slipped_in_after_the_check_makes_the_conditional_write_fail(tmp_path, bucket_url,
                                                                                storage_options, s3, monkeypatch):
    """On S3 the manifest is written with If-Match on the version checked: a push that does not take the
    lock (an older trajstore) writing one in between is noticed, and nothing is deleted."""
    from trajstore.remote import publish

    root = bucket_url.removeprefix("s3://")
    push(_buffer(tmp_path, "a"), bucket_url, storage_options, retain_seconds=0)
    before_objects, before = _objects(s3, root), _manifest(s3, root)
    other = Manifest(before.generation + 1, before.files, time.time())
    checked = publish._check_unmoved

    def check_then_meddle(*args):
        tag = checked(*args)
        s3.pipe_file(f"{root}/{MANIFEST}", other.to_bytes())
        return tag

    monkeypatch.setattr(publish, "_check_unmoved", check_then_meddle)
    with pytest.raises(PushConflictError, match="replaced the manifest just before"):
        push(_buffer(tmp_path, "b", episodes=3), bucket_url, storage_options, retain_seconds=0)
    assert _manifest(s3, root).to_bytes() == other.to_bytes()
    assert _objects(s3, root) >= before_objects
