"""Final observations: the observation after an episode's last step, in a storage of its own.

``end_episode(final_observation=obs)`` keeps the observation the environment returned after the
last step (the one no step holds). The step space must have an ``observation`` key; final
observations are values of that subspace, stored in ``<buffer>/final_observations/``, a storage
made (at the first one) with the routing of the buffer's ``observation`` subtree: a camera leaf
the buffer keeps as JPEG or PNG frames is kept as JPEG or PNG frames with the same options, the
other leaves go to the storage class holding them in the buffer. A leaf the buffer keeps as
video goes to JPEG frames (quality 95): each episode adds one frame and commits it at once, which
would make one video file per frame.

Final observation number ``n`` (the ``n``-th stored, see
:class:`~trajstore.replay_buffer.episodes.EpisodeTable`) lives in slot ``n`` of an unbounded
buffer, and in slot ``n % capacity`` of a ring: a ring of ``capacity`` steps holds at most
``capacity`` episodes, so a slot is written again only after the episode that used it has left
the committed episode table. The storage is written and flushed before the metadata that names
the episode's number (data first, then metadata).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._lock import WriterLock
from trajstore.errors import FormatError
from trajstore.spaces import DictSpace, Space, tree
from trajstore.storages._payload import PayloadSource, payload_under
from trajstore.storages._selection import Selection, from_slots, select, span
from trajstore.storages.base import STORAGE_TYPES, SpaceStorage
from trajstore.storages.dict import REST, DictStorage

#: Folder of the final observation storage inside the buffer folder.
FINAL_DIR = "final_observations"
OBSERVATION = "observation"


def observation_space(space: Space) -> Space | None:
    """The ``observation`` subspace of a step space, or ``None`` if it has none."""
    spaces = getattr(space, "spaces", None)
    return spaces.get(OBSERVATION) if isinstance(space, DictSpace) else None


def routing_like(storage: SpaceStorage, obs_space: Space) -> tuple[type[SpaceStorage], dict[str, Any]]:
    """``(storage class, create options)`` that store ``obs_space`` as ``storage`` stores the
    buffer's ``observation`` subtree (see the module docstring for video leaves)."""
    if not isinstance(storage, DictStorage):
        return _like(storage)
    sep = storage.nested_separator
    prefix = OBSERVATION + sep
    if OBSERVATION in storage.storages:  # the whole subtree in one storage
        return _like(storage.storages[OBSERVATION])
    inner = {key[len(prefix):]: sub for key, sub in storage.storages.items() if key.startswith(prefix)}
    if not isinstance(obs_space, DictSpace):  # a single leaf, held by the rest storage
        return _like(storage.storages[REST])
    if REST in storage.storages:
        inner[REST] = storage.storages[REST]
    classes, key_kwargs = {}, {}
    for key, sub in inner.items():
        classes[key], key_kwargs[key] = _like(sub)
    return DictStorage, {"storage_cls_map": classes, "key_kwargs": key_kwargs, "nested_separator": sep}


def _like(sub: SpaceStorage) -> tuple[type[SpaceStorage], dict[str, Any]]:
    from trajstore.storages.frames.image import ImageStorage
    from trajstore.storages.frames.video import VideoStorage

    if isinstance(sub, VideoStorage):
        return ImageStorage, {}
    config = sub.get_config()
    return type(sub), {o.name: config[o.name] for o in type(sub).options if o.name in config}


