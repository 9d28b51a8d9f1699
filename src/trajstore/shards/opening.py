"""Opening the shards of a dataset folder for reading: the dataset file checked, each shard opened read-only
and checked against the dataset's space. File checks and ``ReplayBuffer.load_from`` only."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from trajstore._fs import read_json
from trajstore._urls import local_path
from trajstore.damage import DamagedBufferWarning
from trajstore.errors import FormatError
from trajstore.replay_buffer.remote_open import is_url
from trajstore.shards.layout import (DATASET_FILE, DATASET_FORMAT, DATASET_VERSION, SHARDS_DIR, TEMPLATE_DIR,
                                     is_dataset)
from trajstore.spaces import Space


def dataset_folder(path: str | os.PathLike) -> Path:
    """The local dataset folder at ``path``, its ``trajstore-dataset.json`` checked.

    Raises:
        ValueError: a URL (open a pulled copy: ``trajstore pull``).
        FormatError: not a dataset folder (no ``trajstore-dataset.json``), a damaged dataset file, or a newer
            version than this trajstore reads.
    """
    if is_url(path):
        raise ValueError(f"{path}: a sharded dataset is read from a local folder; pull it first")
    folder = Path(local_path(path))
    if not is_dataset(folder):
        raise FormatError(f"{folder} is not a sharded dataset: {folder / DATASET_FILE} does not exist")
    meta = read_json(folder / DATASET_FILE, "sharded dataset description")
    if not isinstance(meta, dict) or meta.get("format") != DATASET_FORMAT:
        raise FormatError(f"{folder / DATASET_FILE}: not a {DATASET_FORMAT!r} file")
    version = meta.get("version")
    if type(version) is not int or not 1 <= version <= DATASET_VERSION:
        raise FormatError(f"{folder / DATASET_FILE}: dataset version {version!r}; this trajstore reads "
                          f"version 1 to {DATASET_VERSION}")
    return folder


def open_shard(folder: Path, name: str, storage_options: dict[str, Any] | None = None) -> Any:
    """Shard ``name`` of the dataset at ``folder``, opened read-only (a damaged shard's warning is its own).

    Raises:
        FormatError: the shard's folder is damaged (names the shard and its folder).
        ValueError: the shard is a ring (a dataset reads unbounded shards only).
    """
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    where = folder / SHARDS_DIR / name
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


def dataset_space(folder: Path, first_shard: Any | None) -> Space | None:
    """The space of the dataset: its ``template/`` buffer's, else the first shard's (``None``: neither)."""
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    template = folder / TEMPLATE_DIR
    if (template / "trajstore.json").is_file():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DamagedBufferWarning)
            try:
                with ReplayBuffer.load_from(template, read_only=True) as rb:
                    return rb.space
            except FormatError as exc:
                raise FormatError(f"the template of the dataset {folder} ({template}): {exc}") from exc
    return None if first_shard is None else first_shard.space


def check_space(folder: Path, name: str, rb: Any, space: Space) -> None:
    """Raise ValueError (naming the shard) unless shard ``name`` (open as ``rb``) has the dataset's ``space``."""
    if rb.space != space:
        raise ValueError(f"shard {name!r} ({folder / SHARDS_DIR / name}) has another space than the dataset: "
                         f"{_short(rb.space)} where the dataset has {_short(space)}")


def _short(space: Space) -> str:
    text = repr(space)
    return text if len(text) <= 300 else text[:297] + "..."
