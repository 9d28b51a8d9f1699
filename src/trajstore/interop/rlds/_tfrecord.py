"""TFRecord framing: the records of one ``.tfrecord`` file, each checked against its CRC32C.

Format (TensorFlow's ``tensorflow/core/lib/io/record_writer.cc``, the layout TFDS writes): each record is
``uint64 length`` (little-endian), ``uint32 masked_crc32c(length bytes)``, ``length`` payload bytes,
``uint32 masked_crc32c(payload)``; ``masked(c) = ((c >> 15) | (c << 17)) + 0xA282EAD8`` (mod 2**32).

CRC32C (Castagnoli) comes from ``google_crc32c`` when it is installed (C code; the ``rlds`` extra),
else from a table-driven implementation here (pure Python, a few MB/s: correct, slow on big datasets).
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from trajstore.errors import FormatError

__all__ = ["MAX_RECORD_BYTES", "RecordRef", "crc32c", "iter_records", "masked_crc32c", "read_record"]

#: The largest record (one RLDS episode) read: 2 GiB. A larger declared length is refused before reading.
MAX_RECORD_BYTES = 2 << 30

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")


@functools.cache
def _table() -> tuple[int, ...]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


def _python_crc32c(data: bytes) -> int:
    table = _table()
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _pick() -> Callable[[bytes], int]:
    try:
        import google_crc32c
    except ImportError:
        return _python_crc32c
    return google_crc32c.value


#: CRC32C (Castagnoli, reflected, init and xor-out 0xFFFFFFFF) of bytes: ``crc32c(b"123456789") == 0xE3069283``.
crc32c: Callable[[bytes], int] = _pick()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C of ``data`` (uint32)."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


@dataclass(frozen=True)
class RecordRef:
    """Where one record's payload is: file, record number in it (from 0), byte offset and length."""

    path: Path
    number: int
    offset: int
    length: int

    def where(self) -> str:
        return f"{self.path}: record {self.number}"


def _read_exact(f: BinaryIO, n: int, ref: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise FormatError(f"{ref}: the file ends inside the record ({len(data)} of {n} bytes)")
    return data


def _check_payload(payload: bytes, footer: bytes, where: str) -> None:
    (crc,) = _FOOTER.unpack(footer)
    if masked_crc32c(payload) != crc:
        raise FormatError(f"{where}: the payload's CRC32C does not match (a damaged file)")


def iter_records(path: str | os.PathLike) -> Iterator[tuple[RecordRef, bytes]]:
    """Every record of the TFRecord file ``path`` with its payload, in file order, one at a time.

    Raises:
        FormatError: a header cut short, a length CRC or payload CRC that does not match, a declared length
            beyond the bytes left in the file or :data:`MAX_RECORD_BYTES` (refused before reading it); the
            message names the file and the record number.
        OSError: the file cannot be read.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        offset, number = 0, 0
        while offset < size:
            where = f"{path}: record {number}"
            header = f.read(_HEADER.size)
            if len(header) != _HEADER.size:
                raise FormatError(f"{where}: the file ends inside the record header ({len(header)} of 12 bytes)")
            length, length_crc = _HEADER.unpack(header)
            if masked_crc32c(header[:8]) != length_crc:
                raise FormatError(f"{where}: the length's CRC32C does not match (a damaged file or not TFRecord)")
            left = size - offset - _HEADER.size - _FOOTER.size
            if length > left:
                raise FormatError(f"{where}: declares {length} payload bytes, the file has {max(left, 0)} left")
            if length > MAX_RECORD_BYTES:
                raise FormatError(f"{where}: declares {length} payload bytes, more than the "
                                  f"{MAX_RECORD_BYTES} an import reads")
            payload = _read_exact(f, length, where)
            _check_payload(payload, _read_exact(f, _FOOTER.size, where), where)
            yield RecordRef(path, number, offset + _HEADER.size, length), payload
            offset += _HEADER.size + length + _FOOTER.size
            number += 1


def read_record(ref: RecordRef) -> bytes:
    """The payload of the record ``ref`` (found by :func:`iter_records`), its CRC32C checked again.

    Raises:
        FormatError: the file changed (cut short, CRC mismatch); names the file and record number.
    """
    with open(ref.path, "rb") as f:
        f.seek(ref.offset)
        payload = _read_exact(f, ref.length, ref.where())
        _check_payload(payload, _read_exact(f, _FOOTER.size, ref.where()), ref.where())
    return payload
