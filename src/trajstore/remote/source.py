"""``RemotePayload``: payload bytes of a published buffer, read from its bucket.

It is the :class:`~trajstore.storages._payload.PayloadSource` of a mirror folder
(:mod:`~trajstore.remote.mirror`):

* image frames: :meth:`read_ranges` turns each run of back-to-back frames into one ranged GET of
  its chunk object (``bytes=start-stop``), merges runs of one chunk that lie within
  :data:`MERGE_GAP` (256 KiB) of each other (up to :data:`MAX_MERGED`, 8 MiB), and sends them all at
  once through fsspec's ``cat_ranges`` (concurrent on async file systems such as s3fs). So a batch
  of ``B`` random frames costs at most ``B`` GETs whatever the chunk size, and one random frame is
  one GET of its own bytes, never of its whole chunk.
* video segments: :meth:`local_copy` fetches a whole segment (one GET) into a per-process cache
  folder, least recently used evicted first beyond ``cache_bytes`` (default
  :data:`SEGMENT_CACHE_BYTES`); a decoder that still has an evicted file open keeps reading it.

After a fork the fsspec client is made anew (async clients must not cross a fork), and the child
gets its own cache folder.
"""

from __future__ import annotations

import hashlib
import multiprocessing.util
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

from trajstore.errors import FormatError
from trajstore.remote.location import filesystem, store_errors
from trajstore.remote.manifest import Manifest

#: Runs of one chunk closer than this (bytes) are fetched by one GET: reading a gap costs less than a
#: request. benchmarks/remote_read.py (3000 96x96 JPEG frames, 1 MiB chunks, moto on loopback): a batch of
#: 256 random steps took 225 GETs and 2.5 s with no merging, 38 GETs and 450 ms at 64 KiB, 9 GETs and
#: 180 ms at 256 KiB, 9 GETs and 160 ms at 1 MiB (reading 4x more gap bytes).
MERGE_GAP = 256 * 2**10
#: A merged GET spans at most this many bytes: AWS gives 8 or 16 MB as the typical size of a ranged GET
#: ("Best Practices Design Patterns: Optimizing Amazon S3 Performance", "Use Byte-Range Fetches").
MAX_MERGED = 8 * 2**20
#: Video segments kept on local disk per process, per buffer (bytes).
SEGMENT_CACHE_BYTES = 512 * 2**20


def merge_ranges(keys: Sequence[str], starts: Sequence[int], stops: Sequence[int], gap: int = MERGE_GAP,
                 limit: int = MAX_MERGED) -> tuple[list[tuple[str, int, int]], list[tuple[int, int]]]:
    """Group ranges into requests: ``(requests, where)`` with ``requests[j] = (key, start, stop)`` and
    ``where[i] = (j, offset of range i inside request j)``. Ranges of one key whose gap is at most
    ``gap`` bytes are merged while the request stays within ``limit`` bytes."""
    order = sorted(range(len(keys)), key=lambda i: (keys[i], starts[i]))
    requests: list[tuple[str, int, int]] = []
    where: list[tuple[int, int]] = [(0, 0)] * len(keys)
    for i in order:
        key, a, b = keys[i], int(starts[i]), int(stops[i])
        if requests:
            k, s, e = requests[-1]
            if k == key and a - e <= gap and max(b, e) - s <= limit:
                requests[-1] = (k, s, max(b, e))
                where[i] = (len(requests) - 1, a - s)
                continue
        requests.append((key, a, b))
        where[i] = (len(requests) - 1, 0)
    return requests, where


