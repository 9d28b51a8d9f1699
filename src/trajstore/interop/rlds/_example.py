"""A ``tf.train.Example`` protobuf message, parsed from its wire format: no protobuf library needed.

Messages (TensorFlow's ``tensorflow/core/example/{example,feature}.proto``)::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }      // entries: { string key = 1; Feature value = 2; }
    Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed = true]; }
    Int64List { repeated int64 value = 1 [packed = true]; }

Wire format (protobuf's encoding guide): a field is a varint tag ``(number << 3) | wire type``; wire types
0 (varint), 1 (8 bytes), 2 (varint length + bytes), 5 (4 bytes). Packed and unpacked repeated numbers are
both read; unknown fields are skipped; groups (wire types 3, 4) are refused. The parser knows only these
five messages, so nesting is bounded by construction (four levels); every varint is at most 10 bytes and
every length is checked against the bytes left before anything is sliced.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Iterator, Sequence, Union

import numpy as np

from trajstore.errors import FormatError

__all__ = ["ByteList", "Feature", "parse_example"]



class ByteList(Sequence):
    """The values of a BytesList, read lazily: the message and a ``(start, end)`` pair per value (8 bytes a
    value, not a ``bytes`` object each). ``values[i]`` is ``bytes``, a slice a list of ``bytes``."""

    def __init__(self, buf: memoryview, spans: np.ndarray):
        self._buf, self._spans = buf, spans

    def __len__(self) -> int:
        return len(self._spans)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [bytes(self._buf[s:e]) for s, e in self._spans[i].tolist()]
        s, e = self._spans[i]
        return bytes(self._buf[int(s):int(e)])

    def __iter__(self) -> Iterator[bytes]:
        for k in range(0, len(self._spans), 4096):
            for s, e in self._spans[k:k + 4096].tolist():
                yield bytes(self._buf[s:e])


Values = Union[list, np.ndarray, ByteList]


@dataclass(frozen=True)
class Feature:
    """One feature of an Example: ``kind`` ``"bytes"`` (``values`` a :class:`ByteList`), ``"float"``
    (``(n,)`` float32) or ``"int64"`` (``(n,)`` int64); ``kind`` None for a Feature with no list set."""

    kind: str | None
    values: Values

    def __len__(self) -> int:
        return len(self.values)


def _varint(buf: memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    result = shift = 0
    for i in range(10):
        if pos + i >= end:
            raise FormatError(f"{where}: a varint runs past the end of its message")
        b = buf[pos + i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos + i + 1
        shift += 7
    raise FormatError(f"{where}: a varint longer than 10 bytes")


def _fields(buf: memoryview, start: int, end: int, where: str, spans: bool = False):
    """``(field number, wire type, value)`` of a message's fields in ``buf[start:end]``: ``value`` is an
    int for wire type 0 (its ``(start, end)`` bytes when ``spans``), a ``(start, end)`` pair for types 1,
    2 and 5."""
    pos = start
    while pos < end:
        tag, pos = _varint(buf, pos, end, where)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, after = _varint(buf, pos, end, where)
            yield number, wire, ((pos, after) if spans else value)
            pos = after
            continue
        if wire == 2:
            n, pos = _varint(buf, pos, end, where)
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
        else:
            raise FormatError(f"{where}: wire type {wire} (field {number}) is not used by tf.train.Example")
        if n > end - pos:
            raise FormatError(f"{where}: field {number} declares {n} bytes, its message has {end - pos} left")
        yield number, wire, (pos, pos + n)
        pos += n


#: Bytes of packed varints decoded at a time (bounds the decoder's temporary arrays).
_VARINT_CHUNK = 1 << 14


def _decode_varints(b: np.ndarray) -> np.ndarray:
    ends = np.flatnonzero(b < 0x80)
    starts = np.concatenate([[0], ends[:-1] + 1])
    if int((ends - starts).max()) >= 10:
        raise FormatError("a varint longer than 10 bytes")
    position = np.arange(len(b)) - np.repeat(starts, ends - starts + 1)
    parts = (b & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def _packed_varints(data: bytes | bytearray, where: str) -> np.ndarray:
    """Packed varints as int64 (two's complement of the 64-bit value), decoded with NumPy a chunk of
    :data:`_VARINT_CHUNK` bytes at a time (the result is 8 bytes per value, the temporaries bounded)."""
    b = np.frombuffer(data, np.uint8)
    if not len(b):
        return np.zeros(0, np.int64)
    if b[-1] >= 0x80:
        raise FormatError(f"{where}: a packed varint runs past the end of its list")
    out = np.empty(int(np.count_nonzero(b < 0x80)), np.int64)
    pos = done = 0
    while pos < len(b):
        stop = min(pos + _VARINT_CHUNK, len(b))
        if stop < len(b):  # end the chunk after its last complete varint
            ends = np.flatnonzero(b[pos:stop] < 0x80)
            if not len(ends):
                raise FormatError(f"{where}: a varint longer than 10 bytes")
            stop = pos + int(ends[-1]) + 1
        try:
            values = _decode_varints(b[pos:stop])
        except FormatError as exc:
            raise FormatError(f"{where}: {exc}") from None
        out[done:done + len(values)] = values
        done += len(values)
        pos = stop
    return out


def _list(buf: memoryview, start: int, end: int, kind: str, where: str) -> Values:
    """One BytesList / FloatList / Int64List. Numbers (packed or not) are gathered as raw bytes (4 per
    float, the varint bytes of each integer), then decoded at once: no object per value."""
    if kind == "bytes":
        spans = array("I" if len(buf) < 1 << 32 and array("I").itemsize == 4 else "q")
        for number, wire, value in _fields(buf, start, end, where):
            if number == 1:
                if wire != 2:
                    raise FormatError(f"{where}: a bytes_list value of wire type {wire}")
                spans.extend(value)
        return ByteList(buf, np.frombuffer(spans, np.uint32 if spans.typecode == "I" else np.int64).reshape(-1, 2))
    raw = bytearray()
    for number, wire, value in _fields(buf, start, end, where, spans=True):
        if number != 1:
            continue
        s, e = value
        if kind == "float":
            if wire not in (2, 5):
                raise FormatError(f"{where}: a float_list value of wire type {wire}")
            if (e - s) % 4:
                raise FormatError(f"{where}: a packed float_list of {e - s} bytes (not a multiple of 4)")
        elif wire == 2:
            if e > s and buf[e - 1] >= 0x80:
                raise FormatError(f"{where}: a packed varint runs past the end of its list")
        elif wire != 0:
            raise FormatError(f"{where}: an int64_list value of wire type {wire}")
        raw += buf[s:e]
    if kind == "float":
        return np.frombuffer(raw, "<f4").astype(np.float32, copy=False)
    return _packed_varints(raw, where)


_KINDS = {1: "bytes", 2: "float", 3: "int64"}


def _feature(buf: memoryview, start: int, end: int, where: str) -> Feature:
    kind, values = None, []
    for number, wire, value in _fields(buf, start, end, where):
        if number in _KINDS:
            if wire != 2:
                raise FormatError(f"{where}: a {_KINDS[number]}_list of wire type {wire}")
            kind = _KINDS[number]  # a oneof: the last one set wins, as protobuf parses it
            values = _list(buf, value[0], value[1], kind, where)
    return Feature(kind, values)


def parse_example(payload: bytes, where: str) -> dict[str, Feature]:
    """The features of a serialized ``tf.train.Example`` (``payload``), by key.

    Args:
        payload: the message bytes (one TFRecord record).
        where: the record, for messages (``"<file>: record 3"``).

    Raises:
        FormatError: a varint or length beyond its message, a field of a wire type the message does not
            use, a feature key that is not UTF-8 or is given twice; the message names ``where`` (and the key).
    """
    buf = memoryview(payload)
    out: dict[str, Feature] = {}
    for number, wire, span in _fields(buf, 0, len(buf), where):
        if number != 1 or wire != 2:
            continue
        for n2, w2, entry in _fields(buf, span[0], span[1], f"{where}: features"):
            if n2 != 1 or w2 != 2:
                continue
            key_raw, feature = b"", Feature(None, [])
            value_span = None
            for n3, w3, part in _fields(buf, entry[0], entry[1], f"{where}: a feature entry"):
                if n3 == 1 and w3 == 2:
                    key_raw = bytes(buf[part[0]:part[1]])
                elif n3 == 2 and w3 == 2:
                    value_span = part
            try:
                key = key_raw.decode("utf-8")
            except UnicodeDecodeError:
                raise FormatError(f"{where}: a feature key that is not UTF-8: {key_raw[:60]!r}") from None
            if value_span is not None:
                feature = _feature(buf, value_span[0], value_span[1], f"{where}: feature {key!r}")
            if key in out:
                raise FormatError(f"{where}: feature {key!r} is given twice")
            out[key] = feature
    return out
