"""What a buffer folder holds: leaves, their storages, steps, episodes and bytes on disk."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from trajstore.replay_buffer.replay_buffer import ReplayBuffer
from trajstore.spaces import tree
from trajstore.storages.base import SpaceStorage


@dataclass
class LeafInfo:
    key: str
    storage: str  # class name of the storage holding it
    dtype: str
    shape: tuple[int, ...]
    metadata: dict[str, Any]
    lossless: bool  # read back exactly as written (False for JPEG and video)


@dataclass
class StorageInfo:
    key: str  # key in the DictStorage layout ("*" = every other leaf), "" for a single storage
    storage: str
    config: dict[str, Any]
    nbytes: int  # bytes of its files on disk


@dataclass
class BufferInfo:
    path: str
    steps: int
    capacity: int | None
    total_steps: int
    episodes: int
    complete_episodes: int  # ended with end_episode and whole (none of their steps overwritten)
    interrupted_episodes: int = 0
    final_observations: int = 0  # held episodes with a final observation
    leaves: list[LeafInfo] = field(default_factory=list)
    storages: list[StorageInfo] = field(default_factory=list)
    final_observation_storages: list[StorageInfo] = field(default_factory=list)  # keys inside "observation"

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.storages) + sum(s.nbytes for s in self.final_observation_storages)

    def to_json(self) -> dict[str, Any]:
        """Every field as JSON values (shapes as lists), plus ``nbytes``: what ``trajstore info --json`` prints."""
        return {**asdict(self), "nbytes": self.nbytes}


def describe(path: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> BufferInfo:
    """Open the buffer at ``path`` read-only and summarise it (no data is read).

    ``path`` may be a URL of a published buffer (``s3://bucket/rb``, opened with ``storage_options``
    as by :meth:`ReplayBuffer.load_from`): bytes are then those the bucket holds for each storage,
    from the push's manifest, camera frames included.

    Raises:
        FormatError: not a buffer folder or published buffer; the errors of ``load_from``.
    """
    with ReplayBuffer.load_from(path, read_only=True, storage_options=storage_options) as rb:
        _folder_bytes = _bytes_counter(rb)
        eps = rb.episodes
        info = BufferInfo(str(path), len(rb), rb.capacity, rb.total_steps, len(eps),
                          sum(1 for e in eps if e.done and not e.overwritten), sum(1 for e in eps if e.interrupted),
                          sum(1 for e in eps if e.has_final_observation))
        finals = rb._finals.storage
        if finals is not None:
            for key, sub in (getattr(finals, "storages", None) or {"": finals}).items():
                info.final_observation_storages.append(StorageInfo(key, type(sub).__name__, sub.get_config(),
                                                                   _folder_bytes(sub.cache_path)))
        children = getattr(rb.storage, "storages", None) or {"": rb.storage}
        sep = getattr(rb.storage, "nested_separator", "/")
        for key, sub in children.items():
            info.storages.append(StorageInfo(key, type(sub).__name__, sub.get_config(), _folder_bytes(sub.cache_path)))
        holder = leaf_holders(rb.storage)
        for path, leaf in tree.leaves(rb.space):  # in the space's order
            sub = holder[path]
            info.leaves.append(LeafInfo(sep.join(path), type(sub).__name__, str(leaf.dtype),
                                        tuple(getattr(leaf, "shape", ())), leaf.metadata.to_json(), sub.lossless))
    return info


def leaf_holders(storage: SpaceStorage) -> dict[tuple[str, ...], SpaceStorage]:
    """Leaf path -> the storage holding it: a ``DictStorage``'s sub-storage, or ``storage`` itself."""
    children = getattr(storage, "storages", None) or {"": storage}
    sep = getattr(storage, "nested_separator", "/")
    holder = {}
    for key, sub in children.items():
        prefix = () if key in ("", "*") else tree.parse_name(key, sep)
        for path in tree.leaf_paths(sub.space):
            holder[(*prefix, *path)] = sub
    return holder


def _bytes_counter(rb: ReplayBuffer) -> Callable[[Path | None], int]:
    """Bytes of the files under a storage folder: on disk, or for a buffer opened from a URL, as the
    manifest lists them (its local mirror holds only the small files)."""
    remote = rb._remote
    if remote is None:
        return _local_bytes
    mirror, files = Path(remote.path).resolve(), remote.payload.manifest.files

    def published_bytes(folder: Path | None) -> int:
        if folder is None:
            return 0
        prefix = Path(folder).resolve().relative_to(mirror).as_posix() + "/"
        return sum(entry.size for relpath, entry in files.items() if relpath.startswith(prefix))

    return published_bytes


def _local_bytes(path: Path | None) -> int:
    if path is None:
        return 0
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
