"""The episode index (episodes.NNNNNN.idx): a million episodes open from it, a crash between its
append and the metadata commit, damage, folders without it, ring compaction, column selections."""

import json
import shutil
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

from trajstore.errors import FormatError, SelectionWarning
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_index import (HEADER as INDEX_HEADER, RECORD_BYTES, EpisodeIndexWarning,
                                                   IndexFile, index_crc, line_ranges)
from trajstore.replay_buffer.episode_list import EpisodeList
from trajstore.replay_buffer.episode_query import parse_selection
from trajstore.replay_buffer.log_format import HEADER as LOG_HEADER, encode_lines
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, MemmapStorage, dict_storage_kwargs_from_space

SPACE = DictSpace({"action": BoxSpace(-1, 1, (2,), np.float32)})


def create(folder, capacity=None):
    """A buffer whose steps are in a MemmapStorage (a reader and the writer may share this process)."""
    return ReplayBuffer.create(DictStorage, SPACE, cache_path=folder, capacity=capacity,
                               **dict_storage_kwargs_from_space(SPACE, key_storage_cls={"action": MemmapStorage}))


def steps(n, value=0.5):
    return {"action": np.full((n, 2), value, np.float32)}


def meta(folder):
    return json.loads((Path(folder) / "trajstore.json").read_text())


def data_of(k):
    return {"success": k % 3 != 0, "seed": k, "task": "push"}


def index_records(folder):
    entry = meta(folder)["episodes"]["log"]
    raw = (Path(folder) / entry["index"]).read_bytes()
    assert raw[:len(INDEX_HEADER)] == INDEX_HEADER
    return np.frombuffer(raw[len(INDEX_HEADER):], "<i8").reshape(-1, 7)


def check_index_matches_log(folder):
    """Every committed index record describes its log line exactly (fields and byte range)."""
    entry = meta(folder)["episodes"]["log"]
    log = (Path(folder) / entry["file"]).read_bytes()[:entry["bytes"]]
    recs = index_records(folder)[:entry["records"]]
    assert entry["index"] == entry["file"].replace(".log", ".idx") and len(recs) == entry["records"]
    lines = log[len(LOG_HEADER):].splitlines(keepends=True)
    assert len(lines) == entry["records"]
    for rec, line in zip(recs.tolist(), lines):
        record = json.loads(line)
        assert rec[:5] == [record["id"], record["start"], record["stop"], record["final"], int(record["interrupted"])]
        assert log[rec[5]:rec[5] + rec[6]] == line
    committed = (Path(folder) / entry["index"]).read_bytes()[:len(INDEX_HEADER) + RECORD_BYTES * entry["records"]]
    assert entry["index_crc32"] == zlib.crc32(committed)  # the committed crc is that of the committed bytes
    return recs


# -- a million episodes -----------------------------------------------------------------------
def million_folder(folder: Path, n: int) -> None:
    """``n`` one-step episodes: the steps through the API, the log and index written with the writer's own
    encoder (``encode_lines``) and index layout, and ``trajstore.json`` naming them as a commit would."""
    rb = create(folder)
    for lo in range(0, n, 1 << 16):
        rb.extend(steps(min(n, lo + (1 << 16)) - lo))
    rb.close()
    ids = np.arange(n, dtype=np.int64)
    rows = np.stack([ids, ids, ids + 1, np.full(n, -1), np.zeros(n, np.int64)])
    body = b"".join(b"".join(encode_lines(rows[:, lo:lo + 65536], [data_of(k) for k in range(lo, min(n, lo + 65536))]))
                    for lo in range(0, n, 65536))
    (folder / "episodes.000000.log").write_bytes(LOG_HEADER + body)
    recs = np.concatenate([rows, np.stack(line_ranges(body, len(LOG_HEADER)))])
    IndexFile.create(folder, "episodes.000000.idx", recs).close()
    m = meta(folder)
    m["episodes"] = {"open_start": None, "next_id": n, "final_count": 0, "discards": 0,
                     "log": {"file": "episodes.000000.log", "bytes": len(LOG_HEADER) + len(body), "records": n,
                             "skip": 0, "index": "episodes.000000.idx", "index_crc32": index_crc(recs)}}
    (folder / "trajstore.json").write_text(json.dumps(m))


