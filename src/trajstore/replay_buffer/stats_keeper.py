"""The buffer's normalisation statistics: kept up to date as steps are written, committed with the
metadata in ``stats.json``. No data reads (computing from the data is in
:mod:`~trajstore.replay_buffer.statistics`).

What is accumulated: the staged leaf arrays of each block, on the background writer thread right
after the block's storage writes succeeded (no read-back, no second decode of the frames). A block
that failed is not counted, and nothing after it is written, so the accumulator covers exactly the
steps numbered ``[first, stop)`` that reached the storage. Image statistics are therefore of the
frames as appended; after JPEG or video compression the stored frames differ by about one level.

When the accumulator stops describing the held steps it is dropped ("stale") and the statistics
are recomputed from the held steps on the next ``rb.stats()``: a ring that drops its oldest steps,
a block longer than the ring, a discard after a mid-episode ``flush()``. ``discard_episode`` after
``end_episode`` (the usual case) restores the copy taken at the episode boundary instead.

On disk (crash safety): at each commit, after the storage is flushed, ``stats.json`` is replaced
atomically (only when the statistics changed) and then ``trajstore.json`` names it by a fresh
random ``id``, with the step range it covers::

    trajstore.json:  "stats": {"file": "stats.json", "id": "9f...", "first": 0, "stop": 1200}
    stats.json:      {"format": "trajstore.stats", "version": 2, "id": "9f...", "first": 0, "stop": 1200,
                      "leaves": {"observation/pixels": {"moments": {...}, "histogram": {...}}, ...}}

Its size is bounded per leaf whatever the leaf's shape (the reduction rule of
:mod:`~trajstore.replay_buffer.leaf_stats`): five float64 moments per stat cell and at most 65,536
histogram counts (only the nonzero ones are written), e.g. about 20 KB for a (240, 320) float32
depth camera, so rewriting it at every commit costs little next to the episode's own data.
Version 1 (trajstore before the rule) reduced every non-image leaf per element: such a file is read
when each leaf's cells and bins are those of the rule (a camera and small vectors, the usual case),
else ignored, and the statistics are computed from the data (and committed by a writer). The two
versions have the same form; a file is written as version 1 when every leaf has the cells version 1
gave it, so that an older trajstore still reads the usual buffers' statistics (it refuses a version-2
file as not fitting the buffer: it would have kept a large leaf per element). The
histograms of a version-1 file keep the widths they had (ranges grown by doubling: up to
``4 (max - min) / bins``), which ``quantile_error`` reports.

A crash between the two writes leaves ``trajstore.json`` naming the previous ``id``: the file does
not match and is ignored. ``trajstore.json`` without ``"stats"`` (a stale accumulator, a ring's
view being shrunk before an overwrite, a folder written by an older trajstore) means: compute from
the data. Older trajstore versions ignore the key; the format version stays 2.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._damage import damaged_file
from trajstore._fs import read_json, write_json_atomic
from trajstore.errors import FormatError, InvalidValueError
from trajstore.replay_buffer.leaf_stats import LeafAccumulator, check_leaves, has_stats
from trajstore.replay_buffer.metadata import META_FILE
from trajstore.replay_buffer.ring import RingState
from trajstore.spaces import Space, tree

STATS_FILE = "stats.json"
STATS_FORMAT = "trajstore.stats"
STATS_VERSION = 2


class RangeStats:
    """Accumulators of the numeric leaves (name -> :class:`LeafAccumulator`) over step numbers ``[first, stop)``.

    Per-element float leaves with as many bins (joints, velocities, actions, rewards) are counted
    as one accumulator of all their elements side by side (:meth:`LeafAccumulator.joined`): one
    pass of NumPy calls per block instead of one per leaf, the same result per element.
    """

    def __init__(self, space: Space, first: int, stop: int, leaves: dict[str, LeafAccumulator] | None = None):
        self.first, self.stop = first, stop
        if leaves is None:
            leaves = {tree.path_name(path): LeafAccumulator(leaf)
                      for path, leaf in tree.leaves(space) if has_stats(leaf)}
        self._templates = leaves  # per leaf: its shape and type (its counts are in `_units` once joined)
        names = list(leaves)
        keyed: dict[Any, list[int]] = {}
        self._units: list[tuple[list[int], LeafAccumulator]] = []  # (positions in `names`, accumulator)
        for k, name in enumerate(names):
            key = leaves[name].joinable()
            if key is None:
                self._units.append(([k], leaves[name]))
            else:
                keyed.setdefault(key, []).append(k)
        for ks in keyed.values():
            parts = [leaves[names[k]] for k in ks]
            self._units.append((ks, parts[0] if len(ks) == 1 else LeafAccumulator.joined(parts)))

    @property
    def leaves(self) -> dict[str, LeafAccumulator]:
        """Name -> accumulator of each numeric leaf, in tree order (copies for joined leaves)."""
        names = list(self._templates)
        out: dict[str, LeafAccumulator] = {}
        for ks, acc in self._units:
            if len(ks) == 1:
                out[names[ks[0]]] = acc
                continue
            start = 0
            for k in ks:
                template = self._templates[names[k]]
                out[names[k]] = acc.part(start, template)
                start += int(np.prod(template.shape, dtype=np.int64))
        return {name: out[name] for name in names}

    def covers(self, ring: RingState) -> bool:
        """True if these are the statistics of exactly the steps ``ring`` holds."""
        return self.first == ring.first_step and self.stop == ring.appended

    def add(self, leaves: list[np.ndarray], n: int, indices: list[int]) -> None:
        """Count ``n`` steps given as every leaf of the space (tree order); ``indices`` picks the numeric ones."""
        for ks, acc in self._units:
            if len(ks) == 1:
                acc.add(leaves[indices[ks[0]]])
            else:
                acc.add(np.concatenate([leaves[indices[k]].reshape(n, -1) for k in ks], axis=1))
        self.stop += n

    def copy(self) -> "RangeStats":
        twin = RangeStats.__new__(RangeStats)
        twin.first, twin.stop, twin._templates = self.first, self.stop, self._templates
        twin._units = [(ks, acc.copy()) for ks, acc in self._units]
        return twin

    def to_json(self, stats_id: str) -> dict[str, Any]:
        """The stats file's content; version 1 when every leaf has the cells version 1 gave it (so that an
        older trajstore reads it), else :data:`STATS_VERSION`."""
        leaves = self.leaves
        version = 1 if all(acc.version_1_cells for acc in leaves.values()) else STATS_VERSION
        return {"format": STATS_FORMAT, "version": version, "id": stats_id, "first": self.first,
                "stop": self.stop, "leaves": {k: v.to_json() for k, v in leaves.items()}}

    @classmethod
    def from_json(cls, space: Space, data: dict[str, Any]) -> "RangeStats | None":
        """The statistics of a stats file; None for a version-1 file whose leaves were reduced otherwise
        than :func:`~trajstore.replay_buffer.leaf_stats.reduction` says (compute them from the data).

        Raises FormatError if ``data`` is not a stats file for ``space``.
        """
        try:
            version = int(data.get("version", 0))
            if data.get("format") != STATS_FORMAT or not 1 <= version <= STATS_VERSION:
                raise ValueError(f"not a {STATS_FORMAT} file of version 1 to {STATS_VERSION}")
            leaves = {}
            for p, leaf in tree.leaves(space):
                if not has_stats(leaf):
                    continue
                entry = data["leaves"][tree.path_name(p)]
                if version == 1 and not LeafAccumulator.fits(leaf, entry):
                    return None
                leaves[tree.path_name(p)] = LeafAccumulator.from_json(leaf, entry)
            return cls(space, int(data["first"]), int(data["stop"]), leaves)
        except Exception as exc:  # noqa: BLE001 - any damage; the caller names the file
            raise FormatError(f"statistics file does not fit the buffer: {type(exc).__name__}: {exc}") from exc


class StatsKeeper:
    """A buffer's statistics: the live accumulator (writer), the copy at the last episode boundary,
    and the descriptor ``trajstore.json`` names (``{"file", "id", "first", "stop"}`` or None)."""

    def __init__(self, space: Space):
        """Raises InvalidValueError (naming the leaf) for a bad ``"stats"`` mark in the leaves' metadata."""
        check_leaves(space)
        self.space = space
        self.indices = [i for i, (_, leaf) in enumerate(tree.leaves(space)) if has_stats(leaf)]
        self._lock = threading.Lock()  # the writer thread updates `live` while the caller commits
        self.live: RangeStats | None = None
        self._boundary: RangeStats | None = None
        self._changed = True  # live changed since stats.json was last written
        self.descriptor: dict[str, Any] | None = None

    # -- writer ----------------------------------------------------------------------------
    def start(self, ring: RingState) -> None:
        """A new, empty buffer: statistics of no steps."""
        with self._lock:
            self.live, self._changed = RangeStats(self.space, ring.first_step, ring.appended), True

    def adopt(self, folder: Path, meta: dict[str, Any], ring: RingState) -> None:
        """A writer reopens the folder: continue from the committed statistics if they cover ``ring``
        (else stale, or empty when ``ring`` holds no step)."""
        live = self.load(folder, meta, ring)
        with self._lock:
            if live is None and ring.count == 0:
                live = RangeStats(self.space, ring.first_step, ring.appended)
            self.live, self._changed = live, self.descriptor is None or live is None

    def replace(self, live: RangeStats) -> None:
        """Statistics computed from the data replace a stale accumulator (committed at the next commit)."""
        with self._lock:
            self.live, self._changed = live, True

    def on_written(self, before: RingState, after: RingState, leaves: list[np.ndarray], n: int) -> None:
        """On the writer thread: block ``leaves`` (``n`` steps numbered from ``before.appended``) reached
        the storage, giving ``after``. Counted if the accumulator still describes the held steps."""
        with self._lock:
            live = self.live
            if live is None:
                return
            if live.stop != before.appended or live.first != after.first_step:
                self.live = None  # steps left the view (a ring's overwrite): recompute on demand
                return
            live.add(leaves, n, self.indices)
            self._changed = True

    def mark_boundary(self, ring: RingState) -> None:
        """An episode boundary was committed: keep a copy to go back to on ``discard_episode``."""
        with self._lock:
            if self.live is not None and self.live.covers(ring):
                self._boundary = self.live.copy()

    def on_overwrite(self) -> None:
        """Held steps were rewritten in place (``set_at``): the accumulator and the boundary copy no longer
        describe them; the statistics are computed from the data on demand (and committed then)."""
        with self._lock:
            self.live, self._boundary, self._changed = None, None, True

    def on_rewind(self, ring: RingState) -> None:
        """The newest steps were discarded: go back to the boundary copy if it covers ``ring``, else stale."""
        with self._lock:
            if self.live is not None and self.live.covers(ring):
                return
            boundary = self._boundary
            self.live = boundary.copy() if boundary is not None and boundary.covers(ring) else None
            self._changed = True

    def commit(self, folder: Path, ring: RingState) -> dict[str, Any] | None:
        """Before ``trajstore.json`` is written for ``ring``: write ``stats.json`` if it changed and
        return the descriptor to put in the metadata (None when the statistics do not cover ``ring``)."""
        with self._lock:
            live = self.live
            if live is None or not live.covers(ring):
                self.descriptor = None
                return None
            if self._changed or self.descriptor is None:
                stats_id = uuid.uuid4().hex
                # Compact JSON: rewritten at commits. No fsync of the folder here: the metadata's rename,
                # in the same folder, is fsynced after it, and a rename lost to a power cut leaves an id
                # the metadata does not name (ignored: statistics recomputed from the data).
                try:
                    write_json_atomic(folder / STATS_FILE, live.to_json(stats_id), indent=None, sync_folder=False)
                except InvalidValueError:
                    # Sums of finite values can overflow (1e308 + 1e308 = inf), which JSON cannot hold: the
                    # steps are committed without statistics (readers compute them from the data), never lost.
                    self.descriptor = None
                    return None
                self.descriptor = {"file": STATS_FILE, "id": stats_id, "first": live.first, "stop": live.stop}
                self._changed = False
            return dict(self.descriptor)

    # -- readers ---------------------------------------------------------------------------
    def load(self, folder: Path, meta: dict[str, Any], ring: RingState) -> RangeStats | None:
        """The committed statistics that ``meta`` names, if they cover ``ring`` and ``stats.json`` still
        holds them (None: a writer replaced it since ``meta`` was read, or none were committed).

        Raises:
            FormatError: the file is damaged or does not fit the space.
        """
        desc = meta.get("stats")
        self.descriptor = desc
        if not isinstance(desc, dict) or desc.get("file") != STATS_FILE:
            return None
        with damaged_file(folder / META_FILE, "its stats entry"):
            covered = int(desc.get("first", -1)), int(desc.get("stop", -1))
        if covered != (ring.first_step, ring.appended):
            return None
        with damaged_file(folder / STATS_FILE):
            try:
                data = read_json(folder / STATS_FILE, "replay buffer statistics")
            except FormatError:
                if not (folder / STATS_FILE).exists():
                    return None
                raise
            if not isinstance(data, dict) or data.get("id") != desc.get("id"):
                return None
            stats = RangeStats.from_json(self.space, data)
        return stats if stats is not None and stats.covers(ring) else None
