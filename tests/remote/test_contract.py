"""Remote knows no storage's file names: a storage with a layout of its own (``blobs/<n>.dat`` and an
index of its own, tests/storages/blob_storage.py) is published by ``trajstore push`` with its blobs as
payload, and a reader of the URL reads them by byte range and gets what a local read gives."""

from __future__ import annotations

import json
import pickle

import numpy as np
from typer.testing import CliRunner

from tests.remote.conftest import assert_same
from tests.storages.blob_storage import BlobStorage
from trajstore.cli.main import app
from trajstore.remote import push
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage

SPACE = DictSpace({"scan": BoxSpace(0, 255, (8, 6), np.uint8), "pose": BoxSpace(-5, 5, (3,), np.float32)})


def _record(path, steps: int = 30) -> None:
    with ReplayBuffer.create(DictStorage, SPACE, cache_path=path, storage_cls_map={"scan": BlobStorage,
                                                                                    "*": HDF5Storage}) as rb:
        for n in range(steps):
            rb.append({"scan": np.full((8, 6), n, np.uint8) + np.arange(6, dtype=np.uint8),
                       "pose": np.full(3, n / 10, np.float32)})
            if n % 10 == 9:
                rb.end_episode()
            if n % 7 == 6:
                rb.flush()  # several write blocks: several blob files


def _options(storage_options: dict) -> list[str]:
    endpoint = storage_options["client_kwargs"]["endpoint_url"]
    return ["-o", "key=test", "-o", "secret=test", "-o", f"client_kwargs.endpoint_url={endpoint}",
            "-o", "client_kwargs.region_name=eu-west-1"]


def test_a_storage_of_its_own_layout_publishes_and_reads_back(tmp_path, bucket_url, storage_options, s3):
    _record(tmp_path / "rb")
    blobs = sorted(p.relative_to(tmp_path / "rb").as_posix() for p in (tmp_path / "rb").rglob("*.dat"))
    assert len(blobs) >= 3
    out = CliRunner().invoke(app, ["push", str(tmp_path / "rb"), bucket_url, "--no-progress",
                                   *_options(storage_options)])
    assert out.exit_code == 0, out.output
    manifest = json.loads(s3.cat_file(f"{bucket_url}/trajstore-manifest.json"))
    kinds = {p: e["kind"] for p, e in manifest["files"].items()}
    assert {p for p, k in kinds.items() if k == "payload"} == set(blobs)
    assert kinds["storage/scan/blobs.idx"] == "small" and kinds["storage/@rest/data.h5"] == "small"

    with ReplayBuffer.load_from(tmp_path / "rb") as local, \
            ReplayBuffer.load_from(bucket_url, storage_options=storage_options) as remote:
        mirror = remote._remote.path
        assert not list(mirror.rglob("*.dat")) and (mirror / "storage/scan/blobs.idx").is_file()
        before = remote._remote.payload.requests
        everything = np.arange(len(local))
        assert_same(remote[everything], local[everything])
        assert remote._remote.payload.requests > before  # the blobs came by ranged GETs
        copy = pickle.loads(pickle.dumps(remote))  # the opener's reopen arguments: the same snapshot
        try:
            assert_same(copy[everything], local[everything])
            assert copy.published_snapshot == remote.published_snapshot
        finally:
            copy.close()


def test_a_manifest_without_kinds_is_classified_by_the_descriptors(tmp_path):
    _record(tmp_path / "rb", steps=20)
    published = tmp_path / "published"
    push(tmp_path / "rb", str(published))
    doc = json.loads((published / "trajstore-manifest.json").read_text())
    for entry in doc["files"].values():  # as a push before kinds were recorded wrote it
        del entry["kind"]
    (published / "trajstore-manifest.json").write_text(json.dumps(doc))
    with ReplayBuffer.load_from(tmp_path / "rb") as local, ReplayBuffer.load_from(published.as_uri()) as remote:
        assert not list(remote._remote.path.rglob("*.dat"))  # still left in the store: payload
        assert_same(remote[np.arange(20)], local[np.arange(20)])
