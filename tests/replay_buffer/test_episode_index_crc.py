"""The committed episode index is verified (``"index_crc32"`` in trajstore.json): a flipped bit anywhere
in a middle record or the header, even one that keeps the table consistent, is found at open (a reader
warns and parses the log, a writer rebuilds the index) and in a reader's incremental reads; a log entry
naming an index without a crc (the v6 layout) is read as one without an index."""

import json
import shutil
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_index import FIELDS, HEADER as INDEX_HEADER, RECORD_BYTES, EpisodeIndexWarning
from trajstore.replay_buffer.episodes import check_rows

from .test_episode_index import check_index_matches_log, create, data_of, meta, steps

IDX = "episodes.000000.idx"


def episodes_of(rb):
    return [(e.id, e.start, e.stop, e.has_final_observation, e.interrupted, e.data) for e in rb.episodes]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A folder of 7 episodes (one interrupted) and what a reader gets from it undamaged."""
    folder = tmp_path_factory.mktemp("crc") / "rb"
    with create(folder) as rb:
        for k in range(7):
            rb.extend(steps(k + 2))
            rb.end_episode(interrupted=k == 5, **data_of(k))
    with warnings.catch_warnings():
        warnings.simplefilter("error", EpisodeIndexWarning)
        with ReplayBuffer.load_from(folder) as rb:
            want = episodes_of(rb)
    assert [w[4] for w in want] == [False] * 5 + [True, False] and want[3][1:3] == (9, 14)
    return folder, want


def flipped(built, tmp_path, at: int, bit: int) -> Path:
    src, _ = built
    folder = tmp_path / f"rb-{at}-{bit}"
    shutil.copytree(src, folder)
    raw = bytearray((folder / IDX).read_bytes())
    raw[at] ^= 1 << bit
    (folder / IDX).write_bytes(bytes(raw))
    return folder


def check_detected(folder: Path, want) -> None:
    """A reader warns naming the index and reads the episodes of the undamaged folder from the log; a
    writer rebuilds the index (warning the same way); then it opens without a warning."""
    with pytest.warns(EpisodeIndexWarning, match=rf"{IDX}.*reading the index from .*episodes.000000.log"):
        rb = ReplayBuffer.load_from(folder)
    with rb:
        assert episodes_of(rb) == want
    with pytest.warns(EpisodeIndexWarning, match=rf"{IDX}.*rebuilding the index"):
        rb = ReplayBuffer.load_from(folder, read_only=False)
    with rb:
        assert episodes_of(rb) == want
    check_index_matches_log(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EpisodeIndexWarning)
        with ReplayBuffer.load_from(folder) as rb:
            assert episodes_of(rb) == want


@pytest.mark.parametrize("field", FIELDS)
def test_a_bit_flipped_in_any_byte_of_a_middle_record_is_found(built, tmp_path, field):
    _, want = built
    for byte in range(8):
        at = len(INDEX_HEADER) + 3 * RECORD_BYTES + 8 * FIELDS.index(field) + byte
        check_detected(flipped(built, tmp_path, at, (byte * 3 + 1) % 8), want)


def test_flips_that_keep_the_table_consistent_are_found(built, tmp_path):
    """start 9 -> 13 and interrupted 0 -> 1 of record 3: the table checks pass, only the crc finds them."""
    _, want = built
    src, _ = built
    rows = np.frombuffer((src / IDX).read_bytes()[len(INDEX_HEADER):], "<i8").reshape(-1, 7).T.copy()
    for field, bit in (("start", 2), ("interrupted", 0)):
        changed = rows.copy()
        changed[FIELDS.index(field), 3] ^= 1 << bit
        check_rows(changed[:5])  # still a consistent table: no check but the crc can tell
        check_detected(flipped(built, tmp_path, len(INDEX_HEADER) + 3 * RECORD_BYTES + 8 * FIELDS.index(field), bit),
                       want)


def test_a_bit_flipped_in_any_byte_of_the_header_is_found(built, tmp_path):
    _, want = built
    for at in range(len(INDEX_HEADER)):
        check_detected(flipped(built, tmp_path, at, at % 8), want)


def test_a_reader_following_a_writer_finds_a_damaged_appended_record(tmp_path):
    folder = tmp_path / "rb"
    with create(folder) as rb:
        for k in range(3):
            rb.extend(steps(2))
            rb.end_episode(**data_of(k))
        with ReplayBuffer.load_from(folder) as reader:
            assert reader.num_episodes == 3
            rb.extend(steps(3))
            rb.end_episode(**data_of(3))
            rb.extend(steps(4))
            rb.end_episode(**data_of(4))
            assert reader.refresh() and reader.num_episodes == 5  # undamaged: from the index, no warning
            rb.extend(steps(5))
            rb.end_episode(interrupted=True, **data_of(5))
            rb.extend(steps(1))
            rb.end_episode(**data_of(6))
            with open(folder / IDX, "r+b") as f:  # record 5 (appended, not read yet): start 13 -> 15
                at = len(INDEX_HEADER) + 5 * RECORD_BYTES + 8 * FIELDS.index("start")
                f.seek(at)
                assert int.from_bytes(f.read(8), "little") == 13
                f.seek(at)
                f.write((15).to_bytes(8, "little"))
            with pytest.warns(EpisodeIndexWarning, match=rf"{IDX}: records 5..6 do not have the crc.*reading the new"):
                assert reader.refresh()
            want = [(e.id, e.start, e.stop, e.interrupted, e.data) for e in rb.episodes]
            assert [(e.id, e.start, e.stop, e.interrupted, e.data) for e in reader.episodes] == want
            assert want[5][1:4] == (13, 18, True)
            rb.extend(steps(2))
            rb.end_episode(task="after")
            with warnings.catch_warnings():
                warnings.simplefilter("error", EpisodeIndexWarning)  # the reader parses new lines from now on
                assert reader.refresh()
            assert [(e.id, e.data) for e in reader.episodes] == [(e.id, e.data) for e in rb.episodes]
            assert reader.episodes[-1].data == {"task": "after"}
    with pytest.warns(EpisodeIndexWarning, match=IDX):  # the damaged record is still in the file: rebuilt
        ReplayBuffer.load_from(folder, read_only=False).close()
    check_index_matches_log(folder)


def test_a_reader_checks_the_whole_index_once_when_a_writer_built_it_since(tmp_path):
    folder = tmp_path / "rb"
    with create(folder) as rb:
        for k in range(3):
            rb.extend(steps(2))
            rb.end_episode(**data_of(k))
    strip_crc(folder)
    with ReplayBuffer.load_from(folder) as reader:  # parses: the entry names no checked index
        with ReplayBuffer.load_from(folder, read_only=False) as rb:  # rebuilds it and commits its crc
            check_index_matches_log(folder)
            with open(folder / IDX, "r+b") as f:  # an old record the reader never read from the index
                f.seek(len(INDEX_HEADER) + 1 * RECORD_BYTES + 8 * FIELDS.index("final") + 7)
                f.write(b"\x01")
            rb.extend(steps(1))
            rb.end_episode(task="a")
            with pytest.warns(EpisodeIndexWarning, match=rf"{IDX}: records 0..3 do not have the crc"):
                assert reader.refresh()
            assert episodes_of(reader) == episodes_of(rb) and reader.num_episodes == 4


def strip_crc(folder: Path) -> None:
    m = meta(folder)
    del m["episodes"]["log"]["index_crc32"]
    (folder / "trajstore.json").write_text(json.dumps(m))


def test_an_index_named_without_a_crc_is_read_as_no_index_and_a_writer_commits_one(built, tmp_path):
    src, want = built
    folder = tmp_path / "rb"
    shutil.copytree(src, folder)
    strip_crc(folder)
    with open(folder / IDX, "r+b") as f:  # unchecked, so never trusted: a consistent wrong start is not read
        f.seek(len(INDEX_HEADER) + 3 * RECORD_BYTES + 8 * FIELDS.index("start"))
        f.write((10).to_bytes(8, "little"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", EpisodeIndexWarning)  # no crc is not damage: the log is parsed
        with ReplayBuffer.load_from(folder) as rb:
            assert episodes_of(rb) == want
        assert "index_crc32" not in meta(folder)["episodes"]["log"]  # a reader writes nothing
        with ReplayBuffer.load_from(folder, read_only=False) as rb:
            assert episodes_of(rb) == want
            assert meta(folder)["episodes"]["log"]["index_crc32"] == zlib.crc32((folder / IDX).read_bytes())
        with ReplayBuffer.load_from(folder) as rb:
            assert episodes_of(rb) == want
    check_index_matches_log(folder)


def test_the_crc_follows_appends_and_compactions(tmp_path):
    folder = tmp_path / "rb"
    files = set()
    with create(folder, capacity=15) as rb:
        for k in range(300):
            rb.extend(steps(1 + k % 2))
            rb.end_episode(**data_of(k))
            if k % 23 == 0:
                entry = meta(folder)["episodes"]["log"]
                files.add(entry["file"])
                idx = (folder / entry["index"]).read_bytes()
                assert entry["index_crc32"] == zlib.crc32(idx[:len(INDEX_HEADER) + RECORD_BYTES * entry["records"]])
    assert len(files) > 2  # compacted more than once
    with warnings.catch_warnings():
        warnings.simplefilter("error", EpisodeIndexWarning)
        with ReplayBuffer.load_from(folder) as rb:
            assert [e.data for e in rb.episodes] == [data_of(e.id) for e in rb.episodes] and rb.episodes[-1].id == 299
