"""``ShardedDataset``: one dataset folder written by many processes, one shard (buffer folder) each.

::

    from trajstore.shards import ShardedDataset
    ds = ShardedDataset.create("fleet", DictStorage, space, **dict_storage_kwargs_from_space(space))
    rb = ds.writer("robot3")            # in each writer process: a ReplayBuffer of shards/robot3
    rb.extend(steps); rb.end_episode(episode_key="robot3/2026-12-01T10:00:00/7", task="pick")
    reader = ds.reader()                # anywhere: every shard as one read-only buffer

Each shard is an ordinary buffer folder with its own ``writer.lock``, so writers never wait for each other
except for the few milliseconds of a keyed commit (:mod:`~trajstore.shards.keys`). A new shard is a copy
of the dataset's empty ``template/`` buffer, made hidden and renamed into place (:mod:`~trajstore.shards.layout`).
Shards grow without bound (a ring's overwrites would renumber the dataset under its readers).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from trajstore._fs import read_json, staged_folder, write_json_atomic
from trajstore._lock import LOCK_FILE
from trajstore._urls import local_path, refuse_remote_write
from trajstore.errors import FormatError, StorageExistsError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_keys import KEY_FIELD, checked_key
from trajstore.shards.keys import DatasetKeys
from trajstore.shards.layout import (DATASET_FILE, DATASET_FORMAT, DATASET_VERSION, SHARDS_DIR, TEMPLATE_DIR,
                                     check_shard_name, shard_names)
from trajstore.spaces import Space
from trajstore.storages.base import SpaceStorage

#: The dataset file is small; a larger one is refused unread.
MAX_DATASET_FILE = 4 << 20


def read_dataset_meta(path: Path) -> dict[str, Any]:
    """``trajstore-dataset.json`` of ``path``, checked.

    Raises:
        FormatError: no such file (not a dataset folder), not JSON, another format, or a newer version.
    """
    file = path / DATASET_FILE
    if not file.is_file():
        raise FormatError(f"{path} is not a sharded trajstore dataset (no {DATASET_FILE}); a single buffer "
                          "opens with ReplayBuffer.load_from")
    if file.stat().st_size > MAX_DATASET_FILE:
        raise FormatError(f"{file}: {file.stat().st_size} bytes, more than a dataset file holds ({MAX_DATASET_FILE})")
    meta = read_json(file, "the dataset file")
    if not isinstance(meta, dict) or meta.get("format") != DATASET_FORMAT:
        raise FormatError(f"{file}: not a {DATASET_FORMAT} file")
    version = meta.get("version")
    if type(version) is not int or not 1 <= version <= DATASET_VERSION:
        raise FormatError(f"{file}: dataset format version {version!r:.20} is not one this trajstore reads "
                          f"(1..{DATASET_VERSION}); upgrade trajstore")
    return meta


class ShardedDataset:
    """A dataset folder of shards (see the module docstring). Holds no lock and nothing open itself."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, path: str | os.PathLike, storage_cls: type[SpaceStorage], space: Space, *,
               check_bounds: bool = True, **storage_kwargs: Any) -> "ShardedDataset":
        """A new dataset at ``path`` (a new or empty folder) whose shards hold steps of ``space``, laid out as
        ``ReplayBuffer.create(storage_cls, space, **storage_kwargs)`` would (every argument checked by it).

        Raises:
            StorageExistsError: ``path`` is a file or a non-empty folder.
            ReadOnlyError: ``path`` is a URL of object storage (push a local dataset instead).
            the errors of :meth:`ReplayBuffer.create`: nothing is left behind.
        """
        refuse_remote_write(path, "ShardedDataset.create")
        root = Path(local_path(path))
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise StorageExistsError(f"{root} already exists and is not an empty folder; open it with "
                                     "ShardedDataset.open")
        with staged_folder(root) as staged:  # whole or absent: a crash leaves no half-made dataset at root
            staged.mkdir()
            ReplayBuffer.create(storage_cls, space, cache_path=staged / TEMPLATE_DIR, capacity=None,
                                check_bounds=check_bounds, **storage_kwargs).close()
            (staged / SHARDS_DIR).mkdir()
            write_json_atomic(staged / DATASET_FILE, {"format": DATASET_FORMAT, "version": DATASET_VERSION})
        return cls(root)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "ShardedDataset":
        """The dataset at ``path`` (a local folder; read a URL with ``ShardedBuffer.load_from``).

        Raises:
            FormatError: not a dataset folder, or one of a newer format version.
        """
        root = Path(local_path(path))
        read_dataset_meta(root)
        return cls(root)

    @property
    def shards(self) -> list[str]:
        """The names of the shards made so far, sorted (the order of the dataset's global numbering)."""
        return shard_names(self.path)

    def writer(self, shard: str, *, left_open: str = "discard", multiprocessing: bool = False) -> ReplayBuffer:
        """The writable ``ReplayBuffer`` of shard ``shard``, made from the template if it is new.

        Its ``end_episode(episode_key=)`` checks the key against every shard of the dataset and commits under
        the dataset's key lock: a key is committed once in the whole dataset. ``left_open``: what becomes of
        the steps of an episode a killed writer of this shard left unended (see ``ReplayBuffer.load_from``):
        ``"discard"`` (default: an episode is wholly there or absent, the retry records it again) or
        ``"interrupted"`` (kept, flagged, without a key).

        Raises:
            TypeError, ValueError: a bad shard name (letters, digits and ``._-``, up to 128).
            FormatError: the shard's folder is a symbolic link, a ring, or holds another space than the
                dataset's template; the template is missing, a link, or not empty.
            LockedError: another process is writing this shard.
            OSError: the new shard could not be copied (a full disk): nothing of it is left.
            the errors of :meth:`ReplayBuffer.load_from`.
        """
        name = check_shard_name(shard)
        folder = self.path / SHARDS_DIR / name
        if folder.is_symlink():
            raise FormatError(f"{folder} is a symbolic link, not a shard of the dataset {self.path}")
        space = self._template_space()
        if not (folder / "trajstore.json").is_file():
            self._make_shard(folder)
        rb = ReplayBuffer.load_from(folder, read_only=False, left_open=left_open, multiprocessing=multiprocessing)
        try:
            if rb.capacity is not None or rb.space != space:
                raise FormatError(f"{folder} is not a shard of the dataset {self.path}: "
                                  + (f"a ring (capacity={rb.capacity})" if rb.capacity is not None
                                     else "its space is not the template's"))
            rb.share_episode_keys(DatasetKeys(self.path, name))
        except BaseException:
            rb.close()
            raise
        return rb

    def _template_space(self) -> Space:
        """The template's space, the template checked: a real folder holding an empty, unbounded buffer."""
        template = self.path / TEMPLATE_DIR
        if template.is_symlink() or not (template / "trajstore.json").is_file():
            raise FormatError(f"{template}: the dataset's template (an empty buffer folder every new shard copies) "
                              "is missing or a symbolic link")
        with ReplayBuffer.load_from(template) as rb:
            if len(rb) or rb.num_episodes or rb.capacity is not None:
                raise FormatError(f"{template}: the dataset's template must be an empty, unbounded buffer; it holds "
                                  f"{len(rb)} steps (capacity {rb.capacity})")
            return rb.space

    def _make_shard(self, folder: Path) -> None:
        hidden = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:12]}.new")
        try:
            shutil.copytree(self.path / TEMPLATE_DIR, hidden, ignore=shutil.ignore_patterns(LOCK_FILE))
        except (OSError, shutil.Error) as exc:  # a full disk: nothing of the new shard is left
            shutil.rmtree(hidden, ignore_errors=True)
            raise OSError(f"{folder}: the new shard could not be made from {self.path / TEMPLATE_DIR} "
                          f"({str(exc)[:300]})") from None
        try:
            os.rename(hidden, folder)
        except OSError:  # another process made it first (or a stray empty folder is there)
            shutil.rmtree(hidden, ignore_errors=True)
            if not (folder / "trajstore.json").is_file():
                raise

    def reader(self, **kwargs: Any) -> Any:
        """Every shard as one read-only buffer: ``ShardedBuffer.load_from(self.path, **kwargs)``."""
        from trajstore.shards.reader import ShardedBuffer

        return ShardedBuffer.load_from(self.path, **kwargs)

    def has_episode_key(self, key: str) -> bool:
        """Whether any shard has committed an episode with ``episode_key=key`` (reads every shard's log)."""
        key = checked_key(key)
        for name in self.shards:
            with ReplayBuffer.load_from(self.path / SHARDS_DIR / name) as rb:
                if key in rb.episodes.data_values(KEY_FIELD):
                    return True
        return False

    def __repr__(self) -> str:
        return f"ShardedDataset({self.path}, shards={len(self.shards)})"


__all__ = ["ShardedDataset", "read_dataset_meta"]
