"""``ShardedBuffer``: every shard of a dataset folder read as one read-only replay buffer.

``ShardedBuffer.load_from(path)`` opens each committed shard (:func:`~trajstore.shards.layout.shard_names`;
for the URL of a pushed dataset, those its dataset file lists: :mod:`~trajstore.shards.remote`)
read-only with ``ReplayBuffer.load_from`` and shows them as one buffer: ``len``, ``[i]``/``get_at`` (an
int, a slice, an int array in any order with repeats, a bool mask), ``episodes``, ``episode(k)``,
``get_episode``, ``final_observation``, ``sample``, ``sample_windows``, ``window_request``,
``count_anchors``, ``anchors_at``, ``windows_at``, ``sample_transitions``, ``select_episodes``,
``split_episodes``, ``stats()``, the torch datasets (``ReplayBufferDataset(reader)`` or the dataset's
path) and Ray Data (``read_trajstore(path)``). These are the replay buffer's own code
(:class:`~trajstore.replay_buffer.training_api.TrainingAPI`) over a concatenating storage
(:mod:`~trajstore.shards.concat_storage`) and the concatenated view (:mod:`~trajstore.shards.catalog`).

**Numbering.** Global steps and episodes are the shards' in name order, concatenated: shard 0's steps
first, then shard 1's, ...; episode ``id`` = its position. Episodes never straddle shards, so windows
and transitions stay inside one shard's episode. Each shard shows its committed steps only; a shard's
open episode shows as open (``done`` False, not ``interrupted``). **The numbering changes on**
:meth:`ShardedBuffer.refresh` when a shard other than the last grew (as a ring's logical indices move):
name an episode stably by ``(shard, local id)`` (:meth:`ShardedBuffer.locate_episode`) or by the
``episode_key`` writers put in its data (:meth:`ShardedBuffer.find_episode`). Copies sent to other
processes (pickling, DataLoader workers, Ray tasks) show the same steps as the original
(:attr:`ShardedBuffer.shard_steps`), so indices agree between processes until they refresh.

**Statistics** (``stats()``) are the shards' own (committed by each writer, else computed by the shard
from its data) merged leaf by leaf (:mod:`~trajstore.shards.statistics`): count, min, max, mean and std
equal NumPy's over the union of the steps shown; quantiles are within their ``quantile_error``. A copy
pinned to older counts (above) merges each shard's statistics of all its committed steps.

Ring shards are refused (a dataset's shards are unbounded: ``capacity=None``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from trajstore.damage import Damage, DamagedPart
from trajstore.errors import FormatError
from trajstore.replay_buffer.episode import Episode
from trajstore.replay_buffer.final_observations import observation_space
from trajstore.replay_buffer.reads import BufferReads
from trajstore.replay_buffer.training_api import TrainingAPI
from trajstore.replay_buffer.view import FixedView
from trajstore.shards.catalog import Catalog, catalog, shard_part
from trajstore.shards.concat_storage import ConcatFinals, ConcatStorage
from trajstore.shards.episodes import ShardEpisodes
from trajstore.shards.opening import check_space, dataset_folder, dataset_space, listed_shards, open_shard
from trajstore.shards.statistics import merged_stats
from trajstore.spaces import Space


class _Views(FixedView):
    """The reads' view: the reader's current catalog's (replaced as a whole by a refresh)."""

    def __init__(self, reader: "ShardedBuffer"):
        self._reader, self.name = reader, str(reader.cache_path)

    def current(self) -> Any:
        return self._reader._catalog().view

    latest = current


