"""The payload files of a frames storage: one layer for :class:`ImageStorage` and :class:`VideoStorage`.

Both storages keep a slot index (:mod:`~trajstore.storages.frames._slot_index`) that points each slot
at a frame inside a numbered *payload file*: an image chunk (``chunks/000042.bin``, frames back to back,
read by byte range) or a video segment (``segments/00000042.mp4``, decoded whole). This module is
what they share about those files:

* their names (:class:`FileNaming`: folder, digits, suffix), the glob a storage declares in
  ``SpaceStorage.payload_files``, and :func:`referenced_files`, the files a folder's index points to
  (what a publisher checks it has listed);
* where their bytes come from (:class:`PayloadFiles`): the storage's folder on local disk (one
  ``os.pread`` per run of back-to-back frames through a small LRU of open descriptors; a whole file by
  its path), or the :class:`~trajstore.storages._payload.PayloadSource` given at open (ranged reads,
  a local copy of a whole file): local disk when none is given, and that fast path does no more work;
* the checks and clean-ups at open: which files the index points to are missing or shorter than the
  index needs (their slots are damaged: :meth:`PayloadFiles.damaged`, and a read of them raises,
  :meth:`PayloadFiles.check_present`);
  a writer deletes files no slot points into, and scratch files of an interrupted write.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from trajstore.damage import DamagedDataError, DamagedFile
from trajstore.errors import FormatError
from trajstore.storages._payload import PayloadSource
from trajstore.storages.frames._slot_index import LOG_FILE, SlotIndex

#: Open read descriptors kept per storage (least recently used are closed first).
FD_CACHE_SIZE = 64
#: Frames of one file at most this many bytes apart are read with one call (:meth:`PayloadFiles.read_into`):
#: copying 16 KiB from the page cache costs about what one more system call does.
COALESCE_GAP = 16 * 2**10
#: Buffers one ``os.preadv`` takes at most (POSIX guarantees 16; Linux and macOS take 1024).
IOV_MAX = 16
if "SC_IOV_MAX" in getattr(os, "sysconf_names", {}):
    IOV_MAX = max(IOV_MAX, min(1024, os.sysconf("SC_IOV_MAX")))


@dataclass(frozen=True)
class FileNaming:
    """Payload file ``id`` is ``<directory>/<id, zero-padded to digits><suffix>`` in the storage folder.

    ``scratch``: the suffix a writer adds to a file it is still building (never read, deleted by the
    next writer's open), or ``None``.
    """

    directory: str
    digits: int
    suffix: str
    scratch: str | None = None

    def name(self, file_id: int) -> str:
        """``chunks/000042.bin``: relative to the storage folder, ``/``-separated."""
        return f"{self.directory}/{file_id:0{self.digits}d}{self.suffix}"

    @property
    def pattern(self) -> str:
        """The glob of these files relative to the storage folder (for ``SpaceStorage.payload_files``)."""
        return f"{self.directory}/*{self.suffix}"

    def file_id(self, filename: str) -> int | None:
        """The id in a file name of :attr:`directory` (``"000042.bin"`` -> 42), or ``None`` for another file."""
        stem = filename[: -len(self.suffix)] if filename.endswith(self.suffix) else ""
        return int(stem) if stem.isdigit() else None


def referenced_files(folder: Path, naming: FileNaming) -> list[str]:
    """Relative paths of the payload files that the index in ``folder`` points to (sorted by id).

    Raises:
        FormatError: the index is missing or damaged.
    """
    index = SlotIndex.open(folder, read_only=True)
    try:
        return [naming.name(int(f)) for f in index.live_files()]
    finally:
        index.close()


def file_extents(index: SlotIndex) -> dict[int, int]:
    """Each live file id with the end of its furthest slot extent (``max(offset + length)``, bytes for
    an image chunk; frames for a video segment), from the table in memory."""
    table = index.table
    rows = table[table[:, 0] >= 0]
    if not len(rows):
        return {}
    ends = rows[:, 1] + rows[:, 2]
    order = np.lexsort((ends, rows[:, 0]))
    fid, ends = rows[order, 0], ends[order]
    last = np.r_[np.flatnonzero(fid[1:] != fid[:-1]), len(fid) - 1]
    return dict(zip(fid[last].tolist(), ends[last].tolist()))


def damaged_live_files(index: SlotIndex, path_of: Callable[[int], Path],
                       size_of: Callable[[Path], int | None], *,
                       byte_extents: bool) -> dict[int, tuple[Path, str, int]]:
    """The live file ids whose file is missing or shorter than the index needs, with their paths, what
    is wrong (``"missing"``, ``"truncated: N bytes, index needs M"``) and the extent still readable
    (``N`` for a truncated image chunk: the frames that end by then read; else 0): one ``stat`` per live file,
    at open. ``size_of`` gives a file's size, ``None`` when it does not exist. ``byte_extents``: the
    index records byte ranges (image chunks) and a file must reach the furthest one; otherwise (video
    segments: frame numbers) a file holding frames must not be empty.

    A writer writes (and fsyncs) a file's bytes before the index records point into them, so a file
    is never legitimately shorter than its index; it may be longer (bytes appended, not yet indexed).
    A reader's index may name a file that a writer has just removed (its slots were overwritten
    since): the index is refreshed once before a damaged file counts.
    """
    def damaged() -> dict[int, tuple[Path, str, int]]:
        found = {}
        for fid, end in file_extents(index).items():
            path = path_of(fid)
            size = size_of(path)
            need = end if byte_extents else 1
            if size is None:
                found[fid] = (path, "missing", 0)
            elif size < need:
                found[fid] = (path, f"truncated: {size} bytes, index needs {need}", size if byte_extents else 0)
        return found

    found = damaged()
    if found and index.refresh():
        found = damaged()
    return found


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Index into ``ids`` of each of ``wanted`` (all of which are in ``ids``)."""
    order = np.argsort(ids)
    return order[np.searchsorted(ids[order], wanted)]


