"""TFRecord framing and the tf.train.Example parser, on hand-made bytes."""

import struct

import numpy as np
import pytest

from trajstore.errors import FormatError
from trajstore.interop.rlds import _tfrecord
from trajstore.interop.rlds._example import parse_example
from trajstore.interop.rlds._tfrecord import iter_records, masked_crc32c, read_record

from tests.interop_rlds.records import BUILDER, SHARDS, example, feature, field, record, varint


def test_crc32c_check_value_and_python_fallback_agree():
    assert _tfrecord.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720 B.4)
    data = bytes(range(256)) * 3
    assert _tfrecord._python_crc32c(data) == _tfrecord.crc32c(data)
    assert _tfrecord._python_crc32c(b"") == 0


def test_fixture_framing():
    got = [(ref.number, ref.offset, ref.length) for ref, _ in iter_records(BUILDER / SHARDS[0])]
    assert [g[:2] for g in got] == [(0, 12), (1, 12 + got[0][2] + 16)]
    size = (BUILDER / SHARDS[0]).stat().st_size
    assert size == sum(length + 16 for _, _, length in got)
    ref, payload = next(iter_records(BUILDER / SHARDS[1]))
    assert read_record(ref) == payload


def test_packed_and_unpacked_lists_parse_alike():
    ints = [0, 1, 127, 128, 300, 2**40, -1, -(2**63), 2**63 - 1]
    floats = [0.5, -2.0, 1e30]
    for packed in (True, False):
        msg = field(1, 2, field(1, 2, field(1, 2, b"i") + field(2, 2, feature("int64", ints, packed=packed)))
                    + field(1, 2, field(1, 2, b"f") + field(2, 2, feature("float", floats, packed=packed)))
                    + field(1, 2, field(1, 2, b"b") + field(2, 2, feature("bytes", [b"", b"xy"]))))
        out = parse_example(msg, "m")
        assert out["i"].kind == "int64" and out["i"].values.tolist() == ints
        assert out["f"].kind == "float" and out["f"].values.dtype == np.float32
        assert out["f"].values.tolist() == [0.5, -2.0, np.float32(1e30)]
        assert out["b"].kind == "bytes" and list(out["b"].values) == [b"", b"xy"]
        assert out["b"].values[1] == b"xy" and out["b"].values[0:2] == [b"", b"xy"]


def test_unknown_fields_are_skipped_and_empty_feature_has_no_kind():
    msg = field(7, 0, 5) + field(1, 2, field(1, 2, field(1, 2, b"k") + field(2, 2, b"") + field(9, 5, b"abcd")))
    out = parse_example(msg, "m")
    assert out["k"].kind is None and len(out["k"]) == 0


@pytest.mark.parametrize("msg, said", [
    (b"\x0a\x80", "varint runs past"),                       # length varint cut short
    (b"\x0a" + b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
    (b"\x0a\x05\x0a\x02", "declares 5 bytes"),                 # length beyond the payload
    (field(1, 2, field(1, 3, b"")), "wire type 3"),            # a group
    (field(1, 2, field(1, 2, field(1, 2, b"k") + field(2, 2, field(3, 2, field(1, 2, b"\x80"))))), "packed varint runs past"),
    (field(1, 2, field(1, 2, field(1, 2, b"k") + field(2, 2, field(2, 2, field(1, 2, b"abc"))))), "not a multiple of 4"),
    (field(1, 2, field(1, 2, field(1, 2, b"\xff"))), "not UTF-8"),
    (field(1, 2, field(1, 2, field(1, 2, b"k")) * 2), "given twice"),
])
def test_hostile_protobuf_is_refused(msg, said):
    with pytest.raises(FormatError, match=said):
        parse_example(msg, "rec 0")


def _frame(payload: bytes) -> bytes:
    return record(payload)


def test_framing_refusals(tmp_path):
    good = _frame(example({"a": ("int64", [1])}))
    cases = {
        "cut_header": good[:7],
        "length_crc": good[:8] + b"\0\0\0\0" + good[12:],
        "too_long": struct.pack("<Q", 1 << 40) + struct.pack("<I", masked_crc32c(struct.pack("<Q", 1 << 40))) + b"x",
        "payload_crc": good[:-1] + bytes([good[-1] ^ 1]),
        "cut_payload": good + good[:-3],
    }
    said = {"cut_header": "record 0: the file ends inside the record header",
            "length_crc": "record 0: the length's CRC32C",
            "too_long": "record 0: declares 1099511627776 payload bytes, the file has 0 left",
            "payload_crc": "record 0: the payload's CRC32C",
            "cut_payload": "record 1: declares"}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(FormatError, match=f"{name}: {said[name]}"):
            list(iter_records(path))


def test_varint_helper_roundtrip():
    for n in (0, 1, 300, 2**63, 2**64 - 1):
        msg = field(1, 2, field(1, 2, field(1, 2, b"k") + field(2, 2, field(3, 2, field(1, 2, varint(n))))))
        assert parse_example(msg, "m")["k"].values.view(np.uint64).tolist() == [n]


def test_import_with_the_python_crc32c(tmp_path, monkeypatch):
    """Without google_crc32c the table-driven CRC32C checks the same records."""
    from trajstore.interop.formats import importer

    monkeypatch.setattr(_tfrecord, "crc32c", _tfrecord._python_crc32c)
    s = importer("rlds")(BUILDER, tmp_path / "rb", episodes=[1])
    assert (s.episodes, s.steps) == (1, 7)