class ShardedBuffer(TrainingAPI):
    """The shards of a dataset folder as one read-only buffer (see the module docstring). Build it with
    :meth:`load_from`; close it (or use ``with``)."""

    own_is_pad = False

    def __init__(self, folder: Path, space: Space, buffers: dict[str, Any], pins: Mapping[str, int] | None,
                 storage_options: dict[str, Any] | None):
        self.cache_path, self.space = folder, space
        self.storage_options = storage_options
        self.closed = False
        self._buffers = buffers
        self._pinned = pins is not None
        self._cat = catalog([shard_part(n, b, None if pins is None else pins[n]) for n, b in buffers.items()])
        self._stats: tuple[Catalog, Any] | None = None
        self.storage = ConcatStorage(space, self._catalog, self._on_stale, folder)
        self._finals = ConcatFinals(self._catalog, observation_space(space))
        self._reader = BufferReads(self.storage, space, self._finals, _Views(self))  # type: ignore[arg-type]

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def load_from(cls, path: str | os.PathLike, *, storage_options: dict[str, Any] | None = None,
                  steps: Mapping[str, int] | None = None) -> "ShardedBuffer":
        """Open the dataset folder at ``path`` read-only: every committed shard, as one buffer.

        Args:
            path: the dataset folder (holding ``trajstore-dataset.json``).
            storage_options: passed to each shard's ``ReplayBuffer.load_from``.
            steps: ``{shard: steps}`` (a reader's :attr:`shard_steps`): show only those shards and their
                first steps, as the reader they came from did (what copies sent to other processes use);
                :meth:`refresh` then shows everything committed. Default: every committed step.

        Raises:
            FormatError: not a dataset folder, a damaged or newer dataset file, or a damaged shard (the
                message names the shard and its folder); a shard of ``steps`` that is not there.
            ValueError: a shard whose space is not the dataset's (its ``template/``'s, else the first
                shard's; names the shard), a ring shard, or a URL.
        """
        folder = dataset_folder(path, storage_options)
        names = listed_shards(folder, storage_options) if steps is None else list(steps)
        buffers: dict[str, Any] = {}
        try:
            for name in names:
                if steps is not None and name not in listed_shards(folder, storage_options):
                    raise FormatError(f"shard {name!r} of the dataset {folder} is not there (it was when the "
                                      "reader that was copied opened it)")
                buffers[name] = open_shard(folder, name, storage_options)
            space = dataset_space(folder, next(iter(buffers.values()), None), storage_options)
            if space is None:
                raise FormatError(f"the dataset {folder} has neither a template/ nor a shard: its space is unknown")
            for name, rb in buffers.items():
                check_space(folder, name, rb, space)
            return cls(folder, space, buffers, steps, storage_options)
        except BaseException:
            for rb in buffers.values():
                rb.close()
            raise

    def refresh(self) -> bool:
        """See what the shards' writers committed since, and shards made since (opened now). Returns True
        if anything changed. Global step and episode numbers move when a shard other than the last grew.

        Raises:
            FormatError, ValueError: a new shard that is damaged or has another space (as :meth:`load_from`;
                nothing changes then).
        """
        self._check_open()
        changed = self._pinned
        for rb in self._buffers.values():
            changed |= bool(rb.refresh())
        new = [n for n in listed_shards(self.cache_path, self.storage_options) if n not in self._buffers]
        opened: dict[str, Any] = {}
        try:
            for name in new:
                opened[name] = open_shard(self.cache_path, name, self.storage_options)
                check_space(self.cache_path, name, opened[name], self.space)
        except BaseException:
            for rb in opened.values():
                rb.close()
            raise
        if opened:
            self._buffers = {n: {**self._buffers, **opened}[n] for n in sorted({*self._buffers, *opened})}
            changed = True
        if changed:
            self._cat = catalog([shard_part(n, b) for n, b in self._buffers.items()])
            self._pinned = False
        return changed

    def _on_stale(self) -> None:
        self.refresh()

    def flush(self) -> None:
        """Nothing to write (the dataset is read-only here)."""

    def close(self) -> None:
        """Close every shard. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for rb in self._buffers.values():
            rb.close()

    def __enter__(self) -> "ShardedBuffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Any:
        """Pickle as the folder and :attr:`shard_steps`: the copy reopens the shards read-only and shows the
        same steps (a writer's discard of steps the original showed is not seen by the copy)."""
        return (_reopen, (str(self.cache_path), self.storage_options, self.shard_steps))

    # -- what it is --------------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        return True

    @property
    def capacity(self) -> None:
        return None

    @property
    def published_snapshot(self) -> None:
        return None

    @property
    def shard_names(self) -> tuple[str, ...]:
        """The shards shown, in the numbering's order."""
        return tuple(p.name for p in self._catalog().parts)

    @property
    def shards(self) -> dict[str, Any]:
        """``{name: ReplayBuffer}``: the shards, open read-only (owned by this reader: do not close them)."""
        return dict(self._buffers)

    @property
    def shard_steps(self) -> dict[str, int]:
        """``{shard: steps shown}``, in order (what :meth:`load_from` takes as ``steps``)."""
        return {p.name: p.appended for p in self._catalog().parts}

    @property
    def damaged(self) -> Damage:
        """The shards' damage (:class:`~trajstore.damage.Damage`) with global episode ids; parts named
        ``"<shard>:<part>"``."""
        cat = self._catalog()
        parts, episodes, steps = [], set(), 0
        for s, p in enumerate(cat.parts):
            damage = p.buffer.damaged
            if not damage:
                continue
            ids = p.local_ids
            glob = lambda e: tuple(int(cat.episodes[s] + np.searchsorted(ids, i)) for i in e)  # noqa: E731
            for d in damage.parts:
                parts.append(DamagedPart(f"{p.name}:{d.part}", d.path, d.problem, glob(d.episodes), d.steps))
            episodes.update(glob(damage.episodes))
            steps += damage.steps
        return Damage(tuple(parts), tuple(sorted(episodes)), steps) if parts else Damage()

    def __len__(self) -> int:
        return int(self._catalog().steps[-1])

    @property
    def total_steps(self) -> int:
        """Steps shown (shards are unbounded: none was overwritten)."""
        return len(self)

    # -- steps and episodes ------------------------------------------------------------------
    def get_at(self, index: Any) -> Any:
        """Steps at global ``index`` (an int, negative from the newest; a slice; a 1-D int array in any order
        with repeats; a bool mask), as ``ReplayBuffer.get_at``; one read per shard per leaf.

        Raises:
            IndexError, TypeError, ValueError: a bad index. FormatError: a damaged shard file (named).
            StaleReadError: a shard's writer discarded an open episode being read; refreshed, index again.
        """
        return self._reads().steps(index)

    def __getitem__(self, index: Any) -> Any:
        return self.get_at(index)

    @property
    def episodes(self) -> ShardEpisodes:
        """Every shard's episodes, shard by shard (global ids; a lazy sequence, see
        :class:`~trajstore.shards.episodes.ShardEpisodes`)."""
        return ShardEpisodes(self._catalog())

    @property
    def num_episodes(self) -> int:
        return self._catalog().count

    def episode(self, k: int) -> Episode:
        """``episodes[k]`` (a position = the global id; negative from the newest). Raises IndexError."""
        return self.episodes[k]

    def get_episode(self, k: int) -> Any:
        """Every step of :meth:`episode` ``(k)`` as a batch."""
        ep = self.episode(k)
        return self.get_at(slice(ep.start, ep.stop))

    def final_observation(self, k: int) -> Any:
        """The final observation of :meth:`episode` ``(k)`` (as ``ReplayBuffer.final_observation``), or ``None``."""
        ep = self.episode(k)
        if not ep.has_final_observation:
            return None
        return self._finals.read(int(self._catalog().view.episodes.finals[ep.id]))

    def locate_episode(self, k: int) -> tuple[str, int]:
        """``(shard name, the shard's own Episode.id)`` of global episode ``k``: a name that does not change
        when the numbering does. Raises IndexError out of range."""
        cat = self._catalog()
        n = cat.count
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not -n <= int(k) < n:
            raise IndexError(f"episode {k!r} is out of range: the dataset holds {n} episodes")
        k = int(k) % n
        s = cat.part_of_episode(k)
        part = cat.parts[s]
        return part.name, int(part.local_ids[k - int(cat.episodes[s])])

    def locate_step(self, i: int) -> tuple[str, int]:
        """``(shard name, index in that shard)`` of global step ``i`` (negative from the newest).
        Raises IndexError out of range."""
        cat = self._catalog()
        n = int(cat.steps[-1])
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not -n <= int(i) < n:
            raise IndexError(f"step {i!r} is out of range: the dataset holds {n} steps")
        i = int(i) % n
        s = cat.part_at_step(i)
        return cat.parts[s].name, i - int(cat.steps[s])

    def global_episode(self, shard: str, local_id: int) -> int:
        """The global id of episode ``local_id`` (its ``Episode.id`` in the shard) of ``shard``.

        Raises:
            KeyError: no such shard shown; IndexError: no such episode shown in it.
        """
        cat = self._catalog()
        for s, part in enumerate(cat.parts):
            if part.name == shard:
                ids = part.local_ids
                j = int(np.searchsorted(ids, local_id))
                if j >= len(ids) or ids[j] != local_id:
                    raise IndexError(f"shard {shard!r} shows no episode with id {local_id} ({len(ids)} episodes)")
                return int(cat.episodes[s]) + j
        raise KeyError(f"no shard {shard!r} in {self.cache_path} (shards: {list(self.shard_names)})")

    def find_episode(self, episode_key: str) -> int | None:
        """The global id of the closed episode whose data has ``episode_key`` (what writers of a dataset put
        there), or ``None``. Scans each shard's episode log once (no per-episode parse)."""
        cat = self._catalog()
        for s, part in enumerate(cat.parts):
            ids = part.rows[0]
            if not len(ids):
                continue
            values = part.view.episodes.store.values(ids, "episode_key")
            for j, v in enumerate(values):
                if v == episode_key:
                    return int(cat.episodes[s]) + j
        return None

    # -- the parts ---------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"the sharded dataset reader of {self.cache_path} is closed")

    def _catalog(self) -> Catalog:
        self._check_open()
        return self._cat

    def _reads(self) -> BufferReads:
        self._check_open()
        return self._reader

    def _statistics(self) -> Any:
        cat = self._catalog()
        if self._stats is None or self._stats[0] is not cat:
            self._stats = (cat, merged_stats(self.space, [p.buffer.range_stats() for p in cat.parts], len(self)))
        return self._stats[1]

    def __repr__(self) -> str:
        if self.closed:
            return f"ShardedBuffer({self.cache_path}, closed)"
        cat = self._cat
        return (f"ShardedBuffer({self.cache_path}, shards={len(cat.parts)}, steps={int(cat.steps[-1])}, "
                f"episodes={cat.count})")


def _reopen(path: str, storage_options: dict[str, Any] | None, steps: dict[str, int]) -> ShardedBuffer:
    """The unpickling side: the dataset reopened read-only, showing the steps the original showed."""
    import warnings

    from trajstore.damage import DamagedBufferWarning

    with warnings.catch_warnings():  # the process that pickled the reader was warned already
        warnings.simplefilter("ignore", DamagedBufferWarning)
        return ShardedBuffer.load_from(path, storage_options=storage_options, steps=steps)


def open_read_only(path: str | os.PathLike, *, multiprocessing: bool = False,
                   storage_options: dict[str, Any] | None = None) -> Any:
    """A folder opened for reading: a :class:`ShardedBuffer` for a sharded dataset, else
    ``ReplayBuffer.load_from(path, read_only=True, ...)`` (what the torch dataset and Ray Data open)."""
    from trajstore._urls import local_path
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer
    from trajstore.replay_buffer.remote_open import is_url
    from trajstore.shards.layout import is_dataset

    if (is_dataset(local_path(path)) if not is_url(path) else _is_remote_dataset(str(path), storage_options)):
        return ShardedBuffer.load_from(path, storage_options=storage_options)
    kwargs: dict[str, Any] = {} if storage_options is None else {"storage_options": storage_options}
    if multiprocessing:
        kwargs["multiprocessing"] = True
    return ReplayBuffer.load_from(path, read_only=True, **kwargs)  # only the keywords given (what Ray's tests spy)


def _is_remote_dataset(url: str, storage_options: dict[str, Any] | None) -> bool:
    from trajstore.shards.remote import is_remote_dataset

    return is_remote_dataset(url, storage_options)