def _local_size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


class PayloadFiles:
    """The payload files of the storage folder ``folder``, named by ``naming``, read from local disk or
    from ``source`` (a :class:`~trajstore.storages._payload.PayloadSource` of ``folder``; ``None``: local)."""

    def __init__(self, folder: Path, naming: FileNaming, source: PayloadSource | None = None, *,
                 byte_extents: bool = True):
        self.folder, self.naming, self.source = folder, naming, source
        self.byte_extents = byte_extents  # the index records byte ranges (see damaged_live_files)
        #: Live file ids whose file was missing or truncated at open, with their paths, what is wrong
        #: and the extent still readable (see :func:`damaged_live_files`, :meth:`check_live`).
        self.missing: dict[int, tuple[Path, str, int]] = {}
        self._fds: OrderedDict[int, int] = OrderedDict()  # file id -> O_RDONLY fd (local only)

    def path(self, file_id: int) -> Path:
        """The local path of file ``file_id`` (where a writer creates it; where messages say it is)."""
        return self.folder / self.naming.name(file_id)

    # -- at open -------------------------------------------------------------------------------
    @classmethod
    def opened(cls, folder: Path, naming: FileNaming, index: SlotIndex, source: PayloadSource | None, *,
               writer: bool, byte_extents: bool = True) -> "PayloadFiles":
        """The files of a storage folder being opened: every file ``index`` points to is checked to
        exist and be as long as the index needs (:meth:`check_live`; the damaged ones are kept in
        :attr:`missing`), and a ``writer`` of a folder with none damaged deletes the orphans
        (:meth:`remove_orphans`). A writer's open of a folder with damaged files changes nothing: its
        owner refuses it.
        """
        files = cls(folder, naming, source, byte_extents=byte_extents)
        files.check_live(index)
        if writer and not files.missing:
            files.remove_orphans(set(index.live_files().tolist()))  # left by a crash or a failed write
        return files

    def check_live(self, index: SlotIndex) -> None:
        """Find the files ``index`` points to that do not exist or are shorter than it needs (locally, or
        in the source): :attr:`missing`."""
        if self.source is None:
            size_of: Callable[[Path], int | None] = _local_size
        else:
            source, folder = self.source, self.folder

            def size_of(p: Path) -> int | None:
                rel = p.relative_to(folder).as_posix()
                if not source.exists(rel):
                    return None
                return source.size(rel) if self.byte_extents else 1  # one request per file when it can tell
        self.missing = damaged_live_files(index, self.path, size_of, byte_extents=self.byte_extents)

    def damaged(self, index: SlotIndex) -> list[DamagedFile]:
        """The damaged (missing or truncated) files some slot of ``index`` still points to, with the slots
        that cannot be read (of a truncated chunk: those whose frame ends past its end)."""
        table = index.table
        out = []
        for fid, (path, problem, readable) in sorted(self.missing.items()):
            slots = np.flatnonzero((table[:, 0] == fid) & (table[:, 1] + table[:, 2] > readable)).astype(np.int64)
            if len(slots):
                out.append(DamagedFile(str(path), problem, slots))
        return out

    def check_present(self, fid: np.ndarray, where: Callable[[int], str], end: np.ndarray | None = None) -> None:
        """Refuse a read of frames in a missing file, or past the end of a truncated one (``fid``: the file
        id of each frame read; ``end``: where each ends, ``offset + length``, for byte extents;
        ``where(i)``: frame ``i``'s place for messages).

        Raises:
            DamagedDataError: (a ``FormatError``) ``<file>: payload file is missing (<where>): ...`` (or
                ``is truncated: N bytes, index needs M``).
        """
        if not self.missing:
            return
        ids = np.fromiter(self.missing, np.int64, len(self.missing))
        readable = np.fromiter((r for _, _, r in self.missing.values()), np.int64, len(self.missing))
        hit = np.isin(fid, ids)
        if end is not None and hit.any():
            hit[hit] = end[hit] > readable[_positions(ids, fid[hit])]
        gone = np.flatnonzero(hit)
        if len(gone):
            path, problem, _ = self.missing[int(fid[gone[0]])]
            state = "missing" if problem == "missing" else f"damaged ({problem})"
            raise DamagedDataError(f"{path}: payload file is {state} ({where(int(gone[0]))}): the steps whose "
                                   "frames it held cannot be read; the others can (ReplayBuffer.damaged lists them)")

    def remove_orphans(self, live: set[int]) -> None:
        """On a writer's open: delete files no slot points into (left by a crash or a failed write), and
        scratch files of an interrupted write."""
        scratch = self.naming.scratch
        for entry in os.scandir(self.folder / self.naming.directory):
            fid = self.naming.file_id(entry.name)
            if (fid is not None and fid not in live) or (scratch is not None and entry.name.endswith(scratch)):
                os.unlink(entry.path)

    # -- reading -------------------------------------------------------------------------------
    def read_runs(self, fid: np.ndarray, off: np.ndarray, length: np.ndarray, starts: np.ndarray,
                  stops: np.ndarray, where: Callable[[int], str]) -> list[memoryview]:
        """The bytes of each frame ``i`` (file ``fid[i]``, ``length[i]`` bytes at ``off[i]``), read as runs
        ``[starts[j], stops[j])`` of frames that lie back to back in one file: one ``os.pread`` per run
        locally, one ranged request per run (all at once) from a source. ``where(i)``: frame ``i``'s place
        for messages.

        Raises:
            FormatError: the index points past the end of a file (names it, and ``where``).
            FileNotFoundError: a local file is gone (a writer deleted it: refresh the index and read again).
        """
        payloads: list[memoryview] = []
        if self.source is not None:
            names = [self.naming.name(int(fid[a])) for a in starts.tolist()]
            blobs = self.source.read_ranges(names, off[starts].tolist(),
                                            (off[stops - 1] + length[stops - 1]).tolist())
            for a, b, data in zip(starts.tolist(), stops.tolist(), blobs):
                view = memoryview(data)
                rel = (off[a:b] - off[a]).tolist()
                payloads.extend(view[r:r + n] for r, n in zip(rel, length[a:b].tolist()))
            return payloads
        for a, b in zip(starts.tolist(), stops.tolist()):
            first, total = int(off[a]), int(off[b - 1] + length[b - 1] - off[a])
            fd = self._fd(int(fid[a]))
            if first + total > os.fstat(fd).st_size:  # before pread allocates `total` bytes read from the index
                raise FormatError(f"{where(a)}: {LOG_FILE} points {total} bytes past offset {first}, beyond the "
                                  "end of the file: the file is truncated or the index damaged")
            data = memoryview(os.pread(fd, total, first))
            if len(data) != total:
                raise FormatError(f"{self.path(int(fid[a]))} is truncated: needed {total} bytes at offset {first}, "
                                  f"got {len(data)}")
            rel = (off[a:b] - first).tolist()
            payloads.extend(data[r:r + n] for r, n in zip(rel, length[a:b].tolist()))
        return payloads

    def read_into(self, fid: np.ndarray, off: np.ndarray, length: np.ndarray, buf: memoryview, dest: np.ndarray,
                  where: Callable[[int], str]) -> None:
        """Read each frame ``i`` (file ``fid[i]``, ``length[i]`` bytes at ``off[i]``; any order, frames of
        several files mixed) into ``buf[dest[i]:dest[i] + length[i]]`` (``buf``: a writable byte
        buffer; the destinations must not overlap). Locally the frames are read sorted by file and
        offset, frames at most :data:`COALESCE_GAP` bytes apart in one ``os.preadv`` (the bytes
        between them, dead or not asked for, go to a scratch buffer), one ``fstat`` per file; from a
        source, one ranged request per frame run, copied in. ``where(i)``: frame ``i``'s place for messages.

        Raises:
            FormatError: the index points past the end of a file (names it, and ``where``).
            FileNotFoundError: a local file is gone (a writer deleted it: refresh the index and read again).
        """
        n = len(fid)
        if n == 0:
            return
        if self.source is not None or not hasattr(os, "preadv"):
            order = np.lexsort((off, fid))
            f, o, ln = fid[order], off[order], length[order]
            cut = np.flatnonzero((f[1:] != f[:-1]) | (o[1:] != o[:-1] + ln[:-1])) + 1
            views = self.read_runs(f, o, ln, np.r_[0, cut], np.r_[cut, n], lambda i: where(int(order[i])))
            for i, view in zip(order.tolist(), views):
                buf[int(dest[i]):int(dest[i]) + len(view)] = view
            return
        order = np.lexsort((off, fid))
        f, o, ln, d = fid[order], off[order], length[order], dest[order]
        end = o + ln
        # a new read where the file changes, the next frame starts before this one ends or too far after
        gap = np.r_[0, o[1:] - end[:-1]]
        new = np.r_[True, (f[1:] != f[:-1]) | (gap[1:] < 0) | (gap[1:] > COALESCE_GAP)]
        file_first = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
        file_last = np.r_[file_first[1:], n] - 1
        for a, b in zip(file_first.tolist(), file_last.tolist()):  # one fstat per file
            fd = self._fd(int(f[a]))
            far = int(np.argmax(end[a:b + 1])) + a
            if int(end[far]) > os.fstat(fd).st_size:  # before reading what the index claims
                raise FormatError(f"{where(int(order[far]))}: {LOG_FILE} points {int(ln[far])} bytes past offset "
                                  f"{int(o[far])}, beyond the end of the file: the file is truncated or the index damaged")
        scratch = memoryview(bytearray(int(gap[~new].max(initial=0))))
        starts = np.flatnonzero(new).tolist()
        stops = starts[1:] + [n]
        o_l, ln_l, d_l, g_l, f_l = o.tolist(), ln.tolist(), d.tolist(), gap.tolist(), f.tolist()
        for a, b in zip(starts, stops):
            fd = self._fd(f_l[a])
            while a < b:  # at most IOV_MAX buffers per call
                c = min(b, a + IOV_MAX // 2)
                iov = [buf[d_l[a]:d_l[a] + ln_l[a]]]
                for i in range(a + 1, c):
                    if g_l[i]:
                        iov.append(scratch[:g_l[i]])
                    iov.append(buf[d_l[i]:d_l[i] + ln_l[i]])
                want = o_l[c - 1] + ln_l[c - 1] - o_l[a]
                got = os.preadv(fd, iov, o_l[a])
                if got != want:
                    raise FormatError(f"{self.path(f_l[a])} is truncated: needed {want} bytes at offset {o_l[a]}, "
                                      f"got {got}")
                a = c

    def whole(self, file_id: int) -> Path:
        """A local file holding all of file ``file_id``: its path, or the source's local copy."""
        if self.source is None:
            return self.path(file_id)
        return self.source.local_copy(self.naming.name(file_id))

    def _fd(self, file_id: int) -> int:
        fd = self._fds.get(file_id)
        if fd is not None:
            self._fds.move_to_end(file_id)
            return fd
        fd = os.open(self.path(file_id), os.O_RDONLY)
        self._fds[file_id] = fd
        if len(self._fds) > FD_CACHE_SIZE:
            os.close(self._fds.popitem(last=False)[1])
        return fd

    def forget(self, file_id: int) -> None:
        """Close the read descriptor of ``file_id`` if one is open (a deleted file's space is freed then)."""
        fd = self._fds.pop(file_id, None)
        if fd is not None:
            os.close(fd)

    def open_ids(self) -> list[int]:
        """Ids of the files with an open read descriptor."""
        return list(self._fds)

    # -- writing -------------------------------------------------------------------------------
    def remove(self, file_id: int) -> None:
        """Delete file ``file_id`` (a writer's: no slot points into it any more); gone already is fine."""
        self.forget(file_id)
        self.path(file_id).unlink(missing_ok=True)

    def close(self) -> None:
        """Close every read descriptor (also in a forked child: its copies, not the parent's)."""
        for fid in list(self._fds):
            self.forget(fid)
