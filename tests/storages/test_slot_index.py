"""SlotIndex against a plain dict model: random updates, reloads, compaction, torn records, readers."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajstore.errors import FormatError
from trajstore.storages.frames._slot_index import HEADER_BYTES, LOG_FILE, RECORD_BYTES, SlotIndex


def assert_matches(index: SlotIndex, model: dict[int, tuple[int, int, int]], n_slots: int) -> None:
    assert index.n_slots == n_slots
    expected = np.full((n_slots, 3), -1, dtype=np.int64)
    for slot, row in model.items():
        expected[slot] = row
    np.testing.assert_array_equal(index.table, expected)
    counts = Counter(row[0] for row in model.values() if row[0] >= 0)
    np.testing.assert_array_equal(index.live_files(), sorted(counts))
    for fid, c in counts.items():
        assert index.live_count(fid) == c


# One op: a batch of (slot, file_id) writes; offsets/lengths are derived so each record is unique.
batches = st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(-1, 6)), min_size=0, max_size=12),
                   min_size=1, max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=batches)
def test_random_updates_match_dict_model(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:
    folder = tmp_path_factory.mktemp("idx")
    index = SlotIndex.create(folder, n_slots=8)
    reader = SlotIndex.open(folder, n_slots=8)
    model: dict[int, tuple[int, int, int]] = {}
    n_slots = 8
    for step, batch in enumerate(ops):
        if not batch:
            continue
        slots = np.array([s for s, _ in batch])
        fids = np.array([f for _, f in batch])
        offsets = np.arange(len(batch)) + 1000 * step
        lengths = np.arange(len(batch)) + 7
        before = Counter(row[0] for row in model.values() if row[0] >= 0)
        emptied = index.update(slots, fids, offsets, lengths)
        for s, f, o, n in zip(slots, fids, offsets, lengths):
            model[int(s)] = (int(f), int(o), int(n)) if f >= 0 else (-1, -1, -1)
        n_slots = max(n_slots, int(slots.max()) + 1)
        after = Counter(row[0] for row in model.values() if row[0] >= 0)
        assert sorted(emptied) == sorted(f for f in before if after[f] == 0)
        assert_matches(index, model, n_slots)
    reader.refresh()
    assert_matches(reader, model, n_slots)
    index.close()
    again = SlotIndex.open(folder, n_slots=8)
    assert_matches(again, model, n_slots)
    again.compact()
    assert_matches(SlotIndex.open(folder, n_slots=8), model, n_slots)
    for i in (again, reader):
        i.close()


def test_torn_trailing_record_is_ignored_and_truncated(tmp_path: Path) -> None:
    index = SlotIndex.create(tmp_path, n_slots=4)
    index.update(np.array([0, 1]), np.array([0, 0]), np.array([0, 10]), np.array([10, 5]))
    index.close()
    with open(tmp_path / LOG_FILE, "ab") as f:
        f.write(b"\x01" * (RECORD_BYTES // 2))  # a crash in the middle of a record
    ro = SlotIndex.open(tmp_path, n_slots=4)
    np.testing.assert_array_equal(ro.lookup(np.array([0, 1, 2])), [[0, 0, 10], [0, 10, 5], [-1, -1, -1]])
    writer = SlotIndex.open(tmp_path, read_only=False)  # truncates the torn tail before appending
    writer.update(np.array([2]), 1, np.array([0]), np.array([3]))
    assert (os.path.getsize(tmp_path / LOG_FILE) - HEADER_BYTES) % RECORD_BYTES == 0
    writer.close()
    again = SlotIndex.open(tmp_path, n_slots=4)
    np.testing.assert_array_equal(again.lookup(np.array([0, 1, 2])), [[0, 0, 10], [0, 10, 5], [1, 0, 3]])
    again.close()


def test_reader_follows_tail_and_compaction(tmp_path: Path) -> None:
    writer = SlotIndex.create(tmp_path, n_slots=2)
    reader = SlotIndex.open(tmp_path)
    writer.update(np.array([0]), 0, np.array([0]), np.array([4]))
    assert reader.refresh() and reader.lookup(np.array([0])).tolist() == [[0, 0, 4]]
    assert not reader.refresh()
    ino = os.stat(tmp_path / LOG_FILE).st_ino
    for i in range(1100):  # > 4 * n_slots + 1024 records: the writer compacts
        writer.update(np.array([i % 2]), 3, np.array([i]), np.array([1]))
    assert os.stat(tmp_path / LOG_FILE).st_ino != ino
    assert os.path.getsize(tmp_path / LOG_FILE) < HEADER_BYTES + 2000 * RECORD_BYTES
    reader.refresh()
    np.testing.assert_array_equal(reader.table, writer.table)
    assert reader.live_count(3) == 2 and reader.live_count(0) == 0
    for i in (writer, reader):
        i.close()


def test_file_ids_are_never_reused(tmp_path: Path) -> None:
    index = SlotIndex.create(tmp_path)
    assert [index.new_file_id() for _ in range(3)] == [0, 1, 2]
    index.update(np.array([0]), 1, np.array([0]), np.array([1]))
    index.update(np.array([0]), -1, np.array([0]), np.array([0]))  # back to unwritten: no file is live
    index.compact()
    index.close()
    again = SlotIndex.open(tmp_path, read_only=False)
    assert again.live_files().tolist() == [] and again.new_file_id() == 3
    again.close()


def test_read_only_and_bad_header(tmp_path: Path) -> None:
    SlotIndex.create(tmp_path).close()
    ro = SlotIndex.open(tmp_path)
    with pytest.raises(PermissionError):
        ro.update(np.array([0]), 0, np.array([0]), np.array([1]))
    ro.close()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / LOG_FILE).write_bytes(b"not an index at all, no sir" * 3)
    with pytest.raises(FormatError, match="not a trajstore slot index"):
        SlotIndex.open(tmp_path / "other")


def test_before_compact_runs_before_the_snapshot_replaces_the_log(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    index = SlotIndex.create(tmp_path, n_slots=1, before_compact=lambda: events.append("sync payloads"))
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b)))
    for i in range(1029):  # 4 * 1 + 1024 records, then one more triggers compaction
        index.update(np.array([0]), 0, np.array([i]), np.array([1]))
    assert events == ["sync payloads", "replace"]
    index.close()