@pytest.mark.slow
def test_a_million_episodes_open_from_the_index_with_the_right_values(tmp_path):
    n = 1_000_000
    folder = tmp_path / "rb"
    million_folder(folder, n)
    for read_only in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("error", EpisodeIndexWarning)  # the index is used, not rebuilt
            rb = ReplayBuffer.load_from(folder, read_only=read_only)
        with rb:
            eps = rb.episodes
            assert isinstance(eps, EpisodeList) and len(eps) == n == rb.num_episodes and len(rb) == n
            first, last = eps[0], eps[-1]
            assert (first.id, first.start, first.stop, first.done) == (0, 0, 1, True)
            assert (last.id, last.start, last.stop, last.done) == (n - 1, n - 1, n, True)
            assert first.data == data_of(0) and last.data == data_of(n - 1) and eps[500_000].data == data_of(500_000)
            selected = parse_selection("success == true").select(eps)
            assert len(selected) == n - (n + 2) // 3 and selected[:3] == [1, 2, 4] and selected[-1] == n - 2
            assert parse_selection("seed >= 999998 and task == 'push'").select(eps) == [999_998, 999_999]
            assert parse_selection("999990-999991").select(eps) == [999_990, 999_991]
            if not read_only:
                rb.extend(steps(1))
                rb.end_episode(success=True, seed=n)
    with ReplayBuffer.load_from(folder) as rb:
        assert rb.num_episodes == n + 1 and rb.episode(-1).data == {"success": True, "seed": n}
        assert rb.episode(-2).data == data_of(n - 1)
    assert len(check_index_matches_log(folder)[-3:]) == 3


# -- crash between the index append and the metadata commit -----------------------------------------
def test_index_bytes_past_the_committed_count_are_ignored_then_truncated(tmp_path):
    folder = tmp_path / "rb"
    with create(folder) as rb:
        for k in range(3):
            rb.extend(steps(2))
            rb.end_episode(**data_of(k))
        committed = (folder / "trajstore.json").read_bytes()
        log_size = (folder / "episodes.000000.log").stat().st_size
        for k in range(3, 5):  # written to the log and the index, then "crash" before the metadata names them
            rb.extend(steps(2))
            rb.end_episode(**data_of(k))
    (folder / "trajstore.json").write_bytes(committed)
    idx = folder / "episodes.000000.idx"
    assert idx.stat().st_size == len(INDEX_HEADER) + 5 * RECORD_BYTES  # the uncommitted records are there
    with ReplayBuffer.load_from(folder) as rb:  # a reader trusts only the committed count
        assert [e.id for e in rb.episodes] == [0, 1, 2] and rb.episodes[-1].data == data_of(2)
    assert idx.stat().st_size == len(INDEX_HEADER) + 5 * RECORD_BYTES  # a reader changes nothing
    with ReplayBuffer.load_from(folder, read_only=False) as rb:
        assert idx.stat().st_size == len(INDEX_HEADER) + 3 * RECORD_BYTES  # the writer truncated both tails
        assert (folder / "episodes.000000.log").stat().st_size == log_size
        # the 4 steps after the commit were not committed either: the writer appends after step 6
        rb.extend(steps(3))
        rb.end_episode(task="after the crash")
    check_index_matches_log(folder)
    with ReplayBuffer.load_from(folder) as rb:
        assert [(e.id, e.start, e.stop) for e in rb.episodes] == [(0, 0, 2), (1, 2, 4), (2, 4, 6), (3, 6, 9)]
        assert [e.data for e in rb.episodes] == [data_of(0), data_of(1), data_of(2), {"task": "after the crash"}]


# -- damage -----------------------------------------------------------------------------------
def small_folder(folder, n=6):
    with create(folder) as rb:
        for k in range(n):
            rb.extend(steps(k + 1))
            rb.end_episode(**data_of(k))
    return [(e.id, e.start, e.stop, e.data) for e in ReplayBuffer.load_from(folder).episodes]


def truncate(idx: Path) -> None:
    idx.write_bytes(idx.read_bytes()[:len(INDEX_HEADER) + 2 * RECORD_BYTES + 5])


