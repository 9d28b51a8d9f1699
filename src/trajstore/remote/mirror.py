"""Opening a published buffer read-only: ``ReplayBuffer.load_from("s3://bucket/path", storage_options=...)``.

The buffer does not import this module: it asks :func:`trajstore._openers.url_opener` for the URL
opener, which :mod:`trajstore.remote` registers on import (:func:`open_url`). What happens:

1. one GET of ``trajstore-manifest.json``: the snapshot to read (:mod:`~trajstore.remote.manifest`);
2. the *small* files it names (as the manifest records them: metadata, episode log, indexes, HDF5,
   memmap data; see :mod:`~trajstore.remote.layout`) are fetched once, concurrently, checked against their SHA-256 and
   written into a local *mirror* folder: a new temporary folder removed when the buffer is closed
   or the process exits, or, with ``cache_dir=``, ``cache_dir/<manifest hash>/``, kept and reused by
   later opens of the same snapshot;
3. the opener returns a :class:`MirrorFolder` (a :class:`trajstore._openers.RemoteFolder`): the
   mirror and a :class:`~trajstore.remote.source.RemotePayload`, the payload source the buffer hands
   its storages when it opens the mirror read-only, as a local folder: camera frames are read by
   ranged GETs of their chunk objects, video segments are fetched whole into a bounded cache.

So ``sample``, windows, transitions, statistics and the torch dataset work as on a local folder,
and the HDF5 leaves are read locally. The buffer is the snapshot of one push: :meth:`refresh`
sees nothing new; open it again to read a later push. A reader keeps working while later pushes
replace the snapshot: a push keeps the objects of the snapshot it replaces and of every snapshot
replaced within its retention (an hour by default, :mod:`~trajstore.remote.retention`); past that
its payload objects may be gone, and a read says so (``FormatError``: open it again).

Pickling (DataLoader workers under spawn, Ray tasks): the buffer pickles as
:meth:`MirrorFolder.reopen_kwargs`: its URL, storage options (credentials included: they travel with
the pickle), mirror folder and snapshot (manifest generation and hash). A process on the same machine
reuses the mirror while it exists; elsewhere it opens the same snapshot from the URL: the current
manifest if no push replaced it, else the copy a push keeps under ``manifests/`` while the snapshot is
retained (past that: ``FormatError``). So a copy never reads a later push than its original.
"""

from __future__ import annotations

import hashlib
import multiprocessing.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from trajstore._fs import staged_folder
from trajstore.errors import FormatError, ReadOnlyError
from trajstore.remote.layout import MANIFEST, PAYLOAD
from trajstore.remote.location import filesystem, store_errors
from trajstore.remote.manifest import Manifest
from trajstore.remote.source import SEGMENT_CACHE_BYTES, RemotePayload
from trajstore.storages.files import classify

#: The mirror's copy of the manifest it was built from (hidden: never published).
MIRROR_MANIFEST = ".trajstore-manifest.json"


def manifest_or_none(fs: Any, root: str, url: str) -> tuple[Manifest, bytes] | None:
    """The current manifest under ``url`` and its bytes, or ``None`` when there is none.

    Raises:
        FormatError: a damaged manifest.
    """
    try:
        data = fs.cat_file(f"{root}/{MANIFEST}")
    except FileNotFoundError:
        return None
    return Manifest.from_bytes(data, f"{url}/{MANIFEST}"), data


def read_manifest(fs: Any, root: str, url: str) -> tuple[Manifest, bytes]:
    """The current manifest under ``url`` and its bytes.

    Raises:
        FormatError: there is none (not a published buffer) or it is damaged.
    """
    found = manifest_or_none(fs, root, url)
    if found is None:
        raise FormatError(f"{url} is not a published trajstore buffer: it has no {MANIFEST} "
                          "(publish a folder with `trajstore push FOLDER URL`)")
    return found


def fetch_files(fs: Any, root: str, url: str, manifest: Manifest, relpaths: list[str], folder: Path) -> int:
    """Download ``relpaths`` of ``manifest`` into ``folder`` (concurrently), checking size and SHA-256.
    Returns the bytes fetched.

    Raises:
        FormatError: an object is missing or its bytes do not match the manifest.
    """
    keys = sorted({manifest.files[p].key for p in relpaths})
    try:
        blobs = fs.cat([f"{root}/{k}" for k in keys], on_error="raise") if keys else {}
    except FileNotFoundError as exc:
        raise FormatError(f"{url}: an object the manifest names is missing ({exc}); the buffer was pushed "
                          "again while it was read: open it again") from None
    if len(keys) == 1 and not isinstance(blobs, dict):  # fsspec returns bytes for a single path
        blobs = {f"{root}/{keys[0]}": blobs}
    by_key = {k: blobs[f"{root}/{k}"] for k in keys}
    for rel in relpaths:
        entry = manifest.files[rel]
        data = by_key[entry.key]
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise FormatError(f"{url}/{entry.key} ({rel}): its bytes do not match the manifest (size {len(data)}, "
                              f"expected {entry.size}): the object is damaged")
        out = folder / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    return sum(len(b) for b in by_key.values())


