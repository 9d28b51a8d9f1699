"""Opening the shards of a dataset folder for reading: the dataset file checked, each shard opened read-only
and checked against the dataset's space. File checks and ``ReplayBuffer.load_from`` only."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from trajstore._urls import local_path
from trajstore.damage import DamagedBufferWarning
from trajstore.errors import FormatError
from trajstore.replay_buffer.remote_open import is_url
from trajstore.shards.dataset import read_dataset_meta
from trajstore.shards.layout import SHARDS_DIR, TEMPLATE_DIR, shard_names
from trajstore.spaces import Space


def dataset_folder(path: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> Path | str:
    """The dataset at ``path``: a local folder (its ``trajstore-dataset.json`` checked), or a URL of a pushed
    dataset (its dataset file read and checked, :mod:`~trajstore.shards.remote`), returned as the URL.

    Raises:
        FormatError: not a dataset (no ``trajstore-dataset.json``), a damaged dataset file, or a newer
            version than this trajstore reads.
    """
    if is_url(path):
        from trajstore.shards.remote import remote_shard_names

        remote_shard_names(str(path), storage_options)
        return str(path).rstrip("/")
    folder = Path(local_path(path))
    if "shards" in read_dataset_meta(folder):  # a pushed copy in a local folder: read as its file:// URL
        from trajstore.shards.remote import remote_shard_names

        url = folder.resolve().as_uri()
        remote_shard_names(url, storage_options)
        return url
    return folder


def listed_shards(where: Path | str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The shards of the dataset at ``where`` (a folder: those committed; a URL: those its dataset file lists)."""
    if isinstance(where, Path):
        return shard_names(where)
    from trajstore.shards.remote import remote_shard_names

    return remote_shard_names(where, storage_options)


def _inside(where: Path | str, *parts: str) -> Path | str:
    return where.joinpath(*parts) if isinstance(where, Path) else "/".join([where, *parts])


def open_shard(folder: Path | str, name: str, storage_options: dict[str, Any] | None = None) -> Any:
    """Shard ``name`` of the dataset at ``folder`` (or URL), opened read-only (a damaged shard's warning is its own).

    Raises:
        FormatError: the shard's folder is damaged (names the shard and its folder).
        ValueError: the shard is a ring (a dataset reads unbounded shards only).
    """
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    where = _inside(folder, SHARDS_DIR, name)
    kwargs = {} if storage_options is None else {"storage_options": storage_options}
    try:
        rb = ReplayBuffer.load_from(where, read_only=True, **kwargs)
    except FormatError as exc:
        raise FormatError(f"shard {name!r} of the dataset {folder} ({where}): {exc}") from exc
    capacity = rb.capacity
    if capacity is not None:
        rb.close()
        raise ValueError(f"shard {name!r} ({where}) is a ring (capacity={capacity}): a sharded dataset reads "
                         "unbounded shards only (create the dataset with capacity=None)")
    return rb


def dataset_space(folder: Path | str, first_shard: Any | None,
                  storage_options: dict[str, Any] | None = None) -> Space | None:
    """The space of the dataset: its ``template/`` buffer's, else the first shard's (``None``: neither)."""
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    template = _inside(folder, TEMPLATE_DIR)
    if not isinstance(template, Path) or (template / "trajstore.json").is_file():
        kwargs = {} if storage_options is None else {"storage_options": storage_options}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DamagedBufferWarning)
            try:
                with ReplayBuffer.load_from(template, read_only=True, **kwargs) as rb:
                    return rb.space
            except FormatError as exc:
                raise FormatError(f"the template of the dataset {folder} ({template}): {exc}") from exc
    return None if first_shard is None else first_shard.space


def check_space(folder: Path | str, name: str, rb: Any, space: Space) -> None:
    """Raise ValueError (naming the shard) unless shard ``name`` (open as ``rb``) has the dataset's ``space``."""
    if rb.space != space:
        raise ValueError(f"shard {name!r} ({_inside(folder, SHARDS_DIR, name)}) has another space than the dataset: "
                         f"{_short(rb.space)} where the dataset has {_short(space)}")


def _short(space: Space) -> str:
    text = repr(space)
    return text if len(text) <= 300 else text[:297] + "..."