def shift_offset(idx: Path) -> None:
    raw = bytearray(idx.read_bytes())
    at = len(INDEX_HEADER) + 3 * RECORD_BYTES + 5 * 8  # record 3's byte offset
    raw[at:at + 8] = (int.from_bytes(raw[at:at + 8], "little") + 1).to_bytes(8, "little")
    idx.write_bytes(bytes(raw))


def wrong_stop(idx: Path) -> None:  # the byte ranges still tile the log: the last line's check finds it
    raw = bytearray(idx.read_bytes())
    at = len(INDEX_HEADER) + 5 * RECORD_BYTES + 2 * 8  # the last record's stop
    raw[at:at + 8] = (10 ** 6).to_bytes(8, "little")
    idx.write_bytes(bytes(raw))


def bad_header(idx: Path) -> None:
    idx.write_bytes(b"garbage!" + idx.read_bytes()[8:])


def missing(idx: Path) -> None:
    idx.unlink()


@pytest.mark.parametrize("damage,message", [(truncate, "holds 2 records where the metadata commits 6"),
                                            (shift_offset, "record 3 byte ranges do not tile"),
                                            (wrong_stop, "record 5 does not match line 6"),
                                            (bad_header, "is not a trajstore episode index"),
                                            (missing, "does not exist")])
def test_a_damaged_index_is_read_around_by_a_reader_and_rebuilt_by_a_writer(tmp_path, damage, message):
    folder = tmp_path / "rb"
    want = small_folder(folder)
    idx = folder / "episodes.000000.idx"
    damage(idx)
    with pytest.warns(EpisodeIndexWarning, match=f"episodes.000000.idx.*{message}.*reading the index from"):
        rb = ReplayBuffer.load_from(folder)
    with rb:  # the log was parsed instead: the same episodes and data
        assert [(e.id, e.start, e.stop, e.data) for e in rb.episodes] == want
    with pytest.warns(EpisodeIndexWarning, match=f"{message}.*rebuilding the index from"):
        rb = ReplayBuffer.load_from(folder, read_only=False)
    rb.close()
    check_index_matches_log(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EpisodeIndexWarning)  # rebuilt: no warning any more
        with ReplayBuffer.load_from(folder) as rb:
            assert [(e.id, e.start, e.stop, e.data) for e in rb.episodes] == want


# -- folders without the index (written before it) ---------------------------------------------------
def strip_index(folder):
    m = meta(folder)
    del m["episodes"]["log"]["index"]
    (folder / "trajstore.json").write_text(json.dumps(m))
    for p in folder.glob("episodes.*.idx"):
        p.unlink()


def test_a_folder_without_the_index_opens_read_only_as_it_is_and_a_writer_builds_the_index(tmp_path):
    folder = tmp_path / "rb"
    want = small_folder(folder)
    strip_index(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EpisodeIndexWarning)  # no index is not damage
        with ReplayBuffer.load_from(folder) as rb:
            assert [(e.id, e.start, e.stop, e.data) for e in rb.episodes] == want
    assert not list(folder.glob("*.idx")) and "index" not in meta(folder)["episodes"]["log"]  # nothing written
    with ReplayBuffer.load_from(folder, read_only=False) as rb:
        assert meta(folder)["episodes"]["log"]["index"] == "episodes.000000.idx"  # committed at open
        assert [(e.id, e.start, e.stop, e.data) for e in rb.episodes] == want
        rb.extend(steps(2))
        rb.end_episode(task="new")
    check_index_matches_log(folder)
    with ReplayBuffer.load_from(folder) as rb:
        assert [(e.id, e.start, e.stop, e.data) for e in rb.episodes] == want + [(6, 21, 23, {"task": "new"})]


def test_a_reader_follows_a_writer_before_and_after_the_index_is_built(tmp_path):
    folder = tmp_path / "rb"
    want = small_folder(folder, 3)
    strip_index(folder)
    with ReplayBuffer.load_from(folder) as reader:
        assert [(e.id, e.data) for e in reader.episodes] == [(i, d) for i, _, _, d in want]
        with ReplayBuffer.load_from(folder, read_only=False) as rb:  # builds and names the index
            rb.extend(steps(1))
            rb.end_episode(task="a")
            assert reader.refresh()
            assert [e.data for e in reader.episodes][-2:] == [data_of(2), {"task": "a"}]
            rb.extend(steps(1))
            rb.end_episode(task="b")
            assert reader.refresh() and reader.episodes[-1].data == {"task": "b"} and reader.num_episodes == 5


