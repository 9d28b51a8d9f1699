"""A sharded dataset in object storage: push every shard as a buffer, then the dataset file naming them.

``push_dataset("fleet", "s3://bucket/fleet")`` pushes ``template/`` and each shard with
:func:`trajstore.remote.push` (incrementally, each under ``<url>/shards/<name>``; live shards too), then
writes ``<url>/trajstore-dataset.json`` with the list of shards pushed, last: a reader lists the shards
from it (object storage has no reliable folder listing) and opens each with
``ReplayBuffer.load_from(<url>/shards/<name>)``. ``pull_dataset`` copies it back into a new local folder
built under a hidden name and renamed into place. Needs the ``remote`` extra.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajstore._fs import check_new_folder, staged_folder, write_json_atomic
from trajstore._json import loads_bounded
from trajstore.errors import FormatError
from trajstore.shards.dataset import MAX_DATASET_FILE, read_dataset_meta
from trajstore.shards.layout import (DATASET_FILE, DATASET_FORMAT, DATASET_VERSION, SHARDS_DIR, TEMPLATE_DIR,
                                     check_shard_name, shard_names)



@dataclass(frozen=True)
class DatasetPushReport:
    """What :func:`push_dataset` did: the URL and one ``PushReport`` per shard (by name)."""

    url: str
    shards: dict[str, Any]

    @property
    def steps(self) -> int:
        return sum(r.steps for r in self.shards.values())

    def line(self) -> str:
        sent = sum(r.uploaded_bytes for r in self.shards.values())
        unchanged = sum(r.unchanged for r in self.shards.values())
        return (f"pushed dataset {self.url}: {len(self.shards)} shards, {self.steps} steps, {sent:,} bytes uploaded"
                + (f", {unchanged} shards unchanged" if unchanged else ""))


@dataclass(frozen=True)
class DatasetPullReport:
    """What :func:`pull_dataset` did: the URL, the new folder, one ``PullReport`` per shard (by name) and the
    template's."""

    url: str
    folder: Path
    shards: dict[str, Any]
    template: Any

    @property
    def bytes(self) -> int:
        return self.template.bytes + sum(r.bytes for r in self.shards.values())

    def line(self) -> str:
        return f"pulled dataset {self.url} into {self.folder}: {len(self.shards)} shards, {self.bytes:,} bytes"


def _join(url: str, *parts: str) -> str:
    return "/".join([str(url).rstrip("/"), *parts])


def push_dataset(folder: str | os.PathLike, url: str, storage_options: dict[str, Any] | None = None,
                 **push_kwargs: Any) -> DatasetPushReport:
    """Publish the sharded dataset ``folder`` under ``url`` (see the module docstring); ``push_kwargs`` go
    to :func:`trajstore.remote.push` for each shard.

    Raises:
        FormatError: ``folder`` is not a sharded dataset; the errors of :func:`trajstore.remote.push` (a
            shard's push failed: the dataset file is not written, readers keep the previous list).
    """
    from trajstore.remote import push

    root = Path(folder)
    read_dataset_meta(root)
    names = shard_names(root)
    push(root / TEMPLATE_DIR, _join(url, TEMPLATE_DIR), storage_options, **push_kwargs)
    reports = {name: push(root / SHARDS_DIR / name, _join(url, SHARDS_DIR, name), storage_options, **push_kwargs)
               for name in names}
    data = json.dumps({"format": DATASET_FORMAT, "version": DATASET_VERSION, "shards": names}).encode()
    fs, path = _filesystem(url, storage_options)
    fs.pipe_file(_join(path, DATASET_FILE), data)
    return DatasetPushReport(url, reports)


def _filesystem(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    from trajstore.remote.location import filesystem, protocol_of

    return filesystem(url if protocol_of(url) else Path(url).resolve().as_uri(), storage_options)


def is_remote_dataset(url: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether ``url`` holds a pushed sharded dataset (its dataset file)."""
    fs, path = _filesystem(url, storage_options)
    return bool(fs.exists(_join(path, DATASET_FILE)))


def remote_shard_names(url: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The shards a pushed dataset lists, in its order.

    Raises:
        FormatError: no dataset file there, a damaged or oversized one, another format, a newer version, or a
            bad shard name in it.
    """
    fs, path = _filesystem(url, storage_options)
    where = _join(url, DATASET_FILE)
    try:
        size = fs.size(_join(path, DATASET_FILE))
    except FileNotFoundError:
        raise FormatError(f"{url} holds no sharded trajstore dataset (no {DATASET_FILE}); push one with "
                          "trajstore push") from None
    if size is None or size > MAX_DATASET_FILE:
        raise FormatError(f"{where}: {size} bytes, more than a dataset file holds ({MAX_DATASET_FILE})")
    meta = loads_bounded(fs.cat_file(_join(path, DATASET_FILE)), source=where, max_depth=8)
    if not isinstance(meta, dict) or meta.get("format") != DATASET_FORMAT:
        raise FormatError(f"{where}: not a {DATASET_FORMAT} file")
    if type(meta.get("version")) is not int or not 1 <= meta["version"] <= DATASET_VERSION:
        raise FormatError(f"{where}: dataset format version {meta.get('version')!r:.20} is not one this trajstore "
                          "reads; upgrade trajstore")
    names = meta.get("shards")
    if not isinstance(names, list):
        raise FormatError(f"{where}: 'shards' must be a list of shard names")
    try:
        checked = [check_shard_name(n) for n in names]
    except (TypeError, ValueError) as exc:
        raise FormatError(f"{where}: {exc}") from None
    if len(set(checked)) != len(checked):
        raise FormatError(f"{where}: a shard is listed twice ({sorted(n for n in set(checked) if checked.count(n) > 1)[:5]})")
    return checked


def pull_dataset(url: str, folder: str | os.PathLike, storage_options: dict[str, Any] | None = None,
                 **pull_kwargs: Any) -> DatasetPullReport:
    """Copy the dataset pushed under ``url`` into the new folder ``folder`` (whole or not at all);
    ``pull_kwargs`` go to :func:`trajstore.remote.pull` for each shard.

    Raises:
        StorageExistsError: ``folder`` is a file or a non-empty folder.
        FormatError: ``url`` holds no dataset (see :func:`remote_shard_names`); the errors of
            :func:`trajstore.remote.pull`.
    """
    from trajstore.remote import pull

    out = Path(folder)
    check_new_folder(out)
    names = remote_shard_names(url, storage_options)
    with staged_folder(out) as staged:
        template = pull(_join(url, TEMPLATE_DIR), staged / TEMPLATE_DIR, storage_options, **pull_kwargs)
        (staged / SHARDS_DIR).mkdir()
        shards = {n: pull(_join(url, SHARDS_DIR, n), staged / SHARDS_DIR / n, storage_options, **pull_kwargs)
                  for n in names}
        write_json_atomic(staged / DATASET_FILE, {"format": DATASET_FORMAT, "version": DATASET_VERSION})
    return DatasetPullReport(url, out, shards, template)
