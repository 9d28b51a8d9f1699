"""``pull``: copy a published buffer into a new local folder, whole or not at all."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trajstore._fs import check_new_folder, staged_folder
from trajstore.errors import FormatError
from trajstore.remote.location import filesystem, protocol_of, store_errors
from trajstore.remote.mirror import fetch_files, read_manifest, split_kinds

_HASH_BLOCK = 8 * 2**20


@dataclass(frozen=True)
class PullReport:
    url: str
    folder: Path
    generation: int
    files: int
    bytes: int

    def line(self) -> str:
        return (f"pulled {self.url} (generation {self.generation}) into {self.folder}: {self.files} files, "
                f"{self.bytes:,} bytes")


def pull(url: str, folder: str | os.PathLike, storage_options: dict[str, Any] | None = None, *,
         progress: Callable[[int, int], None] | None = None) -> PullReport:
    """Copy the snapshot published under ``url`` into the new folder ``folder``: built under a
    temporary name and renamed into place, so ``folder`` appears whole or not at all. Every file is
    checked against the size and SHA-256 in the manifest. A pushed sharded dataset is pulled shard by shard
    (:func:`trajstore.shards.remote.pull_dataset`; its report is a ``DatasetPullReport``). ``progress(done, total)``, if given, is called
    with the bytes downloaded so far and the snapshot's total, as they arrive (per chunk for the big
    files, when the file system reports them).

    Raises:
        StorageExistsError: ``folder`` is a file or a non-empty folder (checked first).
        FormatError: ``url`` holds no published buffer, or an object is missing or damaged (a push
            later removed it: pull again).
        InvalidValueError: ``storage_options`` is not a dict, or the URL's scheme is unknown.
        RemoteStoreError: the store could not be reached or refused the options.
        ImportError: fsspec, or the URL protocol's package, is missing.
    """
    out = Path(folder)
    check_new_folder(out)
    from trajstore.shards.remote import is_remote_dataset, pull_dataset

    with store_errors(url):
        if is_remote_dataset(url, storage_options):  # a pushed sharded dataset: shard by shard
            return pull_dataset(url, out, storage_options)  # type: ignore[return-value]
        return _pull(url, out, storage_options, progress)


def _pull(url: str, out: Path, storage_options: dict[str, Any] | None,
          progress: Callable[[int, int], None] | None) -> PullReport:
    fs, root = filesystem(url if protocol_of(url) else Path(url).resolve().as_uri(), storage_options)
    manifest, _ = read_manifest(fs, root, url)
    total = 0
    small, payload = split_kinds(fs, root, url, manifest)
    # what is downloaded: each small object once (equal files share one), each payload file
    to_fetch = (sum({manifest.files[p].key: manifest.files[p].size for p in small}.values())
                + sum(manifest.files[p].size for p in payload))
    counter = _ByteCounter(to_fetch, progress)
    with staged_folder(out) as tmp:
        tmp.mkdir()
        total += fetch_files(fs, root, url, manifest, small, tmp)
        counter.add(total)
        for rel in payload:  # big files: streamed to disk, never held in memory whole
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        if payload:
            try:
                fs.get([f"{root}/{manifest.files[p].key}" for p in payload], [str(tmp / p) for p in payload],
                       callback=counter.callback())
            except FileNotFoundError as exc:
                raise FormatError(f"{url}: an object the manifest names is missing ({exc}); the buffer was "
                                  "pushed again meanwhile: pull again") from None
        for rel in payload:
            entry = manifest.files[rel]
            size, sha = _size_and_hash(tmp / rel)
            if size != entry.size or sha != entry.sha256:
                raise FormatError(f"{url}/{entry.key} ({rel}): its bytes do not match the manifest (size {size}, "
                                  f"expected {entry.size}): the object is damaged")
            total += size
    counter.add(counter.total)  # a file system that reports no bytes (a local one) ends here
    return PullReport(url, out, manifest.generation, len(manifest.files), total)


class _ByteCounter:
    """Bytes downloaded so far, reported to ``progress(done, total)``; ``callback()`` is an fsspec
    callback whose per-file children add the bytes each transfer reports."""

    def __init__(self, total: int, progress: Callable[[int, int], None] | None):
        self.total, self.done, self.progress = total, 0, progress

    def add(self, nbytes: int) -> None:
        self.done = min(self.total, self.done + nbytes)  # a retried transfer reports its bytes again
        if self.progress is not None:
            self.progress(self.done, self.total)

    def callback(self) -> Any:
        from fsspec.callbacks import Callback

        counter = self

        class PerFile(Callback):
            def relative_update(self, inc: int = 1) -> None:
                counter.add(inc)

        class Files(Callback):  # the parent counts files: its own updates are not bytes
            def branched(self, path_1: str, path_2: str, **kwargs: Any) -> Callback:
                return PerFile()

        return Files()


def _size_and_hash(path: Path) -> tuple[int, str]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while block := f.read(_HASH_BLOCK):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()