def split_kinds(fs: Any, root: str, url: str, manifest: Manifest) -> tuple[list[str], list[str]]:
    """``(small, payload)``: the manifest's files by kind. A manifest written before kinds were recorded
    is classified by the storages' descriptors (:func:`trajstore.storages.files.classify`), fetched.

    Raises:
        FormatError: a descriptor is missing, damaged or names an unregistered storage type.
    """
    if any(e.kind is None for e in manifest.files.values()):
        def read(rel: str) -> bytes:
            with tempfile.TemporaryDirectory(prefix="trajstore-descriptor-") as tmp:
                fetch_files(fs, root, url, manifest, [rel], Path(tmp))
                return (Path(tmp) / rel).read_bytes()

        kinds = {f.relpath: f.kind for f in classify(manifest.files, read, url)}
    else:
        kinds = {p: str(e.kind) for p, e in manifest.files.items()}
    return [p for p, k in kinds.items() if k != PAYLOAD], [p for p, k in kinds.items() if k == PAYLOAD]


class MirrorFolder:
    """A published snapshot made openable (a :class:`trajstore._openers.RemoteFolder`): the local mirror
    folder ``path`` holding its small files, and ``payload``, the source of its payload files.

    Attributes:
        url, storage_options: where it was opened from, and how.
        path: the mirror folder.
        payload: the :class:`~trajstore.remote.source.RemotePayload` of ``path``.
        snapshot: :func:`snapshot_id` of the manifest it holds.
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None, path: Path, payload: RemotePayload,
                 owned_root: Path | None, snapshot: str):
        self.url, self.storage_options, self.path, self.payload = url, storage_options, path, payload
        self.snapshot = snapshot
        self._owned_root = owned_root  # the temporary folder to remove at close, if this process made it
        self._pid = os.getpid()
        if owned_root is not None:
            multiprocessing.util.Finalize(None, _remove_if_mine, args=(str(owned_root), self._pid), exitpriority=10)

    def reopen_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`open_url` that open this snapshot again (in another process: the
        mirror while it exists, else the URL's copy of the snapshot)."""
        return {"url": self.url, "storage_options": self.storage_options, "mirror": str(self.path),
                "snapshot": self.snapshot}

    def close(self) -> None:
        """Release the payload source; remove the mirror if this process made it as a temporary folder."""
        self.payload.close()
        if os.getpid() == self._pid and self._owned_root is not None:
            shutil.rmtree(self._owned_root, ignore_errors=True)
            self._owned_root = None

    def __repr__(self) -> str:
        return f"MirrorFolder({self.url}, snapshot {self.snapshot.split(':', 1)[0]}, at {self.path})"


def _remove_if_mine(path: str, pid: int) -> None:
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)


def snapshot_id(manifest: Manifest, data: bytes) -> str:
    """``"<generation>:<SHA-256 of the manifest's bytes>"``: names one pushed snapshot of a URL."""
    return f"{manifest.generation}:{hashlib.sha256(data).hexdigest()}"


def read_snapshot(fs: Any, root: str, url: str, snapshot: str) -> tuple[Manifest, bytes]:
    """The manifest of the snapshot ``snapshot`` (:func:`snapshot_id`): the current one if a push has
    not replaced it, else its copy kept under ``manifests/`` while it is retained.

    Raises:
        FormatError: that snapshot was replaced and is past the pushes' retention (open the URL again).
    """
    generation, _, digest = snapshot.partition(":")
    manifest, data = read_manifest(fs, root, url)
    if snapshot_id(manifest, data) == snapshot:
        return manifest, data
    from trajstore.remote.retention import history_name

    try:
        data = fs.cat_file(f"{root}/{history_name(int(generation))}")
    except (FileNotFoundError, ValueError):
        data = b""
    if hashlib.sha256(data).hexdigest() != digest:
        raise FormatError(f"{url}: the snapshot this reader was opened on (generation {generation}) was replaced "
                          f"by generation {manifest.generation} and is no longer kept (past the push's retention): "
                          "open the URL again (or make the dataset again)")
    return Manifest.from_bytes(data, f"{url}/{history_name(int(generation))}"), data


