"""Test helpers: write TFRecord files and tf.train.Example messages (an encoder written from the wire-format
description, independent of the reader), and copies of the rlds_sim fixture with one record changed."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Callable

import numpy as np

from trajstore.interop.rlds._example import parse_example
from trajstore.interop.rlds._tfrecord import iter_records, masked_crc32c

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rlds_sim"
BUILDER = FIXTURE / "1.0.0"
SHARDS = ("rlds_sim-train.tfrecord-00000-of-00002", "rlds_sim-train.tfrecord-00001-of-00002")
#: Stored order of the fixture's episodes (README: hashed order 1, 2, then 0) and their lengths.
ORDER = (1, 2, 0)
LENGTHS = {0: 12, 1: 20, 2: 7}


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number: int, wire: int, payload: bytes | int) -> bytes:
    tag = varint((number << 3) | wire)
    if wire == 0:
        return tag + varint(payload)
    if wire == 2:
        return tag + varint(len(payload)) + payload
    return tag + payload


def feature(kind: str, values, *, packed: bool = True) -> bytes:
    """A serialized Feature: kind "bytes" / "float" / "int64"."""
    if kind == "bytes":
        inner = b"".join(field(1, 2, v) for v in values)
        return field(1, 2, inner)
    if kind == "float":
        arr = np.asarray(values, "<f4")
        inner = field(1, 2, arr.tobytes()) if packed else b"".join(field(1, 5, struct.pack("<f", v)) for v in arr)
        return field(2, 2, inner)
    ints = [int(v) for v in values]
    inner = field(1, 2, b"".join(varint(v) for v in ints)) if packed else b"".join(field(1, 0, v) for v in ints)
    return field(3, 2, inner)


def example(features: dict[str, tuple[str, object]]) -> bytes:
    entries = b"".join(field(1, 2, field(1, 2, k.encode()) + field(2, 2, feature(kind, v)))
                       for k, (kind, v) in features.items())
    return field(1, 2, entries)


def record(payload: bytes) -> bytes:
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", masked_crc32c(length)) + payload + struct.pack("<I", masked_crc32c(payload))


def as_dict(payload: bytes) -> dict[str, tuple[str, object]]:
    """A parsed Example as ``{key: (kind, values)}`` (values as lists), to change and re-encode."""
    return {k: (f.kind, list(f.values)) for k, f in parse_example(payload, "test").items()}


def copy_fixture(tmp: Path) -> Path:
    """A writable copy of the builder folder; returns it (``tmp/rlds_sim/1.0.0``)."""
    dst = tmp / "rlds_sim" / "1.0.0"
    shutil.copytree(BUILDER, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    return dst


def payloads(shard: Path) -> list[bytes]:
    return [p for _, p in iter_records(shard)]


def rewrite(builder: Path, shard: int, number: int, change: Callable[[dict], None]) -> Path:
    """Re-encode record ``number`` of shard ``shard`` after ``change(features dict)``; returns the shard."""
    path = builder / SHARDS[shard]
    records = payloads(path)
    feats = as_dict(records[number])
    change(feats)
    records[number] = example(feats)
    path.write_bytes(b"".join(record(p) for p in records))
    return path
