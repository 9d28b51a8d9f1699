"""A batch read of :class:`~trajstore.storages.frames.image.ImageStorage` frames: payload bytes to pixels.

The slots' payloads (``(file id, offset, length)`` rows of the slot index) are read into one
buffer laid out for the decoder: frame ``i`` gets a fixed-size place ``i * stride`` with the
shared JPEG header (if the folder has one) copied in front of every place by one NumPy
assignment, and its stored bytes read right after it
(:meth:`~trajstore.storages.frames._payload_files.PayloadFiles.read_into`: sorted by file and
offset, nearby frames coalesced into one ``os.preadv`` straight into their places). A frame stored
whole (it begins with the start-of-image marker) is decoded from its own bytes, an abbreviated one
from the header and its bytes; neither is concatenated into a new ``bytes``. The decoder then
writes each frame straight into its row of the output batch
(:func:`~trajstore.storages.frames._image_codec.decode_batch`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trajstore.storages.frames import _image_codec as codec
from trajstore.storages._selection import Selection
from trajstore.storages.frames._payload_files import PayloadFiles


def read_payloads(files: PayloadFiles, fid: np.ndarray, off: np.ndarray, length: np.ndarray, header: bytes | None,
                  where: Callable[[int], str]) -> list[memoryview]:
    """The encoded frames ``i`` (file ``fid[i]``, ``length[i]`` bytes at ``off[i]``, int64 ``(N,)`` each, any
    order) as views of one buffer, each a whole JPEG or PNG: ``header`` + the stored bytes for a frame
    that does not begin with :data:`~trajstore.storages.frames._image_codec.JPEG_SOI` when ``header`` is
    given (format version 2), the stored bytes otherwise. ``where(i)``: frame ``i``'s place for messages.

    Raises:
        FormatError, FileNotFoundError: as :meth:`PayloadFiles.read_into`.
    """
    n = len(fid)
    hlen = 0 if header is None else len(header)
    # each frame gets exactly its own bytes (not n x the longest): one hostile length costs only itself
    sizes = hlen + np.maximum(length, 0).astype(np.int64)
    dest = np.cumsum(sizes) - sizes + hlen
    total = int(sizes.sum())
    buf = bytearray(total)
    flat = np.frombuffer(buf, np.uint8)
    if hlen and n:
        heads = (dest - hlen)[:, None] + np.arange(hlen, dtype=np.int64)
        flat[heads] = np.frombuffer(header, np.uint8)  # type: ignore[arg-type]
    view = memoryview(buf)
    files.read_into(fid, off, length, view, dest, where)
    start = dest
    if hlen and n:
        soi = np.frombuffer(codec.JPEG_SOI, np.uint8)
        first = flat[np.minimum(dest, total - 1)]
        second = flat[np.minimum(dest + 1, total - 1)]
        whole = (length >= 2) & (first == soi[0]) & (second == soi[1])
        start = np.where(whole, dest, dest - hlen)
    return [view[a:b] for a, b in zip(start.tolist(), (dest + length).tolist())]


def read_frames(files: PayloadFiles, rows: np.ndarray, out: np.ndarray, header: bytes | None, fmt: str,
                where: Callable[[int, int, int], str], dest: np.ndarray | None = None) -> None:
    """Decode the frames of index ``rows`` (int64 ``(M, 3)``: file id, offset, length; file id -1: never
    written, its row of ``out`` is left as it is) into ``out`` (``(N, *frame shape)``, C-contiguous): frame
    ``i`` into ``out[dest[i]]`` (``dest``: distinct rows, int ``(M,)``; default ``i``, and ``N == M``).
    ``where(i, file id, offset)``: index row ``i``'s place for messages.

    Raises:
        DamagedDataError: a frame lies in a missing or truncated file (``PayloadFiles.check_present``).
        FormatError: the index points past a file's end, or a frame does not decode to ``out``'s shape.
        FileNotFoundError: a file is gone (a writer deleted it: refresh the index and read again).
    """
    written = np.flatnonzero(rows[:, 0] >= 0)
    if len(written) == 0:
        return
    fid, off, length = rows[written].T

    def at(i: int) -> str:
        return where(int(written[i]), int(fid[i]), int(off[i]))

    files.check_present(fid, at, off + length)
    payloads = read_payloads(files, fid, off, length, header, at)
    codec.decode_batch(payloads, out, fmt, at, written if dest is None else dest[written])


def in_request_order(sel: Selection, shape: tuple[int, ...], dtype: np.dtype,
                     read_into: Callable[[np.ndarray, np.ndarray, np.ndarray], None]) -> np.ndarray:
    """The frames of ``sel`` in its requested order (``sel.order`` not None), ``(sel.size, *shape)``:
    ``read_into(slots, out, dest)`` decodes slot ``sel.slots[j]`` into ``out[dest[j]]``, the first row
    that asks for it (never-written slots: zeros); the repeats are then copied from those rows."""
    n = len(sel.order)  # type: ignore[arg-type]
    first = np.empty(len(sel.slots), dtype=np.int64)
    first[sel.order[::-1]] = np.arange(n - 1, -1, -1)  # type: ignore[index]
    out = np.zeros((n, *shape), dtype=dtype)
    read_into(sel.slots, out, first)
    src = first[sel.order]
    repeat = np.flatnonzero(src != np.arange(n))
    out[repeat] = out[src[repeat]]
    return out