class FinalObservations:
    """The final observation storage of one buffer, made on first use.

    Attributes:
        space: the ``observation`` subspace, or ``None`` when the step space has none.
        storage: the open storage, or ``None`` until the first final observation is stored.
    """

    def __init__(self, space: Space, *, folder: Path | None, capacity: int | None, read_only: bool,
                 multiprocessing: bool):
        self.space = observation_space(space)
        self.folder = folder  # the buffer folder
        self.capacity = capacity
        self.read_only = read_only
        self.multiprocessing = multiprocessing
        self.storage: SpaceStorage | None = None
        self._unflushed = False  # written since the last flush (end_episode(flush=False) defers it to the commit)

    def descriptor(self) -> dict[str, Any] | None:
        """``{"type", "dir"}`` for ``trajstore.json`` once the storage exists, else ``None``."""
        return None if self.storage is None else {"type": self.storage.type_name, "dir": FINAL_DIR}

    def open(self, meta: dict[str, Any], lock: WriterLock | None, final_count: int,
             payload: PayloadSource | None = None) -> None:
        """Open the storage named by a buffer's metadata (nothing if it names none). ``payload``: the
        source of the buffer folder's payload files (``None``: local disk).

        Raises:
            FormatError: a bad entry, a missing or damaged storage, or fewer slots than ``final_count`` needs.
        """
        entry = meta.get("final_observations")
        if entry is None or self.storage is not None:
            return
        if not isinstance(entry, dict) or entry.get("dir") != FINAL_DIR or self.space is None or self.folder is None:
            raise FormatError(f"{self.folder / 'trajstore.json'}: bad final_observations entry {entry!r:.200}")
        self.storage = STORAGE_TYPES.get(entry["type"])._load_owned(
            self.folder / FINAL_DIR, self.space, capacity=self.capacity, read_only=self.read_only,
            multiprocessing=self.multiprocessing, lock=lock, payload=payload_under(payload, FINAL_DIR))
        if self.capacity is None and len(self.storage) < final_count:
            raise FormatError(f"{self.folder / FINAL_DIR}: {final_count} final observations are recorded but the "
                              f"storage holds {len(self.storage)}")

    def validated(self, value: Any, *, check_bounds: bool = True) -> list[np.ndarray]:
        """``value`` checked as one observation: leaf arrays with a leading axis of 1.

        Raises:
            ValueError: the step space has no ``observation`` key.
            InvalidValueError: ``value`` does not fit the observation space (names the leaf).
        """
        if self.space is None:
            raise ValueError("final_observation= needs a step space with an 'observation' key (the final "
                             "observation is stored like it); this buffer's space has none")
        checked = self.space.validate(value, batched=False, path="final_observation", check_bounds=check_bounds)
        return [np.asarray(v)[None] for v in tree.flatten(self.space, checked)]

    def write(self, n: int, leaves: list[np.ndarray], *, layout_of: SpaceStorage, lock: WriterLock | None) -> None:
        """Store final observation number ``n`` (validated leaves), not flushed (:meth:`flush`, at the
        commit that names it); the storage is made on first use with the routing of ``layout_of``."""
        if self.storage is None:
            self._create(layout_of, lock)
        storage = self.storage
        assert storage is not None
        slot = n % self.capacity if self.capacity is not None else n
        if self.capacity is not None or slot < len(storage):  # a crash may have left unnamed slots: reuse them
            storage.write_leaves(span(slot, slot + 1), leaves)
        else:
            storage.extend_leaves(leaves, 1)
        self._unflushed = True

    def flush(self) -> None:
        """Make the final observations written since the last flush durable (nothing if none)."""
        if self._unflushed and self.storage is not None:
            self.storage.flush()
            self._unflushed = False

    def _create(self, layout_of: SpaceStorage, lock: WriterLock | None) -> None:
        assert self.space is not None
        path = self.folder / FINAL_DIR if self.folder is not None else None
        cls, options = routing_like(layout_of, self.space)
        plan = cls.prepare(self.space, capacity=self.capacity, cache_path=path, **options)
        if path is not None and path.exists():
            shutil.rmtree(path)  # left by a writer that died before committing it: nothing names it
        self.storage = cls._create_owned(self.space, capacity=self.capacity, path=path, plan=plan,
                                         multiprocessing=self.multiprocessing, lock=lock)

    def read(self, n: int) -> Any:
        """Final observation number ``n``: nested and typed as ``rb[i]["observation"]``."""
        assert self.storage is not None
        slot = n % self.capacity if self.capacity is not None else n
        return self.storage.read(select(slot, len(self.storage)))

    def read_leaves(self, numbers: np.ndarray) -> list[np.ndarray]:
        """Final observations ``numbers`` (int64 ``(N,)``, distinct) in one storage read: leaf arrays
        ``(N, ...)`` in :func:`trajstore.spaces.tree.leaves` order of the observation space.

        Raises:
            FormatError: no storage yet, or a slot past its end (the metadata names more than it holds).
        """
        slots = numbers % self.capacity if self.capacity is not None else np.asarray(numbers, np.int64)
        storage = self.storage
        if storage is None or (len(slots) and (int(slots.min()) < 0 or int(slots.max()) >= len(storage))):
            held = 0 if storage is None else len(storage)
            raise FormatError(f"{self.folder}: final observations {np.asarray(numbers).tolist()[:5]} are named "
                              f"but the final observation storage holds {held}")
        sel = from_slots(slots.astype(np.int64, copy=False))
        values = storage.read_leaves(Selection(sel.slots))
        return values if sel.order is None else [v[sel.order] for v in values]

    def refresh(self, meta: dict[str, Any], final_count: int) -> None:
        """A reader: open the storage if the writer made it since, else see what it flushed."""
        if self.storage is None:
            self.open(meta, None, final_count)
        else:
            self.storage.refresh()

    def close(self) -> None:
        if self.storage is not None:
            self.storage.close()
