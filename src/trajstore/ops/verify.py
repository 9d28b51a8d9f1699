"""Check a buffer folder on its own (no reference copy): files, payloads, counts.

:func:`verify_buffer` reports damage instead of stopping at the first one:

* **files**: every file the metadata names exists: ``trajstore.json``, each storage's
  ``storage.json``, the image chunks and video segments its index points to, ``data.h5``,
  the final observation storage, ``stats.json``;
* **payloads**: every held step of every storage is read back, in batches: every frame of the
  image chunks and video segments decoded, every HDF5 leaf read; every final observation the
  episode table names, too;
* **episodes**: every payload file the open found missing or truncated is listed (up to
  :data:`MAX_DAMAGED_FILES_LISTED` per storage, then how many more) with the held steps and episodes
  it held, and not read; the slots of a batch that failed to read are read one by one, and the
  problem names those that fail; the held episodes of all of them are listed
  (:attr:`VerifyReport.damaged_episodes`);
* **counts**: each storage holds at least the steps the metadata commits (a ring: its capacity),
  no held step of an image or video storage is missing from its index (it would read back as
  zeros), and the episode table lies within the appended steps.

Each sub-storage is opened on its own, so one damaged storage does not hide the others; the
folder is then opened as a whole, as a user would. Reads only (no lock, nothing written); a
live writer may go on writing, and its later steps are not checked.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from trajstore._fs import read_json
from trajstore.errors import FormatError
from trajstore.ops.hdf5_truncation import hdf5_truncated
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.committed_table import read_committed
from trajstore.replay_buffer.metadata import META_FILE, STORAGE_DIR, read_meta
from trajstore.replay_buffer.ring import RingState
from trajstore.storages._selection import Selection, select
from trajstore.storages.base import STORAGE_FILE, SpaceStorage

#: Steps read per batch (a failed batch is reported as one problem).
VERIFY_BATCH_STEPS = 256
#: Problems reported per storage at most (a broken file would otherwise fail every batch).
MAX_PROBLEMS_PER_STORAGE = 5
#: Damaged payload files (missing, truncated) listed per storage at most; the rest are counted.
MAX_DAMAGED_FILES_LISTED = 20

Progress = Callable[[int], None]


@dataclass
class Problem:
    """One piece of damage: ``where`` (a file or folder) and ``what`` is wrong."""

    where: str
    what: str

    def line(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class StorageCheck:
    """What was checked in one storage folder."""

    folder: str
    storage: str  # registered type name ("image", "video", "hdf5", ...), "?" if unreadable
    steps_read: int = 0  # held steps (or final observations) decoded without error
    problems: int = 0


@dataclass
class VerifyReport:
    """The result of :func:`verify_buffer`; :attr:`ok` is true when no problem was found."""

    path: str
    steps: int = 0
    episodes: int = 0
    final_observations: int = 0
    storages: list[StorageCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Ids of the held episodes with a step (or final observation) that cannot be read, sorted.
    damaged_episodes: list[int] = field(default_factory=list)
    #: Held steps that cannot be read (in any storage; each counted once).
    damaged_steps: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def verify_buffer(path: str | os.PathLike, *, progress: Progress | None = None) -> VerifyReport:
    """Check the buffer folder at ``path`` (see the module docstring) and report what is damaged.

    Args:
        path: a buffer folder.
        progress: called with a number of steps after each batch read (for a progress bar); the total
            is :func:`steps_to_read`.

    Returns:
        A :class:`VerifyReport`; damage is in its ``problems``, never raised.

    Raises:
        FormatError: ``path`` is not a buffer folder at all (no folder, or no ``trajstore.json``).
    """
    folder = Path(path)
    if not (folder / META_FILE).is_file():
        read_meta(folder)  # raises the one-line "not a trajstore buffer folder" error
    report = VerifyReport(str(folder))
    try:
        meta, table, log = read_committed(folder, read_only=True, parse=True)  # every log line parsed, the index checked against it
        if log is not None:
            log.close()
        ring = RingState.from_json(meta["ring"])
    except (FormatError, KeyError, TypeError, ValueError) as exc:
        report.problems.append(Problem(str(folder / META_FILE), f"unreadable metadata: {_text(exc)}"))
        return report
    report.steps = ring.count
    report.episodes = table.count(ring.appended)
    report.problems += _episode_problems(folder / META_FILE, ring, table)
    tick = progress or (lambda n: None)
    bad_steps: list[np.ndarray] = []  # slots of the step storages that failed to read, one by one
    bad_finals: list[np.ndarray] = []
    _check_folder(folder / STORAGE_DIR, report, lambda sub: _held_batches(ring, sub), tick, bad_steps.append,
                  lambda slots: _held_steps_text(ring, table, slots))
    entry = meta.get("final_observations")
    if entry is not None:
        finals = table.finals[table.finals >= 0]
        report.final_observations = len(finals)
        slots = finals % ring.capacity if ring.capacity is not None else finals
        _check_folder(folder / str(entry.get("dir", "?")) if isinstance(entry, dict) else folder / "?", report,
                      lambda sub: _slot_batches(np.sort(slots), sub), tick, bad_finals.append,
                      lambda bad: _finals_text(ring, table, bad))
    _damaged_episodes(report, ring, table, bad_steps, bad_finals)
    stats = meta.get("stats")
    if isinstance(stats, dict) and "file" in stats:
        try:
            read_json(folder / str(stats["file"]), "statistics")
        except FormatError as exc:
            report.problems.append(Problem(str(folder / str(stats["file"])), _text(exc)))
    if report.ok:
        report.problems += _open_whole(folder)
    return report


def steps_to_read(path: str | os.PathLike) -> int:
    """Steps :func:`verify_buffer` reads, summed over storages (the total of its progress), 0 if unknown."""
    try:
        meta = read_meta(Path(path))
        ring = RingState.from_json(meta["ring"])
        children = read_json(Path(path) / STORAGE_DIR / STORAGE_FILE, "").get("config", {}).get("children")
        return ring.count * max(1, len(children) if isinstance(children, list) else 1)
    except Exception:  # noqa: BLE001 - only a progress total
        return 0


def _episode_problems(where: Path, ring: RingState, table: EpisodeTable) -> list[Problem]:
    problems = []
    if len(table) and int(table.stops[-1]) > ring.appended:
        problems.append(Problem(str(where), f"episode {int(table.ids[-1])} ends at step {int(table.stops[-1])}, "
                                            f"past the {ring.appended} steps appended"))
    if len(table) and int(table.starts[0]) < 0:
        problems.append(Problem(str(where), f"episode {int(table.ids[0])} starts at a negative step"))
    if table.open_start is not None:
        last = int(table.stops[-1]) if len(table) else 0
        if not last <= table.open_start <= ring.appended:
            problems.append(Problem(str(where), f"the open episode starts at step {table.open_start}, outside "
                                                f"[{last}, {ring.appended}]"))
    if len(table) and table.next_id <= int(table.ids[-1]):
        problems.append(Problem(str(where), f"next episode id {table.next_id} is not past the last id "
                                            f"{int(table.ids[-1])}"))
    if ring.capacity is not None and not 0 <= ring.count <= ring.capacity:
        problems.append(Problem(str(where), f"{ring.count} steps held in a ring of {ring.capacity}"))
    return problems


def _held_batches(ring: RingState, sub: SpaceStorage) -> tuple[list[tuple[str, Selection]], str | None]:
    """Batches of the slots of the held steps, labelled by logical step range; a count problem, if any."""
    need = ring.capacity if ring.capacity is not None else ring.count
    short = None
    if len(sub) < need:
        short = (f"holds {len(sub)} slots but the metadata commits "
                 f"{'a ring of ' if ring.capacity is not None else ''}{need} steps")
    count = min(ring.count, len(sub)) if ring.capacity is None else ring.count
    batches = []
    for a in range(0, count, VERIFY_BATCH_STEPS):
        b = min(count, a + VERIFY_BATCH_STEPS)
        batches.append((f"steps {a}..{b - 1}", ring.slots_of(select(slice(a, b), count)).in_slot_order()))
    return batches, short


def _slot_batches(slots: np.ndarray, sub: SpaceStorage) -> tuple[list[tuple[str, Selection]], str | None]:
    short = None
    if len(slots) and int(slots[-1]) >= len(sub):
        short = f"holds {len(sub)} final observations but the episode table names number {int(slots[-1])}"
        slots = slots[slots < len(sub)]
    batches = []
    for a in range(0, len(slots), VERIFY_BATCH_STEPS):
        part = np.unique(slots[a:a + VERIFY_BATCH_STEPS]).astype(np.int64)
        batches.append((f"final observations in slots {int(part[0])}..{int(part[-1])}", Selection(part)))
    return batches, short


def _damaged_episodes(report: VerifyReport, ring: RingState, table: EpisodeTable, bad_steps: list[np.ndarray],
                      bad_finals: list[np.ndarray]) -> None:
    """Fill the report's damaged episodes and steps from the slots that failed to read (step storages'
    slots, final observation storages' slots), and add one problem naming them."""
    slots = np.unique(np.concatenate(bad_steps)) if bad_steps else np.zeros(0, np.int64)
    logical = slots if ring.capacity is None else (slots - ring.head) % ring.capacity
    logical = logical[logical < ring.count]
    held = table.episodes(ring.first_step, ring.appended)
    ids = {e.id for e in held if np.any((logical >= e.start) & (logical < e.stop))}
    if bad_finals:
        numbers = table.finals
        final_slots = numbers if ring.capacity is None else numbers % ring.capacity
        hit = (numbers >= 0) & np.isin(final_slots, np.concatenate(bad_finals))
        ids |= {int(i) for i in table.ids[hit]}
    report.damaged_episodes = sorted(int(i) for i in ids)
    report.damaged_steps = int(len(logical))
    if ids:
        shown = report.damaged_episodes[:20]
        report.problems.append(Problem(report.path, f"damaged episodes: {shown}{' ...' if len(ids) > 20 else ''} "
                                                    f"({len(ids)} episode(s), {len(logical)} held step(s) cannot "
                                                    "be read; `trajstore copy SRC DST --skip-damaged` copies the "
                                                    "others)"))


