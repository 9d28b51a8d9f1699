"""MCAP files record by record (https://mcap.dev/spec), for what rosbags cannot read: the declared sizes
of a file checked before rosbags allocates them, and the readable prefix of a file cut short (a recorder
killed before it wrote the summary and footer, or a copy cut anywhere, its summary section included).

Only the records needed are parsed: Header, Schema, Channel, Message and Chunk (uncompressed, zstd or
lz4; a chunk cut short yields the whole messages it still holds), the sizes of Chunk Index records, and
where the Data End record is (after it come only summary records: no message).
"""

from __future__ import annotations

import struct
from binascii import crc32
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from trajstore.errors import FormatError

MAGIC = b"\x89MCAP0\r\n"
HEADER, FOOTER, SCHEMA, CHANNEL, MESSAGE, CHUNK, CHUNK_INDEX, DATA_END = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08, 0x0F
#: Largest uncompressed chunk accepted (rosbag2's MCAP presets write 768 KiB .. 4 MiB chunks; rosbags 1 MiB).
MAX_CHUNK_BYTES = 1 << 30


@dataclass(frozen=True)
class Schema:
    id: int
    name: str
    encoding: str
    data: str


@dataclass(frozen=True)
class Channel:
    id: int
    schema_id: int
    topic: str
    message_encoding: str


@dataclass
class Scan:
    """What a scan of the file found: its schemas and channels, and where the readable part ends."""
    schemas: dict[int, Schema]
    channels: dict[int, Channel]
    complete: bool = False       # the file ends with a footer and the magic
    readable_bytes: int = 0      # offset of the first byte that could not be read
    data_end: bool = False       # the Data End record was read: every record of the data section is whole


def _u(fmt: str, data: bytes, offset: int = 0) -> tuple:
    return struct.unpack_from(fmt, data, offset)


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = _u("<I", data, pos)
    if pos + 4 + n > len(data):
        raise ValueError("string runs past its record")
    return data[pos + 4:pos + 4 + n].decode("utf-8", "replace"), pos + 4 + n


def _records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Whole records of a chunk's (possibly cut) content; stops at the first record cut short."""
    pos = 0
    while pos + 9 <= len(data):
        op, length = data[pos], _u("<Q", data, pos + 1)[0]
        if pos + 9 + length > len(data):
            return
        yield op, data[pos + 9:pos + 9 + length]
        pos += 9 + length


def _decompress_prefix(data: bytes, compression: str, size: int, whole: bool, crc: int, where: str) -> bytes:
    """A chunk's records; for a chunk cut short (``whole`` False), as much of them as ``data`` gives."""
    if compression == "":
        out = data
    elif compression == "zstd":
        try:
            from backports import zstd  # rosbags' own dependency before Python 3.14
        except ImportError:  # pragma: no cover - Python >= 3.14
            from compression import zstd  # type: ignore[no-redef]
        d = zstd.ZstdDecompressor()
        try:
            out = d.decompress(data, max_length=size)
        except zstd.ZstdError:
            out = b""
    elif compression == "lz4":
        import lz4.frame

        try:
            out = lz4.frame.LZ4FrameDecompressor().decompress(data, max_length=size)
        except RuntimeError:
            out = b""
    else:
        raise FormatError(f"{where}: chunk compression {compression!r} is not supported (none, zstd, lz4)")
    if whole and (len(out) != size or (crc and crc32(out) != crc)):
        raise FormatError(f"{where}: a chunk does not decompress to its declared {size} bytes (or its CRC differs)")
    return out[:size]


def scan(path: Path, *, messages: bool = False) -> Iterator[tuple[int, int, bytes]]:
    """Walk ``path`` record by record; with ``messages`` yield ``(channel id, log time ns, data)`` of
    every whole message of the readable part, in file order (a chunk's messages by log time). The
    generator's return value (``StopIteration.value``) is the :class:`Scan`.

    A record whose length runs past the end of the file (the file was cut there, or the length is hostile)
    ends the readable part: a chunk yields the whole messages it still holds; nothing past it is read.

    Raises:
        FormatError: not an MCAP file (magic, header), a profile other than ``ros2``, a chunk (or chunk index)
            declaring more than its record holds or :data:`MAX_CHUNK_BYTES` (names the file and offset), an
            unknown chunk compression, a whole record that does not parse.
    """
    found = Scan({}, {})
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            raise FormatError(f"{path}: not an MCAP file (its first bytes are not the MCAP magic)")
        pos = 8
        while True:
            head = f.read(9)
            if len(head) < 9:  # no footer: the file was cut short
                found.readable_bytes = pos
                return found
            op, length = head[0], _u("<Q", head, 1)[0]
            where = f"{path} (record at offset {pos})"
            if pos + 9 + length > size:  # cut short (or a hostile length): nothing past here is read
                found.readable_bytes = pos
                if op == CHUNK and messages:
                    yield from _chunk_prefix(f, size - pos - 9, found, where)
                elif op == CHUNK:
                    _check_chunk_head(f.read(min(length, size - pos - 9, 64)), where, whole=False)
                return found  # any other record (message index, metadata, summary, footer) holds no message
            if op == FOOTER:
                found.complete = f.read(length + 8)[length:] == MAGIC
                found.readable_bytes = size
                return found
            if op in (HEADER, SCHEMA, CHANNEL, CHUNK_INDEX) or (op == MESSAGE and messages):
                body = f.read(length)
                yield from _record(op, body, found, where, messages)
            elif op == CHUNK:
                if messages:
                    yield from _chunk(f.read(length), found, where)
                else:
                    _check_chunk_head(f.read(min(length, 128)), where, whole=True, length=length)
                    f.seek(pos + 9 + length)
            else:
                found.data_end = found.data_end or op == DATA_END
                f.seek(length, 1)
            pos += 9 + length


