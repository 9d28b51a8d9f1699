"""``push``: publish a buffer folder (closed, or live with a writer recording) under a URL.

Order (see :mod:`~trajstore.remote.layout` for the layout in the bucket):

1. a consistent copy of the folder's committed state (:func:`~trajstore.remote.snapshot.take_snapshot`):
   small files copied into a temporary folder, payload files listed with their size;
2. each file is named by its SHA-256 (payload files whose size and modification time match the
   previous manifest keep its key without being read again: they are append-only);
3. objects the bucket does not hold yet are uploaded (concurrently), payload and small files alike;
4. the manifest is written last, in one PUT (or a rename on a local file system): a reader that
   opens during a push sees the previous manifest or the new one, each naming only objects that
   are there;
5. objects that no retained snapshot names are deleted (:mod:`~trajstore.remote.retention`: the
   replaced snapshot and those replaced less than an hour ago are kept), so a reader that opened
   an older snapshot keeps working.

One push per URL at a time, enforced: a push holds the URL's push lock (:mod:`~trajstore.remote.push_lock`)
from before it reads the manifest until its deletions are done; a second push fails at once with
:class:`~trajstore.errors.PushConflictError` naming the first. Before writing the manifest a push
checks that it still holds the lock and that the manifest's generation is still the one it started
from; if not, it stops without writing or deleting anything.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from trajstore.errors import FormatError, InvalidValueError, PushConflictError
from trajstore.remote.layout import MANIFEST, OBJECTS, PAYLOAD, SMALL, object_key
from trajstore.remote.location import LOCAL_PROTOCOLS, filesystem, protocol_of, store_errors
from trajstore.remote.manifest import Entry, Manifest
from trajstore.remote.mirror import manifest_or_none
from trajstore.remote.push_lock import S3_PROTOCOLS, PushLock, precondition_failed
from trajstore.remote.retention import HISTORY, RETAIN_SECONDS, collect, history_name
from trajstore.remote.snapshot import Snapshot, check_undamaged, take_snapshot
from trajstore.replay_buffer.metadata import read_meta
from trajstore.shards.layout import is_dataset

#: Bytes uploaded per batch of concurrent PUTs (bounds the push's memory).
UPLOAD_BATCH_BYTES = 128 * 2**20
_HASH_BLOCK = 8 * 2**20


@dataclass(frozen=True)
class PushReport:
    """What one push did: files in the snapshot, what was uploaded, what was already there, what was deleted.

    ``unchanged``: the URL held these very files already (the last push's, nothing changed since): no manifest
    was written, so ``generation`` is the URL's as it was, and nothing was deleted; ``uploaded_files`` is then
    the number of objects the bucket had lost and got back (usually 0).
    """

    url: str
    generation: int
    steps: int
    files: int
    uploaded_files: int
    uploaded_bytes: int
    skipped_files: int
    skipped_bytes: int
    deleted_objects: int
    unchanged: bool = False

    def line(self) -> str:
        if self.unchanged:
            again = (f"; {self.uploaded_files} missing objects uploaded again ({self.uploaded_bytes:,} bytes)"
                     if self.uploaded_files else "")
            return (f"unchanged: {self.url} already holds these {self.steps} steps (generation {self.generation} "
                    f"kept, {self.files} files){again}")
        return (f"pushed {self.steps} steps to {self.url} (generation {self.generation}): {self.files} files, "
                f"{self.uploaded_files} uploaded ({self.uploaded_bytes:,} bytes), {self.skipped_files} already there "
                f"({self.skipped_bytes:,} bytes), {self.deleted_objects} old objects deleted")


class PayloadGone(Exception):
    """A local payload file was deleted (or shrank) by the writer after the snapshot listed it."""


def _hash_file(path: Path, size: int) -> str:
    """SHA-256 of the first ``size`` bytes of ``path`` (a payload file may grow meanwhile).

    Raises:
        PayloadGone: the file is gone or shorter than ``size``.
    """
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            left = size
            while left > 0:
                block = f.read(min(_HASH_BLOCK, left))
                if not block:
                    raise PayloadGone(path)
                h.update(block)
                left -= len(block)
    except FileNotFoundError:
        raise PayloadGone(path) from None
    return h.hexdigest()


def _read_prefix(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path``.

    Raises:
        PayloadGone: the file is gone or shorter than ``size``.
    """
    try:
        with open(path, "rb") as f:
            data = f.read(size)
    except FileNotFoundError:
        raise PayloadGone(path) from None
    if len(data) != size:
        raise PayloadGone(path)
    return data


def push(folder: str | os.PathLike, url: str, storage_options: dict[str, Any] | None = None, *,
         retain_seconds: float = RETAIN_SECONDS, progress: Callable[[int, int], None] | None = None) -> PushReport:
    """Publish the buffer folder ``folder`` under ``url`` (any fsspec URL: ``s3://bucket/path``,
    ``file:///path``, a plain local path), incrementally; see the module docstring. A push of what the
    URL holds already (nothing changed since the last push) writes no manifest and keeps the generation:
    its report says ``unchanged``. A sharded dataset folder (:mod:`trajstore.shards`) is pushed shard by shard
    (:func:`trajstore.shards.remote.push_dataset`; its report is a ``DatasetPushReport``).

    ``retain_seconds``: keep the objects of snapshots replaced less than this long ago (default one
    hour), for readers that opened them (:mod:`~trajstore.remote.retention`); the snapshot this push
    replaces is always kept. ``progress(sent, total)``, if given, is called with the bytes uploaded so
    far and the bytes this push uploads (objects the bucket lacks), once before the first upload and
    after each batch of concurrent PUTs.

    Raises:
        DamagedDataError: (a ``FormatError``) payload files of ``folder`` are missing (``ReplayBuffer.damaged``
            of a read-only open, or an index naming them): the message names them; nothing was uploaded.
        FormatError: ``folder`` is not a buffer folder or a file of it does not read back while nothing
            changed it, the URL holds a damaged manifest, or a writer kept reusing the slots being copied
            (:mod:`~trajstore.remote.snapshot`).
        ImportError: fsspec, or the URL protocol's package (s3fs), is missing.
        InvalidValueError: ``storage_options`` is not a dict, the URL's scheme is unknown, or the URL is
            a local path inside ``folder``.
        PushConflictError: another push to ``url`` is under way (the message names its host and process
            id), took this push's lock over, or wrote a manifest meanwhile; this push wrote no manifest
            and deleted nothing (a ``RemoteStoreError``, so an ``OSError``).
        OSError: the store refused a request (credentials, missing bucket; ``RemoteStoreError`` for an
            unreachable endpoint or options the client does not take); the previous snapshot stays.
    """
    folder = Path(folder)
    if is_dataset(folder):  # a sharded dataset: each shard pushed as a buffer, its dataset file last
        from trajstore.shards.remote import push_dataset

        return push_dataset(folder, url, storage_options, retain_seconds=retain_seconds)  # type: ignore[return-value]
    read_meta(folder)  # not a buffer folder: a FormatError before anything is made or sent
    check_undamaged(folder)  # payload files missing: a DamagedDataError, before anything is made or sent
    with store_errors(url):
        return _push(folder, url, storage_options, retain_seconds, progress)


def _push(folder: Path, url: str, storage_options: dict[str, Any] | None, retain_seconds: float,
          progress: Callable[[int, int], None] | None) -> PushReport:
    fs, root = filesystem(url if protocol_of(url) else Path(url).resolve().as_uri(), storage_options)
    local = protocol_of(url) in (None, *LOCAL_PROTOCOLS)
    if local and Path(root).resolve().is_relative_to(folder.resolve()):
        # The objects would land among the files being published, and each push would publish the last.
        raise InvalidValueError(f"{url}: cannot publish {folder} into itself; pick a URL outside the folder")
    if local:
        os.makedirs(Path(root) / OBJECTS, exist_ok=True)
    with PushLock(fs, root, url, local=local, s3=protocol_of(url) in S3_PROTOCOLS) as lock:
        return _push_locked(fs, root, folder, url, local, lock, retain_seconds, progress)


def _push_locked(fs: Any, root: str, folder: Path, url: str, local: bool, lock: PushLock, retain_seconds: float,
                 progress: Callable[[int, int], None] | None) -> PushReport:
    """The push, once this process holds the URL's push lock: everything it reads of the URL is read now."""
    if local:
        _remove_temporaries(Path(root))
    found = manifest_or_none(fs, root, url)
    previous = found[0] if found else None
    existing = {p.rsplit("/", 1)[-1] for p in (fs.find(f"{root}/{OBJECTS}") if fs.exists(f"{root}/{OBJECTS}")
                                               else [])}

    def report(sent: int, total: int) -> None:  # between batches of uploads: stop if the lock was lost
        lock.raise_if_lost()
        if progress is not None:
            progress(sent, total)

    with tempfile.TemporaryDirectory(prefix="trajstore-push-") as tmp:
        for _ in range(3):  # a payload file the writer deleted before it was read: take the snapshot again
            snap = take_snapshot(folder, Path(tmp) / "snapshot")
            try:
                files, uploads = _entries(snap, previous, existing)
                sent_files, sent_bytes = _upload(fs, root, uploads, local, report)
                break
            except PayloadGone:
                continue
        else:
            raise FormatError(f"{folder}: the writer deleted payload files being published three times in a row; "
                              "push again when it records more slowly, or after it closes")
    skipped = [e for e in files.values() if e.key.rsplit("/", 1)[-1] in existing]
    if previous is not None and _same_files(previous, files):  # nothing changed since the last push
        return PushReport(url, previous.generation, snap.steps, len(files), sent_files, sent_bytes,
                          len(skipped), sum(e.size for e in skipped), 0, unchanged=True)
    manifest = Manifest((previous.generation + 1) if previous else 1, files, time.time())
    data = manifest.to_bytes()
    lock.confirm()
    tag = _check_unmoved(fs, root, url, previous, lock.s3)
    _write_small(fs, root, history_name(manifest.generation), data, local)  # before the manifest names it
    _write_manifest(fs, root, url, data, local, lock.s3, tag)
    stale, old_history = collect(fs, root, url, manifest, previous, manifest.created, retain_seconds,
                                 written_before=lock.acquired_at)
    if stale or old_history:
        fs.rm([*stale, *old_history])
    return PushReport(url, manifest.generation, snap.steps, len(files), sent_files, sent_bytes,
                      len(skipped), sum(e.size for e in skipped), len(stale))


def _same_files(previous: Manifest, files: dict[str, Entry]) -> bool:
    """True if ``files`` are the manifest's: the same paths with the same contents (a payload file's
    modification time aside: one touched but not changed is not a change)."""
    def content(entries: dict[str, Entry]) -> dict[str, tuple[str, int, str, str | None]]:
        return {p: (e.key, e.size, e.sha256, e.kind) for p, e in entries.items()}

    return content(previous.files) == content(files)


def _check_unmoved(fs: Any, root: str, url: str, previous: Manifest | None, s3: bool) -> Any:
    """Raise PushConflictError if the URL's manifest is no longer ``previous`` (another push wrote one).

    Returns the manifest's ETag on S3 (read before its bytes, so it is the version checked or an older
    one) for :func:`_write_manifest`'s conditional PUT, else ``None``."""
    tag = None
    if s3:
        fs.invalidate_cache(f"{root}/{MANIFEST}")
        try:
            tag = fs.info(f"{root}/{MANIFEST}")["ETag"]
        except FileNotFoundError:
            pass
    found = manifest_or_none(fs, root, url)
    now = found[0].generation if found else None
    was = previous.generation if previous else None
    if now != was:
        raise _moved(url, now, was)
    return tag


def _moved(url: str, now: Any, was: Any) -> PushConflictError:
    return PushConflictError(f"{url}: another push wrote generation {now} while this push ran (it started from "
                             f"{was}); this push stopped before writing its manifest and deleted nothing: "
                             "one push per URL at a time")


def _write_manifest(fs: Any, root: str, url: str, data: bytes, local: bool, s3: bool, tag: Any) -> None:
    """Write the manifest; on S3 only if it is still the version :func:`_check_unmoved` checked (``If-Match``
    on its ETag, or ``If-None-Match: *`` when there was none), so a push that does not take the lock (an
    older trajstore) cannot slip a manifest in between unnoticed.

    Raises:
        PushConflictError: the manifest changed since it was checked (nothing was deleted).
    """
    if not s3:
        _write_small(fs, root, MANIFEST, data, local)
        return
    try:
        if tag is None:
            fs.pipe_file(f"{root}/{MANIFEST}", data, mode="create")
        else:
            fs.pipe_file(f"{root}/{MANIFEST}", data, IfMatch=tag)
    except OSError as exc:
        if isinstance(exc, (FileExistsError, FileNotFoundError)) or precondition_failed(exc):
            raise PushConflictError(f"{url}: another push replaced the manifest just before this push wrote its "
                                    "own; this push stopped there and deleted nothing: one push per URL at a "
                                    "time") from None
        raise


def _remove_temporaries(root: Path) -> None:
    """Remove what killed pushes left in a local URL: ``objects/*.partial`` and hidden ``*.tmp`` files of the
    manifests (the push lock is held: no other push is writing them)."""
    for folder, pattern in ((root / OBJECTS, "*.partial"), (root, ".*.tmp"), (root / HISTORY, ".*.tmp")):
        if folder.is_dir():
            for path in folder.glob(pattern):
                path.unlink(missing_ok=True)


def _entries(snap: Snapshot, previous: Manifest | None,
             existing: set[str]) -> tuple[dict[str, Entry], list[tuple[str, Path, int]]]:
    """The manifest's entries, and the uploads ``(key, local file, size)`` of objects not in the bucket yet."""
    files: dict[str, Entry] = {}
    uploads: dict[str, tuple[str, Path, int]] = {}
    for rel in snap.small:
        path = snap.staged / rel
        size = path.stat().st_size
        sha = _hash_file(path, size)
        files[rel] = Entry(object_key(sha), size, sha, kind=SMALL)
    for rel, (size, mtime_ns) in snap.payload.items():
        old = previous.files.get(rel) if previous else None
        if old is not None and old.size == size and old.mtime_ns == mtime_ns and old.key.rsplit("/", 1)[-1] in existing:
            files[rel] = replace(old, kind=PAYLOAD)  # append-only and unchanged: no need to read it again
            continue
        sha = _hash_file(snap.source / rel, size)
        files[rel] = Entry(object_key(sha), size, sha, mtime_ns, PAYLOAD)
    for rel, e in files.items():
        name = e.key.rsplit("/", 1)[-1]
        if name not in existing and e.key not in uploads:
            uploads[e.key] = (e.key, (snap.staged if rel in snap.small else snap.source) / rel, e.size)
    return files, list(uploads.values())


def _upload(fs: Any, root: str, uploads: list[tuple[str, Path, int]], local: bool,
            progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
    """PUT the objects in batches of concurrent requests (a PUT is all or nothing); on a local file
    system, write each under a temporary name and rename it, so that a crash leaves no partial object
    under a key the next push would take as uploaded. Returns (objects, bytes)."""
    batch: dict[str, bytes] = {}
    held = sent = 0
    total = sum(size for _, _, size in uploads)
    report = progress or (lambda sent, total: None)
    report(0, total)

    def send() -> None:
        if local:
            for target, data in batch.items():
                tmp = f"{target}.{os.getpid()}.partial"
                Path(tmp).write_bytes(data)
                os.replace(tmp, target)
        else:
            fs.pipe(batch)

    for key, path, size in uploads:
        batch[f"{root}/{key}"] = _read_prefix(path, size)
        held += size
        if held >= UPLOAD_BATCH_BYTES:
            send()
            sent, batch, held = sent + held, {}, 0
            report(sent, total)
    if batch:
        send()
        sent += held
        report(sent, total)
    return len(uploads), sent


def _write_small(fs: Any, root: str, name: str, data: bytes, local: bool) -> None:
    """One PUT on object storage (atomic there); write-then-rename on a local file system."""
    if local:
        final = Path(root) / name
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, final)
        return
    fs.pipe_file(f"{root}/{name}", data)
