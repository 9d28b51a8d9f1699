"""``ImageStorage``: camera frames as JPEG or PNG in chunk files.

RGB frames ``(H, W, 3)`` uint8 as JPEG or PNG; single-channel frames (depth, grayscale)
``(H, W)`` or ``(H, W, 1)``, uint8 or uint16, as PNG (8- or 16-bit grayscale, lossless). Channel-first
leaves (``(3, H, W)`` / ``(1, H, W)`` declared ``layout="CHW"``) are encoded as those, transposed.

Folder layout::

    storage.json          type "image", format_version, space, capacity, config {"format", "chunk_bytes",
                          and for JPEG "quality", "subsampling", "jpeg_header"}
    index.log             slot -> (chunk id, offset, length), see trajstore.storages.frames._slot_index
    chunks/000000.bin     encoded frames back to back, append-only
    chunks/000001.bin     ...

JPEG frames share their header (markers, quantisation and Huffman tables, frame size: everything
up to the start-of-scan segment, ``_image_codec.jpeg_header``): format version 2 keeps it once, hex
in the config's ``"jpeg_header"``, and a frame that begins with it is stored without it (an
*abbreviated* JPEG stream in the sense of ITU T.81, B.4), which saves ~600 bytes a frame (~30% of a
128x128 frame at quality 75). A stored frame that begins with the start-of-image marker is a whole
JPEG; any other is the shared header's continuation (entropy-coded data never holds that marker).
Folders of format version 1 (no ``"jpeg_header"``) hold whole frames, and a writer keeps them so.
The decoded frames are the same either way.

A write of ``N`` frames encodes them on the codec thread pool, appends the concatenated
bytes to the active chunk with one ``os.write`` (two if it crosses a chunk boundary) and
logs ``N`` index records with one more. The active chunk rotates once it would exceed
``chunk_bytes``. Overwritten frames stay in their chunk as dead bytes; a chunk is deleted
once no slot points into it (and it is not the active one), so a ring buffer's folder stays
bounded at about ``capacity * frame bytes + 2 * chunk_bytes`` plus the index.

A read looks slots up in the index, reads the frames sorted by chunk and offset, nearby ones
with one ``os.preadv`` through a small LRU of open descriptors (no ``open`` per frame), into one
buffer that already holds the shared header in front of each frame (``_image_reads``), and decodes
straight into the output array (on the pool when that pays). Slots never written read as zeros.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from trajstore._damage import damaged_file
from trajstore._fs import fsync_dir
from trajstore._lock import WriterLock
from trajstore.damage import DamagedFile
from trajstore.errors import FormatError, UnsupportedSpaceError
from trajstore.spaces import Space
from trajstore.storages.frames import _image_codec as codec
from trajstore.storages._options import Option, optional, positive_int
from trajstore.storages._payload import PayloadSource
from trajstore.storages.frames._image_reads import in_request_order, read_frames
from trajstore.storages.frames._frame_layout import CONFIG_KEY as LAYOUT_KEY, FrameLayout, recorded_layout
from trajstore.storages.frames._frame_space import RGB, check_camera_frames, rgb_refusal, stored_frame_shape
from trajstore.storages._selection import Selection
from trajstore.storages.frames._payload_files import FileNaming, PayloadFiles, referenced_files
from trajstore.storages.frames._slot_index import LOG_FILE, SlotIndex
from trajstore.storages.frames._slot_records import write_all
from trajstore.storages.base import STORAGE_TYPES, SpaceStorage

CHUNK_DIR = "chunks"
#: Target size of one chunk file when none is given: 64 MiB (bytes).
DEFAULT_CHUNK_BYTES = 64 * 2**20
#: The chunk files: ``chunks/<id, 6 digits>.bin``.
CHUNKS = FileNaming(CHUNK_DIR, 6, ".bin")


def _stored_header(path: Path, value: Any) -> bytes:
    """The ``"jpeg_header"`` of a stored config (hex) as bytes.

    Raises:
        FormatError: not the hex of a JPEG header (see :func:`~trajstore.storages.frames._image_codec.jpeg_header`).
    """
    try:
        header = bytes.fromhex(value)
        if codec.jpeg_header(header) != header:
            raise ValueError("bytes after the start-of-scan segment")
    except (TypeError, ValueError) as exc:
        raise FormatError(f"{path}: bad ImageStorage config in storage.json: jpeg_header is not a JPEG header "
                          f"({exc})") from None
    return header


def chunk_name(file_id: int) -> str:
    """``chunks/<id, 6 digits>.bin`` relative to the storage folder."""
    return CHUNKS.name(file_id)


#: Chroma subsampling of a JPEG folder whose config has no "subsampling" (written before the
#: option existed, when every JPEG frame was encoded 4:4:4).
UNRECORDED_SUBSAMPLING = "444"
#: libjpeg(-turbo) encodes images of at most 65500 x 65500 pixels (JPEG_MAX_DIMENSION in jmorecfg.h).
JPEG_MAX_SIDE = 65500


@STORAGE_TYPES.register("image")
class ImageStorage(SpaceStorage):
    """Frames of one camera leaf, encoded as JPEG (lossy) or PNG (lossless).

    The leaf is a ``BoxSpace`` ``(H, W, 3)`` uint8 (RGB; JPEG or PNG), or, with ``format="PNG"``,
    ``(H, W)`` / ``(H, W, 1)`` uint8 or uint16 (a grayscale or depth camera; 8- or 16-bit PNG, read
    back exactly). A leaf declared ``metadata["layout"] = "CHW"`` (any case) is channel first:
    ``(3, H, W)``, or ``(1, H, W)`` with PNG; its frames are transposed to ``(H, W, C)`` to be encoded
    and back to ``(C, H, W)`` when read (PNG: exactly what was written), and ``storage.json`` records
    ``"layout": "CHW"`` (no ``"layout"``: channel last). Other declared layouts are refused.

    Options of :meth:`create`:

    * ``format``: ``"JPEG"`` (default) or ``"PNG"``, case-insensitive.
    * ``quality``: JPEG quality 1..100 (default 90); not accepted with PNG.
    * ``subsampling``: JPEG chroma subsampling, ``"444"`` (colour at full resolution, the
      default), ``"422"`` (halved horizontally) or ``"420"`` (halved both ways: one colour per
      2x2 pixels); not accepted with PNG. A folder written before this option existed
      reopens as ``"444"``, which is how its frames were encoded.
    * ``chunk_bytes``: target size of one chunk file in bytes (default 64 MiB).

    Both JPEG defaults were chosen with ``benchmarks/jpeg_settings.py``; the figures are in
    :data:`~trajstore.storages.frames._image_codec.JPEG_QUALITY` and ``JPEG_SUBSAMPLING``.

    A JPEG round trip is not exact: at the defaults the mean absolute error is about 1 level
    on smooth frames (tests hold it to <= 2), and PushT frames read back at >= 40.9 dB PSNR (the
    worst of 3000 frames of ``make demo``). PNG is exact.

    Raises (at create, before any folder is made): ``ValueError`` for a bad option,
    ``UnsupportedSpaceError`` for a space that is neither of the above, or a single-channel space
    with ``format="JPEG"`` (the default).
    """

    requires_cache_path = True
    payload_files = (CHUNKS.pattern,)
    takes_payload = True
    #: 2: JPEG frames may be stored without their shared header (see the module docstring).
    format_version = 2
    options = (
        Option("format", "JPEG", codec.normalize_format, "'JPEG' or 'PNG' (case-insensitive)"),
        Option("quality", None, optional(codec.check_quality), f"JPEG quality 1..100 (default {codec.JPEG_QUALITY})"),
        Option("subsampling", None, optional(codec.check_subsampling),
               f"JPEG chroma subsampling '444', '422' or '420' (default {codec.JPEG_SUBSAMPLING!r})"),
        Option("chunk_bytes", DEFAULT_CHUNK_BYTES, positive_int, "target size of one chunk file (bytes)"),
    )

    def __init__(self, space: Space, *, config: dict[str, Any], **kwargs: Any):
        super().__init__(space, **kwargs)
        self._format = config["format"]
        self._quality = config.get("quality", codec.JPEG_QUALITY)
        self._subsampling = config.get("subsampling", codec.JPEG_SUBSAMPLING)
        self._chunk_bytes = config["chunk_bytes"]
        self._layout = FrameLayout.of(space)  # "CHW": (C, H, W) frames, encoded as (H, W, C)
        self._frame_shape = self._layout.stored_shape(space.shape)  # as encoded: (H, W, 3), (H, W) or (H, W, 1)
        self._dtype = np.dtype(space.dtype)  # uint8, or uint16 (PNG only)
        self._index: SlotIndex | None = None
        self._length = 0  # slots of an unbounded storage (capacity otherwise)
        self._files = PayloadFiles(self.cache_path, CHUNKS)  # type: ignore[arg-type]  # local disk until _open
        self._active_id = -1  # chunk being appended to (writer only)
        self._active_fd = -1
        self._active_size = 0
        self._dir_dirty = False  # a chunk file was created since the last fsync of chunks/
        #: The JPEG header frames are stored without (format version 2), or None: whole frames.
        self._header: bytes | None = config.get("jpeg_header")
        self.format_version = 2 if self._header is not None else 1  # type: ignore[misc]

    # -- what it takes -------------------------------------------------------------------------
    @classmethod
    def check_space(cls, space: Space) -> None:
        check_camera_frames(space, "ImageStorage")

    @classmethod
    def _check_config(cls, space: Space, config: dict[str, Any]) -> dict[str, Any]:
        """Cross checks: JPEG-only options with PNG, JPEG's size limit, and JPEG and single-channel frames.

        Raises:
            ValueError: a JPEG option with PNG, or a side longer than :data:`JPEG_MAX_SIDE` with JPEG.
            UnsupportedSpaceError: a single-channel space with JPEG (``accepts(space, {"format": "PNG"})``
                holds where ``accepts(space)`` does not).
        """
        jpeg_only = {"quality": codec.JPEG_QUALITY, "subsampling": codec.JPEG_SUBSAMPLING}  # option -> default
        if config["format"] == "PNG":
            for name in jpeg_only:
                if config[name] is not None:
                    raise ValueError(f"ImageStorage option {name} applies to JPEG only; PNG frames are lossless")
            return {"format": "PNG", "chunk_bytes": config["chunk_bytes"]}
        config = {"format": "JPEG", "chunk_bytes": config["chunk_bytes"],
                  **{name: default if config[name] is None else config[name] for name, default in jpeg_only.items()}}
        given = rgb_refusal(space)
        if given is not None:
            raise UnsupportedSpaceError(f"ImageStorage stores JPEG frames as RGB: expected {RGB}; got {given} in "
                                        f"{space!r}; single-channel (depth, grayscale) frames need format='PNG'")
        height_width = stored_frame_shape(space)[:2]  # type: ignore[arg-type,index]
        if max(height_width) > JPEG_MAX_SIDE:
            raise ValueError(f"JPEG frames are at most {JPEG_MAX_SIDE} pixels a side (libjpeg's limit); got "
                             f"{height_width}: use format='PNG'")
        return config

    @classmethod
    def _config_for_open(cls, path: Path, space: Space, stored: Any) -> Any:
        if isinstance(stored, dict):  # "layout" is not an option: what the space declared at create
            stored = dict(stored)
            recorded_layout(path, cls.__name__, space, stored.pop(LAYOUT_KEY, None))
        header = None
        if isinstance(stored, dict) and "jpeg_header" in stored:  # not an option: written at create
            stored = dict(stored)
            header = _stored_header(path, stored.pop("jpeg_header"))
        if isinstance(stored, dict) and stored.get("format") == "JPEG" and "subsampling" not in stored:
            stored = {**stored, "subsampling": UNRECORDED_SUBSAMPLING}  # not today's default: how it was written
        config = super()._config_for_open(path, space, stored)
        if header is not None:
            if config["format"] != "JPEG":
                raise FormatError(f"{path}: bad ImageStorage config in storage.json: a jpeg_header with PNG frames")
            config["jpeg_header"] = header
        return config

    # -- lifecycle -----------------------------------------------------------------------------
    @classmethod
    def _create(cls, space: Space, *, capacity: int | None, path: Path | None, config: dict[str, Any],
                multiprocessing: bool, lock: WriterLock | None) -> "ImageStorage":
        assert path is not None  # requires_cache_path
        (path / CHUNK_DIR).mkdir()
        shape = stored_frame_shape(space)  # type: ignore[arg-type]
        if config["format"] == "JPEG" and len(shape) == 3:  # type: ignore[arg-type]
            blank = np.zeros(shape, np.uint8)  # type: ignore[arg-type]
            config = {**config, "jpeg_header": codec.jpeg_header(
                codec.encode(blank, "JPEG", config["quality"], config["subsampling"]))}
        storage = cls(space, config=config, capacity=capacity, cache_path=path, multiprocessing=multiprocessing,
                      lock=lock)
        storage._index = SlotIndex.create(path, n_slots=capacity or 0, before_compact=storage._sync_chunks)
        return storage

    @classmethod
    def referenced_payload(cls, path: Path) -> list[str]:
        """The chunk files the index in ``path`` points to (``chunks/000003.bin``, ...)."""
        return referenced_files(path, CHUNKS)

    @classmethod
    def _open(cls, path: Path, space: Space, *, capacity: int | None, config: dict[str, Any], read_only: bool,
              multiprocessing: bool, lock: WriterLock | None, payload: PayloadSource | None = None) -> "ImageStorage":
        storage = cls(space, config=config, capacity=capacity, cache_path=path, read_only=read_only,
                      multiprocessing=multiprocessing, lock=lock)
        storage._index = SlotIndex.open(path, n_slots=capacity or 0, read_only=read_only,
                                        before_compact=storage._sync_chunks)
        storage._files = PayloadFiles.opened(path, CHUNKS, storage._index, payload, writer=not read_only)
        storage._length = storage._index.n_slots
        return storage

    @property
    def lossless(self) -> bool:
        return self._format == "PNG"

    def damaged_files(self) -> list[DamagedFile]:
        """The chunk files that were missing or shorter than the index needs at open, with the slots whose
        frames they held."""
        return [] if self._index is None else self._files.damaged(self._index)

    def unwritten(self, slots: np.ndarray) -> int:
        return 0 if self._index is None else self._index.unwritten(slots)

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"format": self._format, "chunk_bytes": self._chunk_bytes}
        if self._format == "JPEG":
            config["quality"] = self._quality
            config["subsampling"] = self._subsampling
        return config

    def descriptor(self) -> dict[str, Any]:
        """``storage.json``: the options of :meth:`get_config`, the shared JPEG header and a channel-first
        layout (``"layout": "CHW"``; neither is an option)."""
        desc = super().descriptor()
        if self._layout.config_value() is not None:
            desc["config"][LAYOUT_KEY] = self._layout.config_value()
        if self._header is not None:
            desc["config"]["jpeg_header"] = self._header.hex()
        return desc

    def __len__(self) -> int:
        return self.capacity if self.capacity is not None else self._length

    # -- writing -------------------------------------------------------------------------------
    def _resize(self, length: int) -> None:
        self._length = length  # the index grows when the new slots are written

    def _write(self, sel: Selection, leaves: list[np.ndarray]) -> None:
        payloads: list[Any] = codec.encode_batch(self._layout.to_stored(leaves[0]), self._format, self._quality, self._subsampling)
        header = self._header
        if header is not None:  # kept once in storage.json; a frame with another header is stored whole
            cut = len(header)
            payloads = [memoryview(p)[cut:] if p.startswith(header) else p for p in payloads]
        lengths = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=len(payloads))
        file_ids, offsets, retired = self._append(payloads, lengths)
        emptied = self._index.update(sel.slots, file_ids, offsets, lengths)  # type: ignore[union-attr]
        self._remove_dead(sorted({*emptied.tolist(), *retired}))

    def _append(self, payloads: list[bytes], lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Append payloads to chunk files; returns each one's (chunk id, offset) and the chunks rotated out."""
        n = len(payloads)
        file_ids = np.empty(n, dtype=np.int64)
        offsets = np.empty(n, dtype=np.int64)
        retired: list[int] = []
        i = 0
        while i < n:
            if self._active_fd < 0:
                self._rotate(retired)
            ends = np.cumsum(lengths[i:])
            k = int(np.searchsorted(ends, self._chunk_bytes - self._active_size, side="right"))
            if k == 0 and self._active_size > 0:  # the next frame does not fit: start a new chunk
                self._rotate(retired)
                continue
            k = max(k, 1)  # a frame larger than chunk_bytes gets a chunk of its own
            try:
                write_all(self._active_fd, b"".join(payloads[i:i + k]))
            except BaseException:
                os.ftruncate(self._active_fd, self._active_size)  # no half-written frames
                raise
            file_ids[i:i + k] = self._active_id
            offsets[i:i + k] = self._active_size + np.r_[0, ends[:k - 1]]
            self._active_size += int(ends[k - 1])
            i += k
        return file_ids, offsets, retired

    def _rotate(self, retired: list[int]) -> None:
        """Close the active chunk (fsynced: its frames may be indexed) and open a new one."""
        if self._active_fd >= 0:
            os.fsync(self._active_fd)
            os.close(self._active_fd)
            retired.append(self._active_id)
            self._active_fd = -1
        fid = self._index.new_file_id()  # type: ignore[union-attr]  # never reused, even after deletes
        self._active_fd = os.open(self._files.path(fid), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._active_id, self._active_size = fid, 0
        self._dir_dirty = True

    def _remove_dead(self, candidates: list[int]) -> None:
        """Delete chunks no slot points into; the index moving slots away is made durable first."""
        dead = [int(f) for f in candidates if f != self._active_id and self._index.live_count(int(f)) == 0]
        if not dead:
            return
        self.flush()  # after a crash the index on disk must not point into a deleted chunk
        for fid in dead:
            self._files.remove(fid)
        self._dir_dirty = True

    # -- reading -------------------------------------------------------------------------------
    def _read(self, sel: Selection) -> list[np.ndarray]:
        out = np.zeros((len(sel.slots), *self._frame_shape), dtype=self._dtype)
        self._read_into(sel.slots, out)
        return [self._layout.to_user(out)]

    def read_leaves_in_order(self, sel: Selection, which: Sequence[int] | None = None) -> list[np.ndarray]:
        """``[frames (sel.size, *frame shape)]`` (``which``: None or ``[0]``): :meth:`read_leaves` then ``[sel.order]``
        without that copy: each frame decoded into its first requested row (``_image_reads.in_request_order``)."""
        if sel.order is None or (which is not None and not len(which)):
            return self.read_leaves(sel, which)
        self._check_open()
        with damaged_file(self.cache_path, "reading ImageStorage slots"):  # type: ignore[arg-type]
            return [self._layout.to_user(in_request_order(sel, self._frame_shape, self._dtype, self._read_into))]

    read_in_order = read_leaves_in_order  # its earlier name (one argument)

    def _read_into(self, slots: np.ndarray, out: np.ndarray, dest: np.ndarray | None = None) -> None:
        for attempt in (0, 1):
            try:
                read_frames(self._files, self._index.lookup(slots), out, self._header,  # type: ignore[union-attr]
                            self._format, lambda i, fid, off: self._where(slots[i], fid, off), dest)
                return
            except FileNotFoundError:  # the writer deleted a chunk this reader's index still points into
                if attempt:
                    raise
                self.refresh()

    def _where(self, slot: Any, file_id: int, offset: int) -> str:
        """Where the frame of ``slot`` is, for error messages: its chunk file, offset, and the index."""
        return (f"{self.cache_path / chunk_name(file_id)} at offset {offset} (slot {int(slot)} in "  # type: ignore
                f"{LOG_FILE})")

    # -- state ---------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync the active chunk, then the folder entries of new chunks, then the index (data first)."""
        if self.read_only or self._index is None:
            return
        self._sync_chunks()
        self._index.flush()

    def _sync_chunks(self) -> None:
        """fsync the active chunk and new folder entries (rotated-out chunks were fsynced at rotation)."""
        if self._active_fd >= 0:
            os.fsync(self._active_fd)
        if self._dir_dirty:
            fsync_dir(self.cache_path / CHUNK_DIR)  # type: ignore[operator]
            self._dir_dirty = False

    def refresh(self) -> None:
        """Apply the index records the writer appended; drop descriptors of chunks no slot uses."""
        if not self.read_only or self._index is None:
            return
        self._index.refresh()
        self._length = self._index.n_slots
        for fid in [f for f in self._files.open_ids() if self._index.live_count(f) == 0]:
            self._files.forget(fid)  # a deleted chunk's disk space is freed once its last fd closes

    def _close(self) -> None:
        self._files.close()
        if self._active_fd >= 0:
            os.close(self._active_fd)
            self._active_fd = -1
        if self._index is not None:
            self._index.close()

    def _after_fork(self) -> None:
        # The child has its own copies of the parent's fds: closing them leaves the parent's open.
        self._files.close()
        if self._active_fd >= 0:
            os.close(self._active_fd)
            self._active_fd = -1
        self._index.reopen_read_only()  # type: ignore[union-attr]
