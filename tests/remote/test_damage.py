"""Damage in the bucket: a truncated or altered manifest, an object missing, cut short or replaced
with other bytes. Each read fails with a FormatError naming what is wrong; none returns wrong data."""

from __future__ import annotations

import json

import pytest

from trajstore.errors import FormatError
from trajstore.remote import pull, push
from trajstore.remote.layout import MANIFEST
from trajstore.replay_buffer import ReplayBuffer

from tests.remote.conftest import make_buffer


@pytest.fixture
def pushed(tmp_path, bucket_url, storage_options, s3):
    """(url, bucket path, manifest dict) of a freshly pushed two-episode buffer."""
    with make_buffer(tmp_path / "rb", episodes=2):
        pass
    push(tmp_path / "rb", bucket_url, storage_options)
    root = bucket_url.removeprefix("s3://")
    return bucket_url, root, json.loads(s3.cat_file(f"{root}/{MANIFEST}"))


def _read_everything(url, storage_options):
    with ReplayBuffer.load_from(url, storage_options=storage_options) as rb:
        rb[:]
        for k in range(len(rb.episodes)):
            rb.final_observation(k)


def _damage(s3, path: str, how: str) -> None:
    data = s3.cat_file(path)
    if how == "missing":
        s3.rm(path)
    elif how == "flipped":  # one byte in the middle: same size, other bytes
        b = bytearray(data)
        b[len(b) // 2] ^= 0x01
        s3.pipe_file(path, bytes(b))
    else:
        s3.pipe_file(path, data[: len(data) // 2])


SMALL_AND_SEGMENTS = ["trajstore.json", "storage/@rest/data.h5", "storage/observation.rgb/index.log",
                      "storage/observation.wrist/segments/00000000.mp4"]


@pytest.mark.parametrize("how", ["missing", "flipped", "truncated"])
@pytest.mark.parametrize("rel", SMALL_AND_SEGMENTS)
def test_a_damaged_whole_object_fails_the_read_and_the_pull(tmp_path, pushed, storage_options, s3, rel, how):
    url, root, manifest = pushed
    key = manifest["files"][rel]["key"]
    _damage(s3, f"{root}/{key}", how)
    # A flipped byte inside a video segment used to decode to frames silently: every whole object is
    # checked against its SHA-256 now, the segments too.
    with pytest.raises(FormatError, match=key.split("/")[-1] if how != "missing" else "missing|gone"):
        _read_everything(url, storage_options)
    with pytest.raises(FormatError, match="damaged|missing"):
        pull(url, tmp_path / "copy", storage_options)
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("how", ["missing", "truncated"])
def test_a_damaged_chunk_object_fails_the_frame_read(pushed, storage_options, s3, how):
    url, root, manifest = pushed
    _damage(s3, f"{root}/{manifest['files']['storage/observation.rgb/chunks/000000.bin']['key']}", how)
    with pytest.raises(FormatError, match="observation.rgb/chunks/000000.bin"):
        _read_everything(url, storage_options)


def test_a_damaged_manifest_fails_before_anything_is_fetched(tmp_path, pushed, storage_options, s3):
    url, root, _ = pushed
    raw = s3.cat_file(f"{root}/{MANIFEST}")
    s3.pipe_file(f"{root}/{MANIFEST}", raw[: len(raw) // 2])
    with pytest.raises(FormatError, match=f"{MANIFEST} is not valid JSON"):
        ReplayBuffer.load_from(url, storage_options=storage_options)
    with pytest.raises(FormatError, match=f"{MANIFEST} is not valid JSON"):
        pull(url, tmp_path / "copy", storage_options)
    assert not (tmp_path / "copy").exists()


def test_a_manifest_naming_absent_objects(pushed, storage_options, s3):
    url, root, manifest = pushed
    manifest["files"]["storage/observation.rgb/chunks/000000.bin"]["key"] = "objects/" + "0" * 32
    s3.pipe_file(f"{root}/{MANIFEST}", json.dumps(manifest).encode())
    with pytest.raises(FormatError, match="observation.rgb/chunks/000000.bin is gone"):
        _read_everything(url, storage_options)
    manifest["files"]["trajstore.json"]["key"] = "objects/" + "1" * 32
    s3.pipe_file(f"{root}/{MANIFEST}", json.dumps(manifest).encode())
    with pytest.raises(FormatError, match="1" * 32):
        ReplayBuffer.load_from(url, storage_options=storage_options)


def test_a_deep_manifest_is_a_damaged_manifest_not_a_store_error(tmp_path, pushed, storage_options, s3):
    url, root, _ = pushed
    s3.pipe_file(f"{root}/{MANIFEST}", b'{"format": "trajstore.remote", "files": ' + b"[" * 100_000 + b"]" * 100_000
                 + b"}")
    for read in (lambda: ReplayBuffer.load_from(url, storage_options=storage_options),
                 lambda: pull(url, tmp_path / "copy", storage_options)):
        with pytest.raises(FormatError, match=f"{MANIFEST} is not valid JSON \\(nested deeper than 256 levels"):
            read()
    assert not (tmp_path / "copy").exists()
