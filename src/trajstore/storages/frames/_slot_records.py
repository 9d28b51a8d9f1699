"""The on-disk records of ``index.log`` (:mod:`~trajstore.storages.frames._slot_index`): header, record
layout, and the checks that refuse what no writer writes.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from trajstore.errors import FormatError

LOG_FILE = "index.log"
MAGIC = b"TSSLOTIX"
VERSION = 1
#: One record: ``(slot, file_id, offset, length)`` as little-endian int64.
RECORD = np.dtype("<i8")
RECORD_BYTES = 4 * RECORD.itemsize
HEADER_BYTES = 32
HEADER = MAGIC + np.array([VERSION, RECORD_BYTES, 0], dtype=RECORD).tobytes()


def write_all(fd: int, data: bytes | memoryview) -> None:
    """``os.write`` until every byte is written (a regular file may take fewer bytes)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def check_header(head: bytes, path: Path) -> None:
    if len(head) < HEADER_BYTES or head[:8] != MAGIC:
        raise FormatError(f"{path} is not a trajstore slot index (bad or missing header)")
    version, record_bytes, _ = np.frombuffer(head[8:HEADER_BYTES], dtype=RECORD)
    if version > VERSION or record_bytes != RECORD_BYTES:
        raise FormatError(f"{path}: slot index version {version} (record size {record_bytes}) is newer than "
                          f"this trajstore reads ({VERSION}); upgrade trajstore")


def check_records(rec: np.ndarray, before: int, path: Path, max_file_id: int, declared: int, n_given: int) -> None:
    """Refuse records read from the log that no writer writes (a damaged log), before they size
    any table. A slot must be below ``n_slots``, the number of records in the log (storages
    write slots from 0 up, each with a record) or the slot count a reservation declared (in its
    offset field: ``SlotIndex.update`` logs one before a slot past both, ``SlotIndex.compact`` one for the
    table); a slot's file id must have been reserved (a reservation is logged before a file is
    used, and a compaction keeps the highest); offsets and lengths must not be negative.

    Raises:
        FormatError: names the log and the first bad record.
    """
    if len(rec) == 0:
        return
    slot, fid, off, length = rec.T
    reserved = max(max_file_id, int(fid[slot < 0].max(initial=-1)))
    declared = max(declared, int(off[slot < 0].max(initial=0)))
    written = slot >= 0
    bad = ((slot < -1) | (slot >= max(n_given, before + len(rec), declared)) | (fid < -1)
           | (written & (fid > reserved)) | (written & (fid >= 0) & ((off < 0) | (length < 0))))
    if bad.any():
        i = int(np.argmax(bad))
        raise FormatError(f"{path} is damaged: record {before + i} at byte "
                          f"{HEADER_BYTES + (before + i) * RECORD_BYTES} is (slot {int(slot[i])}, file "
                          f"{int(fid[i])}, offset {int(off[i])}, length {int(length[i])}), which no writer logs")


def tally(ids: np.ndarray) -> tuple[list[int], list[int]]:
    """The distinct file ids >= 0 of ``ids`` and how often each occurs (a sort, not np.unique: see SlotIndex._apply)."""
    ids = np.sort(ids[ids >= 0])
    if len(ids) == 0:
        return [], []
    first = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    return ids[first].tolist(), np.diff(np.r_[first, len(ids)]).tolist()

