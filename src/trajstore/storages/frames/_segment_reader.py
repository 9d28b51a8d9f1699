"""Random access into the H.264 segments of a :class:`~trajstore.storages.frames.video.VideoStorage`.

Reading a frame takes two things, kept apart so that each is made once and reused:

- :class:`SegmentIndex`, one per segment file: where each frame's packet lies in the file
  (byte offset and size), which frames are keyframes, and the stream's codec setup (the
  ``avcC`` extradata). It comes from the MP4 sample tables, read once by ``av.open`` (about
  0.5 ms), and is immutable, so many threads and reads share it; the container is closed at
  once, and a read opens the file, ``pread``-s the packets it needs and closes it. Keyframes come from the file itself, not from the storage's ``gop_size``, so a folder
  written with any keyframe interval reads the same.
- :class:`Decoder`, one per thread and process: a bare libav H.264 decoder (one decoder
  thread) fed packets read with ``os.pread``, reused across every segment with the same
  extradata. It remembers which frame it decoded last, so the next wanted frame of the same
  keyframe interval continues from there instead of starting over at the keyframe.

:func:`decode_frames` decodes sorted frame numbers of one segment in one pass: each keyframe
interval needed is decoded once, from its keyframe (or from where the decoder stands, if that
is in the same interval and not past the frame), up to the last wanted frame in it.

Segments hold no B-frames (every writer of this format set ``bframes=0``): decode order is
presentation order and each packet gives its frame at once. A decoder that still holds frames
back (no frame for a packet) is drained; a file whose frames do not come out as its table says
raises ``FormatError``.

Fork safety: :func:`thread_decoders` keys the decoders by process id, so a forked child
(a DataLoader worker) makes its own and never feeds the parent's; the parent's single-threaded
decoders it inherited are left alone (never used, never freed from the child).
"""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._damage import damaged_file
from trajstore.errors import FormatError
from trajstore.storages.frames._video_codec import _av, _reformatter, fps_fraction

_TOKENS = itertools.count()


class SegmentIndex:
    """The frame table of one segment file (immutable; safe to share between threads).

    Attributes:
        path: the segment file.
        n_frames: frames the table lists (frame numbers ``0 .. n_frames - 1``).
        pos, size: int64 ``(n_frames,)``: byte offset and size of each frame's packet.
        key: int64 ``(n_frames,)``: the keyframe each frame's decoding starts from.
        extradata: the H.264 decoder configuration (``avcC``) the packets need.

    Raises (at :meth:`open`):
        FileNotFoundError: ``path`` does not exist (the writer may just have deleted it).
        FormatError: libav cannot open it, it holds no video, or its frame table is not the
            ``0, 1, 2, ...`` sequence at the segment's frame rate that every writer writes.
    """

    def __init__(self, path: Path, pos: np.ndarray, size: np.ndarray, key: np.ndarray, extradata: bytes):
        self.path, self.pos, self.size, self.key, self.extradata = path, pos, size, key, extradata
        self.n_frames = len(pos)
        self.token = next(_TOKENS)  # tells decoders which table they stand in

    @classmethod
    def open(cls, path: Path, fps: float) -> "SegmentIndex":
        av = _av()
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(path)
        with damaged_file(path, keep=(FileNotFoundError,)):
            with av.open(str(path), "r") as container:
                if not container.streams.video:
                    raise FormatError(f"{path} holds no video stream")
                stream = container.streams.video[0]
                ticks = 1 / (fps_fraction(fps) * stream.time_base)  # stream time units per frame
                entries = [(e.pos, e.size, e.is_keyframe, e.timestamp) for e in stream.index_entries]
                extradata = bytes(stream.codec_context.extradata or b"")
        table = np.array([e[:3] for e in entries], np.int64).reshape(-1, 3)
        numbers = np.rint(np.array([e[3] for e in entries], np.float64) / float(ticks)).astype(np.int64)
        if not np.array_equal(numbers, np.arange(len(entries))) or (len(table) and not table[0, 2]):
            raise FormatError(f"{path}: frame times are not 0, 1, 2, ... at {fps} Hz from a keyframe "
                              f"(got frames {numbers[:8].tolist()}...): not a segment of this storage")
        key = np.maximum.accumulate(np.where(table[:, 2] > 0, np.arange(len(table)), 0)) if len(table) else numbers
        return cls(path, table[:, 0].copy(), table[:, 1].copy(), key, extradata)

    def close(self) -> None:
        """Nothing to release (the caller opens the file per read); here for the index cache."""

    def packets(self, fd: int, first: int, last: int) -> list[memoryview]:
        """The packets of frames ``first .. last`` (inclusive) from the open file ``fd``, with one ``pread``.

        Raises:
            FormatError: the file is shorter than its table says.
        """
        lo = int(self.pos[first:last + 1].min())
        hi = int((self.pos[first:last + 1] + self.size[first:last + 1]).max())
        data = os.pread(fd, hi - lo, lo)
        if len(data) < hi - lo:
            raise FormatError(f"{self.path} is cut short: frame {last} ends at byte {hi}, the file at "
                              f"{lo + len(data)}")
        view = memoryview(data)
        return [view[p - lo:p - lo + s] for p, s in zip(self.pos[first:last + 1].tolist(),
                                                         self.size[first:last + 1].tolist())]