def _ranges(values: np.ndarray, limit: int = 10) -> str:
    """``"12..15, 20, 30..31"`` for sorted unique ints (the first ``limit`` runs, then ``", ..."``)."""
    if not len(values):
        return "none"
    cut = np.flatnonzero(np.diff(values) != 1) + 1
    runs = [(int(r[0]), int(r[-1])) for r in np.split(values, cut)]
    shown = ", ".join(f"{a}..{b}" if b > a else f"{a}" for a, b in runs[:limit])
    return shown + (", ..." if len(runs) > limit else "")


def _held_steps_text(ring: RingState, table: EpisodeTable, slots: np.ndarray) -> str:
    """The held steps of step-storage ``slots`` and their episodes: ``"steps 12..15 (episode(s) [1])"``."""
    logical = slots if ring.capacity is None else (slots - ring.head) % ring.capacity
    logical = np.unique(logical[logical < ring.count])
    ids = [e.id for e in table.episodes(ring.first_step, ring.appended)
           if np.any((logical >= e.start) & (logical < e.stop))]
    return f"held step(s) {_ranges(logical)} (episode(s) [{_ranges(np.array(ids, np.int64))}])"


def _finals_text(ring: RingState, table: EpisodeTable, slots: np.ndarray) -> str:
    """The episodes whose final observation is in ``slots``: ``"final observations of episode(s) [1]"``."""
    numbers = table.finals
    final_slots = numbers if ring.capacity is None else numbers % ring.capacity
    ids = np.unique(table.ids[(numbers >= 0) & np.isin(final_slots, slots)]).astype(np.int64)
    return f"final observation(s) of episode(s) [{_ranges(ids)}]"


