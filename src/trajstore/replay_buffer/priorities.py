"""Priorities kept with the data: one float32 value per slot for each named *priority set*, on disk in
the buffer folder, with a sum tree in memory (:mod:`~trajstore.replay_buffer.sum_tree`).

**Declaring sets.** ``ReplayBuffer.create(..., priorities=("td",))`` or, on a writer, ``rb.add_priorities("td")``
(an existing folder, one of an older trajstore). A set's name is 1-64 characters of ``[A-Za-z0-9_.-]``,
not starting with ``.`` or ``-``. ``trajstore.json`` names the committed sets under ``"priorities"``; a folder
without that key (older folders, format versions 1-3 without sets) opens with no sets.

**On disk.** Set ``td`` is the files ``priorities/td.0.f32`` and ``priorities/td.1.f32``: raw little-endian
float32, value ``k`` the priority of the step in storage slot ``k`` (slot-aligned with the ring, so a ring
that reuses a slot gives the new step a new priority, and 0 means the slot holds no step). The two files
are generations in turn: a commit writes the file *not* named by ``trajstore.json`` (only the chunks of
16,384 slots that changed since that file was last written), fsyncs it, and then ``trajstore.json`` names
it: ``{"file": "priorities/td.1.f32", "generation": 8, "slots": N, "crc32": C, "max": M}`` (``max``: the
largest priority ever given in the set, what new steps get). A crash leaves the file named, whole.

**No torn tree.** A reader reads the named file and checks its CRC-32 against ``crc32``. The writer rewrites
that file only two commits later, so a reader that lags can read it while it changes: the CRC then
differs, and if ``trajstore.json`` was replaced since the reader's view the view is refreshed and the draw
is made again (:class:`~trajstore.errors.StaleReadError`, which the samplers retry); if it was not
replaced, the file is damaged (:class:`~trajstore.errors.FormatError`). A reader's tree is therefore
always that of one committed generation, masked to the steps its view holds.

**Who writes.** Only the writer changes priorities (``update_priorities``); its sets and trees are live
in memory and reach the folder at the next commit (``flush``, ``end_episode``, ``close``). Readers (other
processes, DataLoader workers) build their trees from the committed files, in ``O(n)``, once per view
(after ``refresh``) and priority exponent.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from trajstore._damage import damaged_file
from trajstore._fs import fsync_dir
from trajstore.errors import FormatError, StaleReadError
from trajstore.replay_buffer.ring import RingState
from trajstore.replay_buffer.sum_tree import SumTree

PRIORITY_DIR = "priorities"
_CHUNK_BITS = 14
CHUNK = 1 << _CHUNK_BITS  # slots per dirty-tracking chunk of a file (16,384 slots, 64 KiB)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def check_name(name: Any) -> str:
    """A priority set's name, checked (see the module docstring).

    Raises:
        TypeError: not a str.
        ValueError: not 1-64 characters of ``[A-Za-z0-9_.-]`` starting with a letter, digit or ``_``.
    """
    if not isinstance(name, str):
        raise TypeError(f"a priority set's name must be a str, got {type(name).__name__}")
    if not _NAME.fullmatch(name):
        raise ValueError(f"priority set name {name!r}: use 1-64 characters of A-Z a-z 0-9 _ . - "
                         "(not starting with . or -)")
    return name


def held_slots(ring: RingState) -> np.ndarray:
    """The slots of the held steps in logical order (oldest first), int64 ``(count,)``."""
    logical = np.arange(ring.count, dtype=np.int64)
    return logical if ring.capacity is None else (logical + ring.head) % ring.capacity


def slots_to_logical(ring: RingState, slots: np.ndarray) -> np.ndarray:
    """Logical indices (0 = oldest held step) of held ``slots`` (int64 ``(B,)``)."""
    return slots if ring.capacity is None else (slots - ring.head) % ring.capacity


def held_mask(ring: RingState, n: int) -> np.ndarray:
    """Bool ``(n,)``: which of the first ``n`` slots hold a step of ``ring``."""
    mask = np.zeros(n, bool)
    slots = held_slots(ring)
    mask[slots[slots < n]] = True
    return mask


def masses(values: np.ndarray, alpha: float) -> np.ndarray:
    """``value ** alpha`` as float64, 0 where the value is 0 (a slot without a step, also for ``alpha = 0``)."""
    values = np.asarray(values, np.float64)
    return np.where(values > 0, values ** alpha, 0.0)


class PrioritySet:
    """The writer's live priorities of one set: values by slot, the running maximum, the tree of one exponent.

    Attributes:
        name: the set's name.
        max: the largest priority ever given (1.0 at first); new steps get it.
        committed: the set's entry in the committed ``trajstore.json`` (``None`` before its first commit).
    """

    def __init__(self, name: str, ring: RingState, values: np.ndarray | None = None, max_value: float = 1.0,
                 committed: dict[str, Any] | None = None):
        self.name, self.max, self.committed = name, float(max_value), committed
        size = ring.capacity if ring.capacity is not None else max(1024, ring.count)
        self.values = np.zeros(size, np.float32)
        if values is not None:  # from the folder: the committed ring's held slots only
            n = min(len(values), size)
            self.values[:n] = values[:n]
            self.values[~held_mask(ring, size)] = 0.0
        else:
            self.values[held_slots(ring)] = self.max
        self.synced = ring  # the ring state the values are those of
        self._tree: SumTree | None = None
        self._alpha = -1.0
        chunks = -(-size // CHUNK)
        self._stale = [np.ones(chunks, bool), np.ones(chunks, bool)]  # chunks each file lacks
        self._file = int(committed["file"].endswith(".1.f32")) if committed else 1  # the one named
        self._dirty = committed is None

    # -- in memory ---------------------------------------------------------------------------
    def _grow(self, slots: int) -> None:
        size = len(self.values)
        while size < slots:
            size *= 2
        if size != len(self.values):
            self.values = np.concatenate((self.values, np.zeros(size - len(self.values), np.float32)))
            chunks = -(-size // CHUNK)
            self._stale = [np.concatenate((s, np.ones(chunks - len(s), bool))) for s in self._stale]
            self._tree = None

    def _set(self, slots: np.ndarray, values: np.ndarray) -> None:
        """Set the values of ``slots`` (int64) in memory and in the live tree; mark their chunks."""
        self.values[slots] = values
        chunks = slots >> _CHUNK_BITS
        self._stale[0][chunks] = True
        self._stale[1][chunks] = True
        self._dirty = True
        if self._tree is not None:
            self._tree.update(slots, masses(self.values[slots], self._alpha))

    def sync(self, ring: RingState) -> None:
        """Bring the values to ``ring`` (the writer's ring now): the steps appended since get :attr:`max`."""
        before = self.synced
        if ring == before:
            return
        new = ring.appended - before.appended
        if new < 0 or ring.first_step < before.first_step:
            self.rewound(ring)  # not through discard_episode's hook: every slot again
            return
        if ring.capacity is None:
            self._grow(ring.count)
        k = min(new, ring.count)
        slots = held_slots(ring)[ring.count - k:] if k < ring.count else held_slots(ring)
        if k >= len(self.values) // 8 and self._tree is not None:
            self._tree = None  # many: one O(n) rebuild instead of k updates
        self._set(slots, np.full(len(slots), self.max, np.float32))
        self.synced = ring

    def rewound(self, ring: RingState) -> None:
        """The writer dropped its newest steps (``discard_episode``): slots no step of ``ring`` holds get 0."""
        gone = np.flatnonzero(~held_mask(ring, len(self.values)) & (self.values > 0))
        if len(gone):
            self._set(gone, np.zeros(len(gone), np.float32))
        self.synced = ring

    def tree(self, alpha: float) -> SumTree:
        """The live tree of masses ``value ** alpha`` (built in ``O(n)`` when ``alpha`` changes)."""
        if self._tree is None or self._alpha != alpha:
            self._tree, self._alpha = SumTree(masses(self.values, alpha)), alpha
        return self._tree

    def update(self, ring: RingState, slots: np.ndarray, values: np.ndarray) -> None:
        """Set held ``slots`` (of ``ring``, synced) to ``values`` (float32, checked)."""
        self._set(slots, values)
        if len(values):
            self.max = max(self.max, float(values.max()))

    def logical_values(self, ring: RingState) -> np.ndarray:
        """The held steps' priorities in logical order, float32 ``(count,)``."""
        return self.values[held_slots(ring)]

    # -- on disk -------------------------------------------------------------------------------
    def commit(self, folder: Path, ring: RingState) -> dict[str, Any]:
        """Write the values of ``ring`` into the file not named now, fsync it; return the new entry
        (``trajstore.json`` names it once written). Unchanged since the last commit: the same entry."""
        self.sync(ring)
        if not self._dirty and self.committed is not None:
            return self.committed
        slots = len(self.values) if ring.capacity is not None else ring.count
        target = 1 - self._file
        rel = f"{PRIORITY_DIR}/{self.name}.{target}.f32"
        path = folder / rel
        path.parent.mkdir(exist_ok=True)
        created = not path.exists()
        data = memoryview(self.values[:slots].view(np.uint8)) if slots else memoryview(b"")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            stale = self._stale[target]
            for chunk in np.flatnonzero(stale[:-(-slots // CHUNK)]).tolist():
                lo, hi = chunk * CHUNK * 4, min(slots, (chunk + 1) * CHUNK) * 4
                os.pwrite(fd, data[lo:hi], lo)
            os.ftruncate(fd, slots * 4)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(path.parent)
        self._stale[target][:] = False
        self._file, self._dirty = target, False
        generation = (self.committed or {}).get("generation", 0) + 1
        self.committed = {"file": rel, "generation": generation, "slots": slots,
                          "crc32": zlib.crc32(data), "max": self.max}
        return self.committed


def check_entry(folder: Path, name: str, entry: Any) -> dict[str, Any]:
    """A set's entry in ``trajstore.json``, checked.

    Raises:
        FormatError: not the entry of a set (names the set and the metadata file).
    """
    keys = ("file", "generation", "slots", "crc32", "max")
    if (not isinstance(entry, dict) or any(k not in entry for k in keys)
            or entry["file"] not in (f"{PRIORITY_DIR}/{name}.0.f32", f"{PRIORITY_DIR}/{name}.1.f32")
            or type(entry["slots"]) is not int or entry["slots"] < 0):
        raise FormatError(f"{folder / 'trajstore.json'}: priority set {name!r} has a bad entry {entry!r:.200}")
    return entry


def read_values(folder: Path, name: str, entry: dict[str, Any]) -> np.ndarray | None:
    """The committed values of a set (float32 ``(slots,)``), or ``None`` when the file's CRC differs from
    the entry's (being rewritten by a writer two commits ahead, or damaged: the caller tells which).

    Raises:
        FormatError: the file is missing or shorter than the entry says (names it).
    """
    path = folder / entry["file"]
    size = entry["slots"] * 4
    with damaged_file(path, f"the priorities of set {name!r}"):
        with open(path, "rb") as f:
            data = f.read(size)
    if len(data) != size:
        raise FormatError(f"{path}: priority set {name!r} should hold {entry['slots']} values, "
                          f"the file holds {len(data) // 4}")
    if zlib.crc32(data) != entry["crc32"]:
        return None
    return np.frombuffer(data, np.float32)


class PriorityKeeper:
    """The writer's priority sets (what its commits write), by name; in memory when ``folder`` is ``None``."""

    def __init__(self, folder: Path | None, sets: dict[str, PrioritySet] | None = None):
        self.folder = folder
        self.sets: dict[str, PrioritySet] = dict(sets or {})

    @classmethod
    def open(cls, folder: Path, meta: dict[str, Any], ring: RingState) -> "PriorityKeeper":
        """The sets ``trajstore.json`` names, read from their files (a writer: nobody else writes them).

        Raises:
            FormatError: a bad entry, a missing, short or damaged file.
        """
        sets = {}
        named = meta.get("priorities", {})
        if not isinstance(named, dict):
            raise FormatError(f"{folder / 'trajstore.json'}: 'priorities' must map set names to entries")
        for name, entry in named.items():
            check_name(name)
            entry = check_entry(folder, name, entry)
            values = read_values(folder, name, entry)
            if values is None:
                raise FormatError(f"{folder / entry['file']}: the priorities of set {name!r} do not match their "
                                  "checksum in trajstore.json (a damaged file)")
            sets[name] = PrioritySet(name, ring, values, float(entry["max"]), entry)
        return cls(folder, sets)

    def add(self, name: str, ring: RingState) -> PrioritySet:
        """A new set: every held step gets priority 1.0. Raises ValueError when the name is taken."""
        name = check_name(name)
        if name in self.sets:
            raise ValueError(f"priority set {name!r} exists already")
        self.sets[name] = PrioritySet(name, ring)
        return self.sets[name]

    def get(self, name: Any) -> PrioritySet:
        """The set ``name``; raises KeyError naming the sets there are."""
        if name not in self.sets:
            raise KeyError(f"no priority set {name!r} in this buffer (sets: {sorted(self.sets)}; declare one with "
                           "ReplayBuffer.create(..., priorities=(name,)) or rb.add_priorities(name))")
        return self.sets[name]

    def discarded(self, before: RingState, after: RingState) -> None:
        """``discard_episode`` took the writer from ``before`` to ``after``: every set synced to ``before`` first."""
        for chosen in self.sets.values():
            chosen.sync(before)
            chosen.rewound(after)

    def commit(self, ring: RingState) -> dict[str, Any] | None:
        """Write every set for a commit of ``ring``; the ``"priorities"`` entry of ``trajstore.json``."""
        if self.folder is None or not self.sets:
            return None
        return {name: s.commit(self.folder, ring) for name, s in self.sets.items()}

    def committed(self) -> dict[str, Any] | None:
        """The entries of the last commit (a ring's shrunk view names the same files)."""
        named = {name: s.committed for name, s in self.sets.items() if s.committed is not None}
        return named or None


class WriterPriorities:
    """The writer's sets as a draw's source: each set brought to the view's ring before it is used."""

    def __init__(self, keeper: PriorityKeeper):
        self.keeper = keeper

    def names(self) -> list[str]:
        return sorted(self.keeper.sets)

    def tree(self, view: Any, name: str, alpha: float) -> SumTree:
        chosen = self.keeper.get(name)
        chosen.sync(view.ring)
        return chosen.tree(alpha)

    def held_values(self, view: Any, name: str) -> np.ndarray:
        chosen = self.keeper.get(name)
        chosen.sync(view.ring)
        return chosen.logical_values(view.ring)


class FolderPriorities:
    """A reader's priorities: the committed sets of its view, read once per view and exponent."""

    def __init__(self, folder_view: Any):
        self.views = folder_view
        self._values: dict[str, tuple[dict[str, Any], np.ndarray]] = {}  # name -> (entry, values)
        self._trees: dict[tuple[str, float], tuple[Any, SumTree]] = {}  # (name, alpha) -> (view, tree)

    def names(self) -> list[str]:
        return sorted(self.views.meta.get("priorities", {}) or {})

    def entry(self, name: Any) -> dict[str, Any]:
        named = self.views.meta.get("priorities", {}) or {}
        if name not in named:
            raise KeyError(f"no priority set {name!r} committed in {self.views.folder} (sets: {sorted(named)}; "
                           "a set the writer declared is named after its next flush)")
        return check_entry(self.views.folder, name, named[name])

    def values(self, view: Any, name: str) -> np.ndarray:
        """The committed values of set ``name`` for ``view`` (the current one), float32 ``(slots,)``.

        Raises:
            StaleReadError: the file changed under the read and ``trajstore.json`` was replaced (refreshed).
            FormatError: a damaged file.
        """
        entry = self.entry(name)
        cached = self._values.get(name)
        if cached is not None and cached[0] == entry:
            return cached[1]
        values = read_values(self.views.folder, name, entry)
        if values is None:
            if self.views.latest() is not view:
                self.views.refresh()
                raise StaleReadError(f"the writer of {self.views.folder} rewrote priority set {name!r} while it "
                                     "was read; the view is refreshed: draw again")
            raise FormatError(f"{self.views.folder / entry['file']}: the priorities of set {name!r} do not match "
                              "their checksum in trajstore.json (a damaged file)")
        self._values[name] = (dict(entry), values)
        return values

    def held_values(self, view: Any, name: str) -> np.ndarray:
        """The committed priorities of the steps ``view`` holds, in logical order, float32 ``(count,)``."""
        values = self.values(view, name)
        slots = held_slots(view.ring)
        out = np.zeros(len(slots), np.float32)
        inside = slots < len(values)
        out[inside] = values[slots[inside]]
        return out

    def tree(self, view: Any, name: str, alpha: float) -> SumTree:
        """The tree of masses ``value ** alpha`` over the slots ``view`` holds (other slots 0)."""
        hit = self._trees.get((name, alpha))
        if hit is not None and hit[0] is view:
            return hit[1]
        values = self.values(view, name)
        held = np.zeros(max(len(values), view.ring.capacity or view.ring.count), np.float64)
        slots = held_slots(view.ring)
        slots = slots[slots < len(values)]
        held[slots] = masses(values[slots], alpha)
        tree = SumTree(held)
        self._trees = {k: v for k, v in self._trees.items() if v[0] is view}  # older views' trees go
        self._trees[(name, alpha)] = (view, tree)
        return tree
