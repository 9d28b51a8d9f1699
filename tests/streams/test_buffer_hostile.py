"""Hostile or damaged stream buffer files: a FormatError naming the file, the record and the stream,
raised before anything is written (a writable open commits no made-up episode)."""

import json
import re

import numpy as np
import pytest

from trajstore.errors import FormatError
from trajstore.spaces import BoxSpace
from trajstore.streams import StreamBuffer


def recorded(path, close=True):
    """Two episodes of 5 samples of 'a' and of 'b'."""
    space = {"a": BoxSpace(-1e9, 1e9, (2,), np.float32), "b": BoxSpace(-1e9, 1e9, (), np.float64)}
    buf = StreamBuffer.create(path, space)
    for e in range(2):
        buf.extend("b", np.arange(5.0) + 10 * e, (np.arange(5) + 10 * e) * 10**8)
        buf.extend("a", np.ones((5, 2), np.float32) * e, (np.arange(5) + 10 * e) * 10**8 + 1)
        buf.end_episode(task=f"t{e}")
    if not close:
        return buf
    buf.close()
    return path


def edit_log(path, edit):
    """Rewrite the log's records with ``edit(records)``, and streams.json's committed length to match."""
    lines = (path / "episodes.log").read_text().splitlines()
    recs = [json.loads(line) for line in lines[1:]]
    edit(recs)
    body = "\n".join([lines[0]] + [json.dumps(r, separators=(",", ":")) for r in recs]) + "\n"
    (path / "episodes.log").write_text(body)
    edit_meta(path, lambda m: m["log"].__setitem__("bytes", len(body.encode())))


def edit_meta(path, edit):
    meta = json.loads((path / "streams.json").read_text())
    edit(meta)
    (path / "streams.json").write_text(json.dumps(meta))


def files(path):
    return (path / "episodes.log").read_bytes(), (path / "streams.json").read_bytes()


def refused(path, match):
    """Both opens refuse; the writable one writes nothing."""
    before = files(path)
    for read_only in (True, False):
        with pytest.raises(FormatError, match=match):
            StreamBuffer.load_from(path, read_only=read_only)
    assert files(path) == before


def count(k, name, value):
    return lambda recs: recs[k]["counts"].__setitem__(name, value)


@pytest.mark.parametrize("value", [2.7, True, -3, "x", None, 1e30, [1]])
def test_count_not_a_whole_number(tmp_path, value):
    path = recorded(tmp_path / "b")
    edit_log(path, count(0, "b", value))
    refused(path, r"episodes.log: episode record 0 \(id 0\): stream 'b' has count " + re.escape(repr(value)))


@pytest.mark.parametrize("value", [50, 10**30])
def test_counts_beyond_the_stream(tmp_path, value):
    path = recorded(tmp_path / "b")
    edit_log(path, count(1, "b", value))
    refused(path, r"episodes.log: the closed episodes count \d+ samples of stream 'b' but streams.json commits only 10")


def test_count_of_an_unknown_stream(tmp_path):
    path = recorded(tmp_path / "b")
    edit_log(path, count(1, "zzz", 3))
    refused(path, r"episodes.log: episode record 1 \(id 1\) counts samples of stream 'zzz', which the buffer")


def test_committed_lengths_smaller_than_the_closed_episodes(tmp_path):
    path = recorded(tmp_path / "b")
    edit_meta(path, lambda m: m["lengths"].__setitem__("b", 2))
    refused(path, r"episodes.log: the closed episodes count 10 samples of stream 'b' but streams.json commits only 2")


def test_stream_folder_holding_fewer_than_the_closed_episodes(tmp_path):
    path = recorded(tmp_path / "b")
    edit_log(path, count(1, "b", 7))
    edit_meta(path, lambda m: m["lengths"].__setitem__("b", 12))
    refused(path, r"the closed episodes count 12 samples of stream 'b' but its folder holds only 10")


@pytest.mark.parametrize("size", [2**40, 10**30])
def test_log_bytes_beyond_the_file(tmp_path, size):
    path = recorded(tmp_path / "b")
    edit_meta(path, lambda m: m["log"].__setitem__("bytes", size))
    refused(path, r"episodes.log is shorter \(\d+ bytes\) than committed")


@pytest.mark.parametrize("streams", [{}, []])
def test_no_streams(tmp_path, streams):
    path = recorded(tmp_path / "b")
    edit_meta(path, lambda m: m.update(streams=streams, lengths={}, discards={}))
    refused(path, r"streams.json: 'streams' must name at least one stream")


def test_record_not_a_record(tmp_path):
    path = recorded(tmp_path / "b")
    edit_log(path, lambda recs: recs[1].__setitem__("id", -1))
    refused(path, r"episodes.log: episode record 1 is not an episode record")


def test_refresh_refuses_a_bad_record_and_keeps_what_it_showed(tmp_path):
    path = tmp_path / "b"
    buf = recorded(path, close=False)
    reader = StreamBuffer.load_from(path)
    buf.append("b", 1.0, 5 * 10**9)
    buf.end_episode()
    edit_log(path, count(2, "b", 4))
    edit_meta(path, lambda m: m.__setitem__("commit", m["commit"] + 1))
    with pytest.raises(FormatError, match=r"closed episodes count 14 samples of stream 'b' but streams.json commits only 11"):
        reader.refresh()
    assert reader.num_episodes == 2 and reader.stream_length("b") == 10
    assert reader.read("b", 1)[1].tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
    reader.close()
    buf.close()
