"""The pure pieces of trajstore.remote: range merging, file classes, manifests, CLI option parsing."""

from __future__ import annotations

import pytest

from trajstore.cli.remote import parse_storage_options
from trajstore.errors import FormatError
from trajstore.remote.layout import is_published
from trajstore.remote.manifest import Entry, Manifest
from trajstore.remote.source import merge_ranges


def test_merge_ranges_groups_close_ranges_of_one_object():
    keys = ["b", "a", "a", "a", "b"]
    starts = [0, 100, 0, 10_000_000, 50]
    stops = [10, 200, 50, 10_000_100, 60]
    requests, where = merge_ranges(keys, starts, stops, gap=1000, limit=1_000_000)
    assert requests == [("a", 0, 200), ("a", 10_000_000, 10_000_100), ("b", 0, 60)]
    assert where == [(2, 0), (0, 100), (0, 0), (1, 0), (2, 50)]
    # One request never spans more than `limit` bytes.
    requests, _ = merge_ranges(["a"] * 3, [0, 10, 20], [10, 20, 30], gap=0, limit=15)
    assert requests == [("a", 0, 10), ("a", 10, 20), ("a", 20, 30)]


def test_published_files():
    # Which files are payload is the storages' word: tests/storages/test_files.py.
    assert not is_published("storage/.scratch/000001.bin")  # in a hidden folder
    assert not is_published("writer.lock") and not is_published("storage/x/segments/00000001.mp4.tmp")
    assert not is_published("storage/x/.index.log.123.tmp") and is_published("episodes.000000.log")


def test_manifest_round_trip_and_unsafe_paths():
    m = Manifest(3, {"trajstore.json": Entry("objects/" + "a" * 32, 10, "a" * 64, 5)}, 1.5)
    assert Manifest.from_bytes(m.to_bytes(), "m") == m
    kinds = Manifest(3, {"a": Entry("objects/" + "a" * 32, 1, "a" * 64, 5, "payload"),
                         "b": Entry("objects/" + "b" * 32, 1, "b" * 64, 0, "small")})
    assert {p: e.kind for p, e in Manifest.from_bytes(kinds.to_bytes(), "m").files.items()} == {"a": "payload",
                                                                                               "b": "small"}
    with pytest.raises(FormatError, match="unknown kind 'big'"):
        Manifest.from_bytes(kinds.to_bytes().replace(b'"payload"', b'"big"'), "m")
    for path, key in [("../x", "objects/" + "a" * 32), ("/etc/passwd", "objects/" + "a" * 32),
                      ("a//b", "objects/" + "a" * 32), ("ok", "../objects/x"), ("ok", "objects/a/../../b")]:
        bad = Manifest(1, {path: Entry(key, 1, "0" * 64)}).to_bytes()
        with pytest.raises(FormatError):
            Manifest.from_bytes(bad, "m")
    with pytest.raises(FormatError, match="newer"):
        Manifest.from_bytes(b'{"format": "trajstore.remote", "version": 99, "files": {}}', "m")


def test_parse_storage_options():
    assert parse_storage_options(None) is None
    assert parse_storage_options(["key=test", "anon=false", "client_kwargs.endpoint_url=http://h:1"]) == {
        "key": "test", "anon": False, "client_kwargs": {"endpoint_url": "http://h:1"}}
    for bad in (["nokey"], ["=x"], ["a..b=1"]):
        with pytest.raises(ValueError):
            parse_storage_options(bad)