def _build_mirror(fs: Any, root: str, url: str, manifest: Manifest, data: bytes, out: Path) -> None:
    with staged_folder(out) as tmp:
        tmp.mkdir()
        small, _ = split_kinds(fs, root, url, manifest)
        fetch_files(fs, root, url, manifest, small, tmp)
        (tmp / MIRROR_MANIFEST).write_bytes(data)


def open_url(url: str, *, read_only: bool = True, storage_options: dict[str, Any] | None = None,
             cache_dir: str | os.PathLike | None = None, segment_cache_bytes: int = SEGMENT_CACHE_BYTES,
             mirror: str | None = None, snapshot: str | None = None) -> MirrorFolder:
    """The URL opener (registered in :mod:`trajstore._openers`): the snapshot published under ``url`` as a
    mirror folder and its payload source; see the module docstring. ``mirror``: a mirror folder to reuse
    when it still holds the snapshot (set by unpickling). ``snapshot``: open that snapshot
    (:func:`snapshot_id`) rather than the current one, so a copy of a buffer (unpickled, a Ray read task)
    reads what the original read even after a push replaced it (:func:`read_snapshot`).

    Raises:
        ReadOnlyError: ``read_only=False`` (nothing is fetched).
        FormatError: not a published buffer, a damaged manifest or object.
        InvalidValueError: ``storage_options`` is not a dict, or the URL's scheme is unknown.
        RemoteStoreError: the store could not be reached or refused the options.
        ImportError: fsspec or the protocol's package is missing.
    """
    if not read_only:
        raise ReadOnlyError(f"{url}: a buffer in object storage opens read-only; to add to it, pull it into a "
                            "local folder (`trajstore pull`), write there and push it again")
    with store_errors(url):
        return _open(url, storage_options, cache_dir, segment_cache_bytes, mirror, snapshot)


def _open(url: str, storage_options: dict[str, Any] | None, cache_dir: str | os.PathLike | None,
          segment_cache_bytes: int, mirror: str | None, snapshot: str | None) -> MirrorFolder:
    fs, root = filesystem(url, storage_options)
    owned_root = None
    kept = _mirror_manifest(mirror, snapshot)
    if kept is not None:
        manifest, data = kept
        path = Path(mirror)  # type: ignore[arg-type]
    else:
        manifest, data = read_manifest(fs, root, url) if snapshot is None else read_snapshot(fs, root, url, snapshot)
        if cache_dir is not None:
            path = Path(cache_dir) / hashlib.sha256(data).hexdigest()[:16]
            if not (path / MIRROR_MANIFEST).is_file():
                try:
                    _build_mirror(fs, root, url, manifest, data, path)
                except OSError:  # another process built it first (the rename found a full folder)
                    if not (path / MIRROR_MANIFEST).is_file():
                        raise
        else:
            owned_root = Path(tempfile.mkdtemp(prefix="trajstore-remote-"))
            path = owned_root / "buffer"
            try:
                _build_mirror(fs, root, url, manifest, data, path)
            except BaseException:
                shutil.rmtree(owned_root, ignore_errors=True)
                raise
    source = RemotePayload(url, storage_options, manifest, cache_bytes=segment_cache_bytes)
    return MirrorFolder(url, storage_options, path, source, owned_root, snapshot_id(manifest, data))


def _mirror_manifest(mirror: str | None, snapshot: str | None) -> tuple[Manifest, bytes] | None:
    """The manifest of the mirror folder ``mirror`` when it still exists and holds ``snapshot``."""
    if mirror is None or not (Path(mirror) / MIRROR_MANIFEST).is_file():
        return None
    data = (Path(mirror) / MIRROR_MANIFEST).read_bytes()
    manifest = Manifest.from_bytes(data, f"{mirror}/{MIRROR_MANIFEST}")
    if snapshot is not None and snapshot_id(manifest, data) != snapshot:
        return None
    return manifest, data


def reopen_remote(url: str, storage_options: dict[str, Any] | None, mirror: str | None, multiprocessing: bool,
                  snapshot: str | None = None) -> Any:
    """A buffer reading the snapshot ``snapshot`` of ``url`` (from ``mirror`` while it exists, else from
    the URL, :func:`read_snapshot`): what a copy of a buffer opened from a URL opens."""
    from trajstore.replay_buffer.remote_open import reopen_url

    return reopen_url({"url": url, "storage_options": storage_options, "mirror": mirror, "snapshot": snapshot},
                      multiprocessing)