# -- ring compaction ------------------------------------------------------------------------------
def test_ring_compaction_keeps_index_and_log_consistent(tmp_path):
    folder = tmp_path / "rb"
    with create(folder, capacity=20) as rb:
        with ReplayBuffer.load_from(folder) as reader:
            for k in range(400):
                rb.extend(steps(1 + k % 3))
                rb.end_episode(**data_of(k), note="x" * (k % 7))
                if k % 37 == 0:
                    recs = check_index_matches_log(folder)
                    held = [e.id for e in rb.episodes]
                    entry = meta(folder)["episodes"]["log"]
                    assert recs[entry["skip"]:, 0].tolist() == held  # the live records are the held episodes
                    assert sorted(p.name for p in folder.glob("episodes.*")) == sorted([entry["file"], entry["index"]])
                    reader.refresh()
                    assert [(e.id, e.data) for e in reader.episodes] == [(e.id, e.data) for e in rb.episodes]
    entry = meta(folder)["episodes"]["log"]
    assert entry["file"] != "episodes.000000.log"  # it did compact
    check_index_matches_log(folder)
    with ReplayBuffer.load_from(folder) as rb:
        assert [e.data for e in rb.episodes] == [{**data_of(e.id), "note": "x" * (e.id % 7)} for e in rb.episodes]
        assert rb.episodes[-1].id == 399


# -- selections read data keys as columns ---------------------------------------------------------------
TRICKY = [
    {"success": True, "task": "push", "n": 3},
    {"success": False, "task": 'say "hi"', "n": 3.5},
    {"success": 1, "task": "a{b}c", "n": -2},
    {"task": "ünïcode", "nested": {"success": True}},
    {"success": None, "list": [1, {"success": True}]},
    {},
    {"success": "true", "task": "push", "n": 1e30},
    {"n": 0, "success": True, "x": "\\"},
]
EXPRESSIONS = ["success == true", "success != true", "success", "not success", "n > 2", "n <= 0",
               "task == 'push' and success", "task == 'say \"hi\"' or n == -2", "task == 'ünïcode'",
               "success == null", "success == 'true'", "steps > 1 and not interrupted", "done and id >= 3",
               "data.success == false", "nested.success == true", "list", "task"]


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_column_selection_equals_the_one_over_episode_objects(tmp_path, expression):
    folder = tmp_path / "rb"
    with create(folder) as rb:
        for k, data in enumerate(TRICKY):
            rb.extend(steps(1 + k % 2))
            rb.end_episode(**data)
        rb.extend(steps(1))  # an open episode too
        rb.flush()
        for buffer in (rb, ReplayBuffer.load_from(folder)):
            eps = buffer.episodes
            assert isinstance(eps, EpisodeList)
            with warnings.catch_warnings(record=True) as fast_warnings:
                warnings.simplefilter("always")
                fast = parse_selection(expression).select(eps)
            with warnings.catch_warnings(record=True) as slow_warnings:
                warnings.simplefilter("always")
                slow = parse_selection(expression).select(list(eps))
            assert fast == slow
            assert [str(w.message) for w in fast_warnings] == [str(w.message) for w in slow_warnings]


def test_a_column_selection_warns_of_a_missing_key_with_a_hint(tmp_path):
    folder = tmp_path / "rb"
    with create(folder) as rb:
        for k in range(5):
            rb.extend(steps(1))
            rb.end_episode(**data_of(k))
    with ReplayBuffer.load_from(folder) as rb:
        with pytest.warns(SelectionWarning, match="no held episode has the data key 'sucess'.*did you mean 'success'"):
            assert parse_selection("sucess == true").select(rb.episodes) == []


def test_the_episode_list_is_a_read_only_sequence(tmp_path):
    folder = tmp_path / "rb"
    small_folder(folder, 5)
    shutil.copytree(folder, tmp_path / "copy")
    with ReplayBuffer.load_from(folder) as rb:
        eps = rb.episodes
        as_list = [rb.episode(k) for k in range(5)]
        assert eps == as_list and as_list == list(eps) and eps[1:3] == as_list[1:3] and eps[::2] == as_list[::2]
        assert list(reversed(eps)) == as_list[::-1] and eps.index(as_list[3]) == 3 and as_list[2] in eps
        assert eps.ids.tolist() == [0, 1, 2, 3, 4] and eps != as_list[:4]
        with pytest.raises(IndexError, match="out of range"):
            eps[5]
        with pytest.raises(TypeError, match="integers or slices"):
            eps["0"]


