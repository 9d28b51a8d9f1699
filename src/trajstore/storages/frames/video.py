"""``VideoStorage``: RGB camera frames, ``(H, W, 3)`` uint8 (or ``(3, H, W)`` declared ``layout="CHW"``,
transposed to ``(H, W, 3)`` to be encoded and back when read), as H.264 video segments.

Folder layout::

    storage.json                type "video", space, capacity, config (fps, codec, crf, ...)
    index.log                   slot -> (segment id, frame number in the segment, 1),
                                see trajstore.storages.frames._slot_index
    segments/00000042.mp4       one closed segment: up to ``segment_frames`` frames
    segments/00000043.mp4.tmp   the segment a live writer is encoding (never read)

**Writing.** ``set``/``extend`` append frames to the *pending* segment: they are encoded
at once (so encoding keeps pace with recording) and also kept raw in memory. The segment
is closed -- the file finalised, fsynced and renamed into place, then one index record per
slot appended -- when it holds ``segment_frames`` frames, and on :meth:`flush`/``close``.
Writing a slot again appends a new frame (a re-encode of the new frame, never a rewrite
in place: ``supports_overwrite`` is False). A segment file is deleted once no slot points
into it, so a ring buffer's folder stays bounded at about ``capacity + 2 * segment_frames``
frames when slots are overwritten in ring order (scattered overwrites can keep segments
alive with few live frames: there is no re-encoding compaction).

**Reading.** Pending slots (written, not yet flushed) are served from the raw frames in
memory, exactly as written; other processes do not see them until the writer flushes.
Slots never written read as zeros. Flushed slots are read by
:mod:`~trajstore.storages.frames._video_reads`: repeats once, recently decoded frames from a
per-process cache (:data:`FRAME_CACHE_BYTES`), the rest segment by segment, each keyframe
interval once, on reused decoders (one per thread and process, never a parent's in a forked
DataLoader worker) fed from each segment's frame table (read once per segment and kept:
:data:`READER_CACHE_SIZE`); segments are spread over :data:`DECODE_THREADS` threads.

Writer memory: up to ``segment_frames * H * W * 3`` bytes of raw pending frames (128 frames
of 480x640 = 118 MB). PyAV is imported on first use only.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._lock import WriterLock
from trajstore.damage import DamagedFile
from trajstore.spaces import Space
from trajstore.storages.frames._frame_layout import CONFIG_KEY as LAYOUT_KEY, FrameLayout, recorded_layout
from trajstore.storages.frames._frame_space import check_rgb_frames
from trajstore.storages.frames import _video_codec as vcodec
from trajstore.storages._options import Option, int_in, one_of, positive_int, positive_number
from trajstore.storages._payload import PayloadSource
from trajstore.storages.frames._frame_cache import FrameCache
from trajstore.storages.frames._reader_cache import ReaderCache
from trajstore.storages.frames._video_reads import open_table, read_frames
from trajstore.storages.frames._payload_files import FileNaming, PayloadFiles, referenced_files
from trajstore.storages._selection import Selection
from trajstore.storages.frames._slot_index import SlotIndex
from trajstore.storages.base import STORAGE_TYPES, SpaceStorage

SEGMENT_DIR = "segments"
#: Frames per segment file when none is given (bounds the writer's raw pending memory).
DEFAULT_SEGMENT_FRAMES = 128
#: Segment frame tables kept per storage (a few KB each; least recently used dropped first).
READER_CACHE_SIZE = 1024
#: Bytes of decoded frames kept per storage and process (see ``_frame_cache``; 0: none).
FRAME_CACHE_BYTES = 32 * 2**20
#: Decoder threads per storage; segments of one read are spread over them.
DECODE_THREADS = min(4, os.cpu_count() or 1)


#: The segment files: ``segments/<id, 8 digits>.mp4`` (``.mp4.tmp`` while a writer encodes one).
SEGMENTS = FileNaming(SEGMENT_DIR, 8, ".mp4", scratch=vcodec.TMP_SUFFIX)


def segment_name(file_id: int) -> str:
    """``segments/<id, 8 digits>.mp4`` relative to the storage folder."""
    return SEGMENTS.name(file_id)


#: Frame rates a segment's time base can carry (Hz): PyAV needs a representable, non-zero frame time.
FPS_RANGE = (1e-3, 1e5)


def _frame_rate(value: Any) -> float | int:
    fps = positive_number(value)
    if not FPS_RANGE[0] <= fps <= FPS_RANGE[1]:
        raise ValueError(f"expected a frame rate in [{FPS_RANGE[0]:g}, {FPS_RANGE[1]:g}] Hz, got {value!r}")
    return fps


@STORAGE_TYPES.register("video")
class VideoStorage(SpaceStorage):
    """Frames of one ``BoxSpace((H, W, 3), uint8)`` leaf as H.264 video (lossy); a ``(3, H, W)`` leaf declared
    ``metadata["layout"] = "CHW"`` is encoded transposed and read back as ``(3, H, W)`` (``storage.json``
    records ``"layout": "CHW"``; none: channel last).

    Options of :meth:`create`:

    * ``fps``: frame rate in Hz (> 0, default 30); the router passes the leaf's ``fps`` metadata.
    * ``codec``: ``"libx264"`` (H.264, the only one offered; see ``_video_codec.CODECS``).
    * ``crf``: x264 quality 0..51 (default 20).
    * ``preset``: x264 speed preset (default ``"faster"``).
    * ``gop_size``: frames per keyframe interval (default 1: every frame a keyframe, so a random
      frame decodes one frame; folders written with another interval, main's 8 until now, keep it).
    * ``pix_fmt``: ``"yuv420p"`` (default; odd H or W are padded to even and cropped on read)
      or ``"yuv444p"``: better for flat-shaded simulator frames with saturated colour edges
      (moving boxes at 96x96, crf 20: min PSNR 42.1 vs 32.5 dB, 20% fewer bytes).
    * ``segment_frames``: frames per segment file (default 128).

    Where the defaults come from (smooth moving scenes of tests/storages/test_video.py, this
    2-CPU development machine, no B-frames): crf 20 with preset faster gives >= 36.8 dB PSNR per frame
    at 97x131 and 128x128 (tests hold 35 dB); preset faster was ~1.3 dB better than veryfast
    at equal bytes. The keyframe interval is for random access (benchmarks/video_vs_image.py,
    replay-buffer reads of 256 random steps at 96x96 and 128x128): decoding dominates a read,
    and at gop 1 a random step decodes one frame against ~4.5 at gop 8, for ~1.8x the bytes
    of gop 8 (still ~0.27x those of JPEG quality 90); gop 2 saves ~15% bytes for ~20% slower
    random reads.

    Raises (at create): ``ValueError`` for a bad option, ``TypeError`` for an unknown one,
    ``UnsupportedSpaceError`` for a space other than ``(H, W, 3)`` uint8 with layout ``"HWC"`` or none,
    or ``(3, H, W)`` uint8 with layout ``"CHW"``.
    """

    requires_cache_path = True
    supports_overwrite = False
    payload_files = (SEGMENTS.pattern,)
    takes_payload = True
    options = (
        Option("fps", 30, _frame_rate, "frame rate (Hz)", from_metadata=True),
        Option("codec", "libx264", one_of(*vcodec.CODECS), "encoder"),
        Option("crf", 20, int_in(0, 51), "x264 constant rate factor"),
        Option("preset", "faster", one_of(*vcodec.PRESETS), "x264 speed preset"),
        Option("gop_size", 1, positive_int, "frames per keyframe interval"),
        Option("pix_fmt", "yuv420p", one_of(*vcodec.PIX_FMTS), "chroma layout"),
        Option("segment_frames", DEFAULT_SEGMENT_FRAMES, positive_int, "frames per segment file"),
    )

    def __init__(self, space: Space, *, config: dict[str, Any], **kwargs: Any):
        super().__init__(space, **kwargs)
        self._config = config
        self._settings = vcodec.EncoderSettings(**{k: config[k] for k in ("codec", "crf", "preset", "gop_size",
                                                                         "pix_fmt")})
        self._fps = config["fps"]
        self._segment_frames = config["segment_frames"]
        self._layout = FrameLayout.of(space)  # "CHW": (3, H, W) frames, encoded as (H, W, 3)
        self._h, self._w = self._layout.stored_shape(space.shape)[:2]
        self._index: SlotIndex | None = None
        self._length = 0  # slots of an unbounded storage (capacity otherwise)
        # The pending segment (writer only).
        self._encoder: vcodec.SegmentEncoder | None = None
        self._pending_id = -1
        self._raw = np.zeros((0, self._h, self._w, 3), np.uint8)  # raw frames by frame number
        self._raw_slots = np.zeros(0, np.int64)  # slot of each pending frame
        self._count = 0  # frames in the pending segment
        self._pending_of = np.full(0, -1, np.int64)  # slot -> pending frame number, -1 if none
        # Reading (local disk until _open).
        self._files = PayloadFiles(self.cache_path, SEGMENTS, byte_extents=False)  # type: ignore[arg-type]
        self._readers = self._new_reader_cache()
        self._pool: ThreadPoolExecutor | None = None

    # -- what it takes -------------------------------------------------------------------------
    @classmethod
    def check_space(cls, space: Space) -> None:
        check_rgb_frames(space, "VideoStorage")

    @classmethod
    def _config_for_open(cls, path: Path, space: Space, stored: Any) -> Any:
        if isinstance(stored, dict):  # "layout" is not an option: what the space declared at create
            stored = dict(stored)
            recorded_layout(path, cls.__name__, space, stored.pop(LAYOUT_KEY, None))
        return super()._config_for_open(path, space, stored)

    # -- lifecycle -----------------------------------------------------------------------------
    @classmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, config: dict[str, Any],
                multiprocessing: bool, lock: WriterLock | None) -> "VideoStorage":
        assert path is not None  # requires_cache_path
        (path / SEGMENT_DIR).mkdir()
        storage = cls(space, config=config, capacity=capacity, cache_path=path, multiprocessing=multiprocessing,
                      lock=lock)
        storage._index = SlotIndex.create(path, n_slots=capacity or 0)
        storage._length = capacity or 0
        return storage

    @classmethod
    def referenced_payload(cls, path: Path) -> list[str]:
        """The segment files the index in ``path`` points to (``segments/00000003.mp4``, ...)."""
        return referenced_files(path, SEGMENTS)

    @classmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: dict[str, Any], read_only: bool,
              multiprocessing: bool, lock: WriterLock | None, payload: PayloadSource | None = None) -> "VideoStorage":
        storage = cls(space, config=config, capacity=capacity, cache_path=path, read_only=read_only,
                      multiprocessing=multiprocessing, lock=lock)
        storage._index = SlotIndex.open(path, n_slots=capacity or 0, read_only=read_only)
        storage._files = PayloadFiles.opened(path, SEGMENTS, storage._index, payload, writer=not read_only,
                                             byte_extents=False)  # the index holds frame numbers
        storage._length = storage._index.n_slots
        return storage

    def _new_reader_cache(self) -> ReaderCache:
        self._frame_cache = FrameCache(FRAME_CACHE_BYTES)  # decoded frames go with the tables they came from
        return ReaderCache(lambda file_id: open_table(self._files.whole(file_id), self._fps), READER_CACHE_SIZE)

    def _decode_pool(self) -> ThreadPoolExecutor | None:
        if self._pool is None and DECODE_THREADS > 1:
            self._pool = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix="trajstore-video")
        return self._pool

    def damaged_files(self) -> list[DamagedFile]:
        """The segment files that were missing (or empty) at open, with the slots whose frames they held."""
        return [] if self._index is None else self._files.damaged(self._index)

    @property
    def lossless(self) -> bool:
        return False  # x264 at crf > 0 and the YUV conversion both lose detail

    def unwritten(self, slots: np.ndarray) -> int:
        return 0 if self._index is None else self._index.unwritten(slots)

    def get_config(self) -> dict[str, Any]:
        return dict(self._config)

    def descriptor(self) -> dict[str, Any]:
        """``storage.json``: the options of :meth:`get_config`, and a channel-first layout (``"layout": "CHW"``,
        not an option)."""
        desc = super().descriptor()
        if self._layout.config_value() is not None:
            desc["config"][LAYOUT_KEY] = self._layout.config_value()
        return desc

    def __len__(self) -> int:
        return self.capacity if self.capacity is not None else self._length

    # -- writing -------------------------------------------------------------------------------
    def _resize(self, length: int) -> None:
        self._length = length

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        self._append(sel.slots, self._layout.to_stored(leaves[0]))

    def _append(self, slots: np.ndarray, frames: np.ndarray) -> None:
        """Add frames to the pending segment, closing it each time it is full."""
        i = 0
        while i < len(slots):
            if self._encoder is None:
                self._open_segment()
            k = min(len(slots) - i, self._segment_frames - self._count)
            try:
                self._encoder.encode(frames[i:i + k])  # type: ignore[union-attr]
            except BaseException:
                self._restart_segment()  # the encoder may hold part of the batch: rebuild it from raw frames
                raise
            start = self._count
            self._grow_raw(start + k)
            self._raw[start:start + k] = frames[i:i + k]
            self._raw_slots[start:start + k] = slots[i:i + k]
            self._grow_pending_of(int(slots[i:i + k].max()) + 1)
            self._pending_of[slots[i:i + k]] = np.arange(start, start + k)
            self._count += k
            i += k
            if self._count == self._segment_frames:
                self._close_segment()

    def _open_segment(self) -> None:
        """Start a new segment file, fed with the pending raw frames if any (after a failure)."""
        fid = self._index.new_file_id()  # type: ignore[union-attr]  # never reused
        encoder = vcodec.SegmentEncoder(self._files.path(fid), self._h, self._w, self._fps, self._settings)
        if self._count:
            try:
                encoder.encode(self._raw[: self._count])
            except BaseException:
                encoder.discard()
                raise
        self._encoder, self._pending_id = encoder, fid

    def _restart_segment(self) -> None:
        """Drop a failed encoder; the next write or flush re-encodes the pending raw frames."""
        if self._encoder is not None:
            try:
                self._encoder.discard()
            except Exception:  # noqa: BLE001 - it already failed once; the temp file goes either way
                self._encoder.tmp_path.unlink(missing_ok=True)
        self._encoder = None

    def _grow_raw(self, n: int) -> None:
        if n > len(self._raw):  # doubling, capped at one segment
            size = min(self._segment_frames, max(n, 2 * len(self._raw), 8))
            raw = np.empty((size, self._h, self._w, 3), np.uint8)
            raw[: self._count] = self._raw[: self._count]
            slots = np.empty(size, np.int64)
            slots[: self._count] = self._raw_slots[: self._count]
            self._raw, self._raw_slots = raw, slots

    def _grow_pending_of(self, n: int) -> None:
        if n > len(self._pending_of):
            grown = np.full(max(n, 2 * len(self._pending_of)), -1, np.int64)
            grown[: len(self._pending_of)] = self._pending_of
            self._pending_of = grown

    def _close_segment(self) -> None:
        """Finalise the pending segment (file durable in place), then point its slots at it."""
        if self._count == 0:
            return
        if self._encoder is None:  # an earlier encoder failed: re-encode the raw frames
            self._open_segment()
        try:
            self._encoder.close()  # type: ignore[union-attr]
        except BaseException:
            self._restart_segment()  # the raw frames stay pending; the next flush tries again
            raise
        self._encoder = None
        n = self._count
        slots = self._raw_slots[:n]
        emptied = self._index.update(slots, self._pending_id, np.arange(n), np.ones(n, np.int64))  # type: ignore
        self._pending_of[slots] = -1
        self._count = 0
        self._pending_id = -1
        if self._raw.nbytes > 64 * 2**20:
            self._raw = self._raw[:0]  # do not keep a big buffer alive between segments
        self._remove_dead(emptied)

    def _remove_dead(self, file_ids: np.ndarray) -> None:
        """Delete segments no slot points into; the index moving slots away is made durable first."""
        dead = [int(f) for f in file_ids if self._index.live_count(int(f)) == 0]  # type: ignore[union-attr]
        if not dead:
            return
        self._index.flush()  # type: ignore[union-attr]  # after a crash the index must not point into a deleted file
        for fid in dead:
            self._readers.drop(fid)
            self._frame_cache.drop_file(fid)
            self._files.remove(fid)

    # -- reading -------------------------------------------------------------------------------
    def _read(self, sel: Selection) -> list[np.ndarray]:
        slots = sel.slots
        out = np.zeros((len(slots), self._h, self._w, 3), np.uint8)
        rows = np.arange(len(slots))
        if self._count:  # written but not flushed: the raw frames, exactly as written
            inside = slots < len(self._pending_of)
            pending = np.full(len(slots), -1, np.int64)
            pending[inside] = self._pending_of[slots[inside]]
            hit = pending >= 0
            out[hit] = self._raw[pending[hit]]
            rows = np.flatnonzero(~hit)
        try:
            self._read_segments(slots[rows], out, rows)
        except FileNotFoundError:  # the writer deleted a segment this reader's index still points into
            self.refresh()
            self._read_segments(slots[rows], out, rows)
        return [self._layout.to_user(out)]

    def _read_segments(self, slots: np.ndarray, out: np.ndarray, rows: np.ndarray) -> None:
        index = self._index
        known = slots < index.n_slots  # type: ignore[union-attr]  # slots past the index: not on disk yet
        found = np.full((len(slots), 3), -1, np.int64)
        found[known] = index.lookup(slots[known])  # type: ignore[union-attr]
        written = np.flatnonzero(found[:, 0] >= 0)
        if len(written) == 0:
            return
        fid, frame = found[written, 0], found[written, 1]
        self._files.check_present(fid, lambda i: f"slot {int(slots[written[i]])}, frame {int(frame[i])}")
        read_frames(fid, frame, out, rows[written], tables=self._readers, local_file=self._files.whole,
                    cache=self._frame_cache, pool=self._decode_pool)

    # -- state ---------------------------------------------------------------------------------
    def flush(self) -> None:
        """Close the pending segment (encode its last frames, fsync, rename) and fsync the index."""
        if self.read_only or self._index is None:
            return
        self._close_segment()
        self._index.flush()

    def refresh(self) -> None:
        """Apply the segments the writer has flushed since; close readers of segments no slot uses."""
        if not self.read_only or self._index is None:
            return
        self._index.refresh()
        self._length = max(self._length, self._index.n_slots)
        if self._count and self._encoder is None:  # a forked child: from now on, what is on disk
            self._drop_pending()
        for fid in [f for f in self._readers.file_ids() if self._index.live_count(f) == 0]:
            self._readers.drop(fid)
            self._frame_cache.drop_file(fid)

    def _close(self) -> None:
        if os.getpid() != self._pid:  # a forked child that never used the storage: let go, finalise nothing
            self._encoder, self._pool = None, None  # (the encoder was abandoned at the fork)
        if self._encoder is not None:  # a writer's flush closed it; only a failure leaves one here
            self._encoder.discard()
            self._encoder = None
        self._readers.clear()
        self._frame_cache.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._index is not None:
            self._index.close()

    def _after_fork(self) -> None:
        # The parent's encoder and temp file stay the parent's: the fork hook of _video_codec
        # abandoned the encoder (never finalised or freed here).
        if self._encoder is not None:
            self._encoder.abandon()  # idempotent
            self._encoder = None
        # Pending frames stay readable (the parent's view at the fork, copy-on-write memory)
        # until the child's first refresh(), which switches it to what is on disk.
        # Segment tables and decoded frames start afresh (their locks may have been held by a parent
        # thread at the fork); the decoders are per process (_segment_reader.thread_decoder), and the
        # pool's threads do not exist in the child.
        self._readers = self._new_reader_cache()
        self._pool = None
        self._index.reopen_read_only()  # type: ignore[union-attr]

    def _drop_pending(self) -> None:
        self._count, self._pending_id = 0, -1
        self._raw = self._raw[:0]
        self._raw_slots = self._raw_slots[:0]
        self._pending_of = np.full(0, -1, np.int64)