class Decoder:
    """One H.264 decoder (one libav thread) and the RGB converter of one thread.

    Not thread-safe. ``at`` is ``(SegmentIndex.token, last frame fed)``, or None after a flush.
    """

    def __init__(self, extradata: bytes):
        av = _av()
        self.ctx = av.CodecContext.create("h264", "r")
        if extradata:
            self.ctx.extradata = extradata
        # One thread: frame threads would hold frames back (a delay a random read pays in full),
        # and a decoder without worker threads is safe to leave behind in a forked child.
        self.ctx.thread_count = 1
        self.reformatter = _reformatter()
        self.at: tuple[int, int] | None = None

    def restart(self) -> None:
        self.ctx.flush_buffers()
        self.at = None


class _ThreadDecoders(threading.local):
    pid = -1
    by_extradata: dict[bytes, Decoder]


_LOCAL = _ThreadDecoders()


def thread_decoder(extradata: bytes) -> Decoder:
    """This thread's decoder for ``extradata``, made on first use (a new set after a fork)."""
    local = _LOCAL
    if local.pid != os.getpid():  # first use in this thread, or a forked child: never the parent's
        local.pid, local.by_extradata = os.getpid(), {}
    decoder = local.by_extradata.get(extradata)
    if decoder is None:
        if len(local.by_extradata) >= 8:  # segments of many differently set-up storages: keep a few
            local.by_extradata.pop(next(iter(local.by_extradata)))
        decoder = local.by_extradata[extradata] = Decoder(extradata)
    return decoder


def decode_frames(index: SegmentIndex, fd: int, numbers: np.ndarray, out: np.ndarray, rows: np.ndarray,
                  height: int, width: int) -> None:
    """Decode frames ``numbers`` (sorted, unique, int ``(M,)``) of one segment, open as ``fd``
    (the file of ``index``), into ``out[rows]``.

    ``out``: uint8 ``(N, height, width, 3)`` RGB; frames are cropped to ``height, width`` (4:2:0
    pads odd sizes). Runs on this thread's :class:`Decoder`.

    Raises:
        FormatError: a frame number past the segment's table, or a frame libav cannot decode
            (names the file and the frame). FileNotFoundError: the file was deleted.
    """
    numbers = np.asarray(numbers, np.int64)
    if len(numbers) and (numbers[-1] >= index.n_frames or numbers[0] < 0):
        bad = int(numbers[-1] if numbers[-1] >= index.n_frames else numbers[0])
        raise FormatError(f"{index.path} has no frame {bad}: the segment is cut short or damaged")
    decoder = thread_decoder(index.extradata)
    keys = index.key[numbers].tolist()
    wanted, rows_of = numbers.tolist(), rows.tolist()
    if not wanted:
        return
    # The packets of the whole span in one pread (one segment: at most a few MB).
    base = min(keys[0], decoder.at[1] + 1) if decoder.at and decoder.at[0] == index.token else keys[0]
    data = index.packets(fd, base, wanted[-1])
    # Runs of wanted frames in one keyframe interval: each is decoded in one go.
    a = 0
    try:
        for b in range(1, len(keys) + 1):
            if b == len(keys) or keys[b] != keys[a]:
                _decode_run(decoder, index, data, base, keys[a], wanted[a:b], out, rows_of[a:b], height, width)
                a = b
    except (FileNotFoundError, FormatError):
        raise
    except Exception as exc:  # libav's errors, named by file and frame
        decoder.at = None
        with damaged_file(index.path, f"frame {wanted[a]}"):
            raise exc


def _decode_run(decoder: Decoder, index: SegmentIndex, data: list[memoryview], base: int, key: int,
                wanted: list[int], out: np.ndarray, rows: list[int], height: int, width: int) -> None:
    """Frames ``wanted`` of the keyframe interval starting at ``key``; ``data[i]``: packet of frame ``base + i``."""
    av = _av()
    at = decoder.at
    if at is not None and at[0] == index.token and key <= at[1] < wanted[0]:
        first = at[1] + 1  # the decoder stands in this interval, before the first wanted frame
    else:
        if at is None:  # after a drain or an error; otherwise every frame fed has come out, and
            decoder.restart()  # a keyframe (IDR) starts afresh without a flush
        first = key
    last = wanted[-1]
    decoder.at = None  # until the run has gone through
    todo = dict(zip(wanted, rows))
    pending = []  # frames out of the decoder, in presentation order (no B-frames)
    for number in range(first, last + 1):
        packet = av.Packet(data[number - base])
        packet.pts = packet.dts = number
        pending.extend(decoder.ctx.decode(packet))
        while pending:
            _take(pending.pop(0), todo, out, decoder, height, width, index)
    if todo:  # a decoder holding frames back: drain it (then it must start over at a keyframe)
        for frame in decoder.ctx.decode(None):
            _take(frame, todo, out, decoder, height, width, index)
        decoder.restart()
        if todo:
            raise FormatError(f"{index.path}: frame {min(todo)} did not decode")
        return
    decoder.at = (index.token, last)


def _take(frame: Any, todo: dict[int, int], out: np.ndarray, decoder: Decoder, height: int, width: int,
          index: SegmentIndex) -> None:
    row = todo.pop(int(frame.pts), None)
    if row is None:
        return  # a frame before the wanted ones
    rgb = decoder.reformatter.reformat(frame, format="rgb24", threads=1)
    plane = rgb.planes[0]  # copied once, straight from libav's buffer (rows may be padded)
    pixels = np.frombuffer(plane, np.uint8, count=plane.line_size * plane.height).reshape(plane.height, -1)
    out[row] = pixels[:height, : width * 3].reshape(height, width, 3)