def test_a_parsing_check_finds_a_damaged_middle_line_the_index_open_does_not_read(tmp_path):
    from trajstore.errors import FormatError
    from trajstore.replay_buffer.committed_table import read_committed

    folder = tmp_path / "rb"
    want = small_folder(folder)
    _, table, log = read_committed(folder, read_only=True, parse=True)  # a whole folder passes
    log.close()
    assert table.ids.tolist() == [w[0] for w in want]
    log_file = folder / "episodes.000000.log"
    raw = log_file.read_bytes()
    at = raw.index(b'"seed":2')
    log_file.write_bytes(raw[:at] + b'"seed"!2' + raw[at + 8:])  # same length: the index still tiles the log
    with pytest.raises(FormatError, match="episodes.000000.log is not valid JSON"):
        read_committed(folder, read_only=True, parse=True)
    with ReplayBuffer.load_from(folder) as rb:  # an open reads the first and last lines only
        assert rb.episodes[-1].data == data_of(5)
        with pytest.raises(FormatError, match="episodes.000000.log is not valid JSON"):
            rb.episodes[2].data
    at = raw.index(b'"stop":6')  # episode 2's stop, same length: the fields disagree with the index
    log_file.write_bytes(raw[:at] + b'"stop":7' + raw[at + 8:])
    with pytest.raises(FormatError, match="episodes.000000.idx does not match the lines of"):
        read_committed(folder, read_only=True, parse=True)


# -- found by hostile tests -------------------------------------------------------------------------
def test_no_lines_have_no_ranges():
    from trajstore.replay_buffer.episode_index import line_ranges

    starts, lengths = line_ranges(b"", 10)
    assert starts.shape == lengths.shape == (0,)
    starts, lengths = line_ranges(b'{"a": 1}\n{"b": 22}\n', 10)
    assert starts.tolist() == [10, 19] and lengths.tolist() == [9, 10]


def _child_reads(rb, queue):
    try:
        queue.put(([(e.id, e.start, e.stop) for e in rb.episodes], rb[0]["action"].tolist()))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        queue.put(repr(exc))


def test_a_forked_reader_of_a_folder_without_the_index_reads_it(tmp_path):
    # the child reopens the log and reads the records committed since: none, from a log without an index
    import multiprocessing

    folder = tmp_path / "rb"
    want = small_folder(folder, 3)
    strip_index(folder)
    with ReplayBuffer.load_from(folder) as rb:
        assert len(rb.episodes) == 3
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_child_reads, args=(rb, queue))
        child.start()
        got = queue.get(timeout=60)
        child.join(60)
    assert got == ([(i, s, e) for i, s, e, _ in want], [0.5, 0.5]), got


def test_an_empty_slice_of_the_episodes_is_empty_while_an_episode_is_open(tmp_path):
    folder = tmp_path / "rb"
    with create(folder) as rb:
        for k in range(3):
            rb.extend(steps(2))
            rb.end_episode()
        rb.extend(steps(1))  # the open episode: position 3
        eps = rb.episodes
        n = len(eps)
        assert n == 4 and eps[3].done is False
        assert eps[n:] == [] and eps[n:n] == [] and eps[3:3] == [] and eps[9:2] == [] and eps[2:1] == []
        assert [e.id for e in eps[2:]] == [2, 3] and [e.id for e in eps[3:]] == [3]


def test_a_huge_committed_record_count_is_a_format_error_not_a_memory_error(tmp_path):
    folder = tmp_path / "rb"
    small_folder(folder, 3)
    m = meta(folder)
    m["episodes"]["log"]["records"] = 2 ** 40
    (folder / "trajstore.json").write_text(json.dumps(m))
    for read_only in (True, False):
        with pytest.raises(FormatError):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", EpisodeIndexWarning)
                ReplayBuffer.load_from(folder, read_only=read_only).close()