def _record(op: int, body: bytes, found: Scan, where: str, messages: bool) -> Iterator[tuple[int, int, bytes]]:
    try:
        if op == HEADER:
            profile, _ = _string(body, 0)
            if profile != "ros2":
                raise FormatError(f"{where}: MCAP profile {profile!r}; ROS 2 bags have profile 'ros2'")
        elif op == SCHEMA:
            (sid,) = _u("<H", body)
            name, p = _string(body, 2)
            enc, p = _string(body, p)
            data, _ = _string(body, p)
            found.schemas[sid] = Schema(sid, name, enc, data)
        elif op == CHANNEL:
            cid, sid = _u("<HH", body)
            topic, p = _string(body, 4)
            enc, _ = _string(body, p)
            found.channels[cid] = Channel(cid, sid, topic, enc)
        elif op == MESSAGE and messages:
            cid, _seq, log_time = _u("<HIQ", body)
            yield cid, log_time, body[22:]
        elif op == CHUNK_INDEX:
            start, clen = _u("<QQ", body, 16)
            (nmap,) = _u("<I", body, 32)
            p = 36 + nmap + 8
            compression, p = _string(body, p)
            csize, usize = _u("<QQ", body, p)
            if usize > MAX_CHUNK_BYTES or csize > clen:
                raise FormatError(f"{where}: a chunk index declares a chunk of {csize} bytes ({usize} uncompressed) "
                                  f"in {clen} bytes; at most {MAX_CHUNK_BYTES} uncompressed bytes are read")
    except (struct.error, ValueError) as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError(f"{where}: a malformed record (opcode {op:#04x}): {exc}") from None


def _check_chunk_head(head: bytes, where: str, *, whole: bool,
                      length: int | None = None) -> tuple[int, int, str, int, int]:
    """``(uncompressed size, crc, compression, compressed size, records offset)`` of a chunk record."""
    try:
        _start, _end, usize, crc = _u("<QQQI", head)
        compression, p = _string(head, 28)
        (csize,) = _u("<Q", head, p)
    except (struct.error, ValueError):
        if whole:
            raise FormatError(f"{where}: a malformed chunk record") from None
        return 0, 0, "", 0, len(head)
    if usize > MAX_CHUNK_BYTES or (length is not None and p + 8 + csize > length):
        raise FormatError(f"{where}: a chunk declares {csize} bytes ({usize} uncompressed) in a record of "
                          f"{length} bytes; at most {MAX_CHUNK_BYTES} uncompressed bytes are read")
    frame = _frame_content_size(compression, head[p + 8:])
    if whole and frame is not None and frame != usize:
        raise FormatError(f"{where}: a {compression} chunk whose frame holds {frame} bytes, while the chunk "
                          f"declares {usize} uncompressed bytes")
    return usize, crc, compression, csize, p + 8


def _frame_content_size(compression: str, start: bytes) -> int | None:
    """The content size a zstd or lz4 frame header declares (what rosbags' decompression will allocate), or
    None when it declares none or cannot be read from ``start``."""
    try:
        if compression == "zstd":
            try:
                from backports import zstd
            except ImportError:  # pragma: no cover - Python >= 3.14
                from compression import zstd  # type: ignore[no-redef]
            size = zstd.get_frame_info(start).decompressed_size
        elif compression == "lz4":
            import lz4.frame

            size = lz4.frame.get_frame_info(start).get("content_size") or None
        else:
            return None
    except Exception:  # a header cut by the bytes read: rosbags checks the decompressed size
        return None
    return None if size is None else int(size)


def _chunk_messages(records: bytes, found: Scan, where: str) -> Iterator[tuple[int, int, bytes]]:
    out = []
    for op, body in _records(records):
        for item in _record(op, body, found, where, True):
            out.append(item)
    out.sort(key=lambda m: m[1])
    yield from out


def _chunk(body: bytes, found: Scan, where: str) -> Iterator[tuple[int, int, bytes]]:
    usize, crc, compression, csize, p = _check_chunk_head(body[:64 + 256], where, whole=True, length=len(body))
    records = _decompress_prefix(body[p:p + csize], compression, usize, True, crc, where)
    yield from _chunk_messages(records, found, where)


def _chunk_prefix(f: BinaryIO, available: int, found: Scan, where: str) -> Iterator[tuple[int, int, bytes]]:
    body = f.read(available)
    usize, crc, compression, csize, p = _check_chunk_head(body[:64 + 256], where, whole=False)
    if not usize:
        return
    records = _decompress_prefix(body[p:p + csize], compression, usize, False, crc, where)
    yield from _chunk_messages(records, found, where)
