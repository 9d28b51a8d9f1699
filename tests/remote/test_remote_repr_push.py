"""A buffer opened from a URL shows the URL (and snapshot) in its repr, not its temporary folder; a push of
what the URL holds already keeps the generation and says "unchanged"."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from trajstore.cli.main import app
from trajstore.remote import push
from trajstore.remote.layout import MANIFEST
from trajstore.remote.manifest import Manifest
from trajstore.replay_buffer import ReplayBuffer

from tests.remote.conftest import make_buffer, record


@pytest.fixture(params=["s3", "file"])
def target(request, tmp_path):
    """``(url, storage_options, fs, root)`` of a fresh URL on the S3 server or on the local file system."""
    if request.param == "s3":
        url = request.getfixturevalue("bucket_url")
        return url, request.getfixturevalue("storage_options"), request.getfixturevalue("s3"), url[len("s3://"):]
    from fsspec.implementations.local import LocalFileSystem

    root = tmp_path / "published"
    return root.as_uri(), None, LocalFileSystem(), str(root)


def _manifest_bytes(fs, root) -> bytes:
    fs.invalidate_cache()
    return fs.cat_file(f"{root}/{MANIFEST}")


def test_the_repr_of_a_remote_buffer_shows_its_url(tmp_path, target):
    url, options, fs, root = target
    with make_buffer(tmp_path / "rb", episodes=2):
        pass
    push(tmp_path / "rb", url, options)
    with ReplayBuffer.load_from(url, storage_options=options) as rb:
        snapshot = rb.published_snapshot[1]
        assert snapshot.startswith("1:")
        assert repr(rb) == (f"ReplayBuffer({url}, snapshot={snapshot}, steps=24, capacity=None, episodes=2, "
                            "storage=DictStorage)")
        assert str(rb.cache_path) not in repr(rb)  # the temporary mirror of the small files
    with ReplayBuffer.load_from(tmp_path / "rb") as local:  # a local folder still shows its path
        assert repr(local).startswith(f"ReplayBuffer({tmp_path / 'rb'}, steps=24,")


def test_an_unchanged_push_keeps_the_generation_and_says_unchanged(tmp_path, target):
    url, options, fs, root = target
    rb = make_buffer(tmp_path / "rb", episodes=2)
    rb.flush()
    first = push(tmp_path / "rb", url, options)
    assert (first.generation, first.unchanged) == (1, False)
    before = _manifest_bytes(fs, root)

    again = push(tmp_path / "rb", url, options)  # a writer still open, nothing appended since
    assert (again.generation, again.unchanged, again.uploaded_files, again.deleted_objects) == (1, True, 0, 0)
    assert again.line() == f"unchanged: {url} already holds these 24 steps (generation 1 kept, {first.files} files)"
    assert _manifest_bytes(fs, root) == before  # no manifest written

    # A payload file touched but not changed is no change either.
    segment = next(p for p in (tmp_path / "rb").rglob("*.mp4"))
    os.utime(segment, ns=(segment.stat().st_atime_ns, segment.stat().st_mtime_ns + 10**9))
    assert push(tmp_path / "rb", url, options).unchanged and _manifest_bytes(fs, root) == before

    record(rb, 2, 1)  # one more episode: a new generation
    rb.close()
    third = push(tmp_path / "rb", url, options)
    assert (third.generation, third.unchanged, third.steps) == (2, False, 36)
    assert Manifest.from_bytes(_manifest_bytes(fs, root), url).generation == 2


def test_trajstore_push_says_unchanged(tmp_path):
    url = (tmp_path / "published").as_uri()
    with make_buffer(tmp_path / "rb", episodes=1):
        pass
    runner = CliRunner()
    first = runner.invoke(app, ["push", str(tmp_path / "rb"), url, "--no-progress"])
    assert first.exit_code == 0 and first.stdout.startswith(f"pushed 12 steps to {url} (generation 1)"), first.output
    again = runner.invoke(app, ["push", str(tmp_path / "rb"), url, "--no-progress"])
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(f"unchanged: {url} already holds these 12 steps (generation 1 kept, ")