def _failing_slots(sub: SpaceStorage, sel: Selection) -> np.ndarray:
    """The slots of ``sel`` (a batch that failed to read) that fail to read alone."""
    bad = []
    for slot in sel.slots.tolist():
        try:
            sub.read_leaves(Selection(np.array([slot], np.int64)))
        except Exception:  # noqa: BLE001 - damage, reported by the batch
            bad.append(slot)
    return np.array(bad, np.int64)


def _check_folder(folder: Path, report: VerifyReport, plan: Callable[[SpaceStorage], Any], tick: Progress,
                  failed: Callable[[np.ndarray], None], describe: Callable[[np.ndarray], str]) -> None:
    """Check one storage folder; a ``dict`` storage is checked child by child. ``failed`` gets the slots
    that do not read: those of the damaged files the open found, and those of each batch that failed,
    read one by one. ``describe(slots)``: which held steps and episodes slots are, for messages."""
    try:
        desc = read_json(folder / STORAGE_FILE, "storage descriptor")
        kind = desc.get("type") if isinstance(desc, dict) else None
        if kind == "dict":
            children = desc["config"]["children"]
            for child in children:
                _check_folder(folder / str(child["dir"]), report, plan, tick, failed, describe)
            return
    except (FormatError, KeyError, TypeError) as exc:
        report.storages.append(StorageCheck(str(folder), "?", problems=1))
        report.problems.append(Problem(str(folder), f"unreadable storage descriptor: {_text(exc)}"))
        return
    check = StorageCheck(str(folder), str(kind))
    report.storages.append(check)

    def problem(what: str) -> None:
        check.problems += 1
        if check.problems <= MAX_PROBLEMS_PER_STORAGE:
            report.problems.append(Problem(str(folder), what))
        elif check.problems == MAX_PROBLEMS_PER_STORAGE + 1:
            report.problems.append(Problem(str(folder), "more problems not listed"))

    if kind == "hdf5":
        truncated = hdf5_truncated(folder)
        if truncated:  # read no further: SWMR reads past the end retry for minutes, or return zeros
            problem(truncated)
            return
    try:
        sub = SpaceStorage.load_from(folder, read_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to open is damage to report
        problem(f"cannot be opened: {_text(exc)}")
        return
    try:
        known = _damaged_files(sub, report, check, describe, failed)
        batches, short = plan(sub)
        if short:
            problem(short)
        for label, sel in batches:
            unwritten = sub.unwritten(sel.slots)
            if unwritten:
                problem(f"{label}: {unwritten} held step(s) are missing from its index (they would read as zeros)")
            n = len(sel.slots)
            if len(known):  # reported above: read the others
                sel = Selection(sel.slots[~np.isin(sel.slots, known)])
            try:
                if len(sel.slots):
                    sub.read_leaves(sel)
                check.steps_read += len(sel.slots)
            except Exception as exc:  # noqa: BLE001 - a payload that does not decode is damage
                bad = _failing_slots(sub, sel)
                problem(f"{describe(bad) if len(bad) else label}: cannot be read: {_text(exc)}")
                check.steps_read += len(sel.slots) - len(bad)  # the others decoded one by one
                failed(bad)
            tick(n)
    finally:
        sub.close()


def _damaged_files(sub: SpaceStorage, report: VerifyReport, check: StorageCheck,
                   describe: Callable[[np.ndarray], str], failed: Callable[[np.ndarray], None]) -> np.ndarray:
    """List the payload files the open of ``sub`` found missing or truncated (up to
    :data:`MAX_DAMAGED_FILES_LISTED`, then how many more), each with the held steps and episodes it
    held; pass their slots to ``failed``. Returns those slots (sorted, unique)."""
    damaged = sub.damaged_files()
    for d in damaged[:MAX_DAMAGED_FILES_LISTED]:
        report.problems.append(Problem(d.path, f"is {d.problem}: {describe(d.slots)} cannot be read"))
    if len(damaged) > MAX_DAMAGED_FILES_LISTED:
        report.problems.append(Problem(str(sub.cache_path), f"and {len(damaged) - MAX_DAMAGED_FILES_LISTED} more "
                                                            "damaged payload file(s)"))
    check.problems += len(damaged)
    slots = np.unique(np.concatenate([d.slots for d in damaged])).astype(np.int64) if damaged else np.zeros(0, np.int64)
    if len(slots):
        failed(slots)
    return slots


def _open_whole(folder: Path) -> list[Problem]:
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    try:
        ReplayBuffer.load_from(folder, read_only=True).close()
    except Exception as exc:  # noqa: BLE001
        return [Problem(str(folder), f"does not open as a buffer: {_text(exc)}")]
    return []


def _text(exc: BaseException) -> str:
    """An exception on one line, its type named when the message alone is unclear."""
    msg = " ".join(str(exc).split())
    return msg if isinstance(exc, FormatError) and msg else f"{type(exc).__name__}: {msg}"