class RemotePayload:
    """Payload files of one published snapshot (``manifest``) under ``url``.

    Attributes:
        requests: GET requests sent so far by this process (ranged reads and whole segments).
        bytes_fetched: bytes those requests returned.
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None, manifest: Manifest,
                 cache_bytes: int = SEGMENT_CACHE_BYTES):
        self.url = url
        self.storage_options = storage_options
        self.manifest = manifest
        self.cache_bytes = cache_bytes
        self.requests = 0
        self.bytes_fetched = 0
        self._lock = threading.Lock()
        self._pid = -1
        self._fs: Any = None
        self._root = ""
        self._cache_dir: Path | None = None
        self._cached: OrderedDict[str, int] = OrderedDict()  # relpath -> bytes, least recently used first

    # -- the client, per process ---------------------------------------------------------------
    def _client(self) -> tuple[Any, str]:
        with self._lock:
            if self._pid != os.getpid():
                self._fs, self._root = filesystem(self.url, self.storage_options)
                self._cache_dir, self._cached = None, OrderedDict()  # a forked child's cache is its own
                self._pid = os.getpid()
            return self._fs, self._root

    def _object(self, relpath: str) -> str:
        entry = self.manifest.files.get(relpath)
        if entry is None:
            raise FormatError(f"{self.url}: the published snapshot has no file {relpath}")
        return f"{self._client()[1]}/{entry.key}"

    # -- PayloadSource -------------------------------------------------------------------------
    def exists(self, relpath: str) -> bool:
        return relpath in self.manifest.files

    def size(self, relpath: str) -> int:
        entry = self.manifest.files.get(relpath)
        if entry is None:
            raise FileNotFoundError(f"{self.url}/{relpath}")
        return entry.size

    def read_ranges(self, relpaths: Sequence[str], starts: Sequence[int], stops: Sequence[int]) -> list[bytes]:
        """Bytes ``[start, stop)`` of each file; see the module docstring for how requests are made.

        Raises:
            FormatError: a range past the end of its file (a damaged index), or an object gone from the
                bucket (a later push removed it, past its retention: reopen the buffer).
        """
        for rel, a, b in zip(relpaths, starts, stops):
            if b > self.size(rel) or a < 0 or b < a:
                raise FormatError(f"{self.url}/{rel}: the index points to bytes [{a}, {b}) but the file has "
                                  f"{self.size(rel)}: the index is damaged")
        fs, _ = self._client()
        requests, where = merge_ranges(list(relpaths), starts, stops, MERGE_GAP, MAX_MERGED)
        paths = [self._object(k) for k, _, _ in requests]
        with store_errors(self.url):
            blobs = fs.cat_ranges(paths, [s for _, s, _ in requests], [e for _, _, e in requests],
                                  on_error="return")
        for (rel, s, e), blob in zip(requests, blobs):
            self._check_blob(rel, blob, e - s)
        with self._lock:
            self.requests += len(requests)
            self.bytes_fetched += sum(e - s for _, s, e in requests)
        return [memoryview(blobs[j])[off:off + (int(b) - int(a))]  # type: ignore[misc]
                for (j, off), a, b in zip(where, starts, stops)]

    def _check_blob(self, rel: str, blob: Any, expected: int) -> None:
        if isinstance(blob, BaseException):
            if isinstance(blob, FileNotFoundError):
                raise FormatError(f"{self.url}: the object of {rel} is gone from the bucket (pushed again, and "
                                  "the snapshot this reader opened is past the push's retention): open it again"
                                  ) from blob
            with store_errors(self.url):
                raise blob
        if len(blob) != expected:
            raise FormatError(f"{self.url}/{self.manifest.files[rel].key} ({rel}): needed {expected} bytes, got "
                              f"{len(blob)}: the object is truncated")

    def _check_hash(self, rel: str, blob: bytes) -> None:
        # A whole object can be checked against the manifest: a segment whose bytes changed in the
        # bucket may still decode (to wrong frames), so its size alone does not tell.
        entry = self.manifest.files[rel]
        if hashlib.sha256(blob).hexdigest() != entry.sha256:
            raise FormatError(f"{self.url}/{entry.key} ({rel}): its bytes do not match the SHA-256 in the manifest: "
                              "the object is damaged")

    def local_copy(self, relpath: str) -> Path:
        """A local file with the whole of ``relpath`` (one GET on a cache miss), checked against the
        size and SHA-256 in the manifest.

        Raises:
            FormatError: the object is gone from the bucket, or its size or SHA-256 differs from the manifest.
        """
        fs, _ = self._client()
        with self._lock:
            folder = self._cache_folder()
            local = folder / relpath.replace("/", "%")
            if relpath in self._cached and local.exists():
                self._cached.move_to_end(relpath)
                return local
        size = self.size(relpath)
        blob: Any
        try:
            with store_errors(self.url):
                blob = fs.cat_file(self._object(relpath))
        except FileNotFoundError as exc:
            blob = exc
        self._check_blob(relpath, blob, size)
        self._check_hash(relpath, blob)
        tmp = local.with_name(local.name + f".{threading.get_ident()}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, local)
        with self._lock:
            self.requests += 1
            self.bytes_fetched += size
            self._cached[relpath] = size
            self._cached.move_to_end(relpath)
            total = sum(self._cached.values())
            while total > self.cache_bytes and len(self._cached) > 1:
                old, n = self._cached.popitem(last=False)
                (folder / old.replace("/", "%")).unlink(missing_ok=True)
                total -= n
        return local

    def _cache_folder(self) -> Path:
        if self._cache_dir is None:
            self._cache_dir = Path(tempfile.mkdtemp(prefix="trajstore-segments-"))
            # Removed at exit of this process (also of a multiprocessing child, which clears inherited finalizers).
            multiprocessing.util.Finalize(None, _remove_if_mine, args=(str(self._cache_dir), os.getpid()),
                                          exitpriority=10)
        return self._cache_dir

    def close(self) -> None:
        with self._lock:
            if self._cache_dir is not None and self._pid == os.getpid():
                shutil.rmtree(self._cache_dir, ignore_errors=True)
            self._cache_dir, self._cached = None, OrderedDict()


def _remove_if_mine(path: str, pid: int) -> None:
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)
