"""A consistent copy of a buffer folder's committed state, taken while a writer may be recording.

What can change under a copy, and why the result is still one committed state:

* Appends (new steps, new episodes, new chunk files): the writer writes data first and replaces
  ``trajstore.json`` last, so everything the copy's ``trajstore.json`` names was on disk before it
  was read. It is read *first*; later bytes in append-only files are past what it names.
* Replaced files (``index.log`` or ``data.h5`` compacted, the next episode log generation): each is
  written whole and renamed over the old one, and a copy reads one or the other whole (one open).
* Slots reused in place (a ring overwriting its oldest steps, ``discard_episode``): the writer first
  commits a ``trajstore.json`` without those steps. So ``trajstore.json`` is read again after the
  copy; if its oldest step moved past the copy's or the discard counter changed, a reused slot may
  be in the copy and the copy is taken again (:data:`ATTEMPTS` times at most). A ring drops an
  eighth of its capacity at a time, so a copy must finish before the writer records that much.
* Payload files (image chunks, video segments: what each storage declares, see
  :mod:`trajstore.storages.files`) are never rewritten, only appended to or deleted:
  they are not copied here but listed with their size at that moment (:func:`take_snapshot`), after
  the indexes were copied, and read later up to that size. A listed file deleted before it was read
  (the writer's ring moved on) makes the push start again. Every payload file a copied index
  points to (``SpaceStorage.referenced_payload``) must be listed, else the copy is taken again.

HDF5 files are copied as bytes while the writer may append to them. SWMR mode (every ``data.h5``)
never moves committed rows (except ring overwrites, handled above) and orders its metadata writes
so that the file is consistent at every moment; but a copy is read over an interval, so it could
still pair a chunk index block read before a write with one read after it. So each copied
``data.h5`` is opened and read whole (every metadata block of this format carries a checksum, and
every compressed chunk goes through its filter); if that fails, the copy is taken again.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from trajstore._json import loads_bounded
from trajstore.errors import RetriesExhaustedError
from trajstore.remote.layout import PAYLOAD, folder_files
from trajstore.replay_buffer.metadata import META_FILE, read_meta
from trajstore.replay_buffer.ring import RingState
from trajstore.storages.files import referenced_payload

#: Copies tried before a push gives up on a writer that keeps reusing the slots being copied.
ATTEMPTS = 8


@dataclass(frozen=True)
class Snapshot:
    """Small files copied into ``staged`` (by relative path); payload files as ``{relpath: (size, mtime_ns)}``."""

    source: Path
    staged: Path
    small: list[str]
    payload: dict[str, tuple[int, int]]
    steps: int
    appended: int


class Retry(Exception):
    """The writer changed what was being copied: take the copy again."""


def take_snapshot(folder: Path, staged: Path) -> Snapshot:
    """Copy the committed state of ``folder`` into the empty folder ``staged`` (see the module docstring).

    Raises:
        FormatError: ``folder`` is not a buffer folder.
        RetriesExhaustedError: the writer reused the slots being copied on every one of :data:`ATTEMPTS` tries.
    """
    folder = Path(folder)
    read_meta(folder)  # not a buffer folder: a FormatError before anything is copied
    for _ in range(ATTEMPTS):
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        try:
            return _copy_once(folder, staged)
        except (Retry, FileNotFoundError):
            continue
    raise RetriesExhaustedError(f"{folder}: the writer's ring reused the slots being copied {ATTEMPTS} times in a row "
                                "(it drops capacity/8 steps at a time, and recorded that many while the metadata, "
                                "indexes and HDF5 files were copied); push again when it records more slowly, or "
                                "after it closes")


def _view(meta_bytes: bytes, folder: Path) -> tuple[RingState, object]:
    meta = loads_bounded(meta_bytes, source=str(folder / META_FILE))
    return RingState.from_json(meta["ring"]), meta.get("episodes", {}).get("discards")


def _copy_once(folder: Path, staged: Path) -> Snapshot:
    first = (folder / META_FILE).read_bytes()
    ring, discards = _view(first, folder)
    (staged / META_FILE).write_bytes(first)
    small = [META_FILE]
    for rel, kind in folder_files(folder).items():
        if rel == META_FILE or kind == PAYLOAD:
            continue
        (staged / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / rel, staged / rel)
        small.append(rel)
    payload = {}
    for rel, kind in folder_files(folder).items():  # listed after the indexes were copied: all they name exist
        if kind == PAYLOAD:
            st = os.stat(folder / rel)
            payload[rel] = (st.st_size, st.st_mtime_ns)
    if any(rel not in payload for rel in referenced_payload(staged)):
        raise Retry()  # an index names a payload file that was deleted (and maybe replaced) meanwhile
    _check_hdf5(staged, small)
    log = (loads_bounded(first, source=str(folder / META_FILE)).get("episodes") or {}).get("log")
    if isinstance(log, dict) and log.get("file") not in small:  # compacted into the next generation meanwhile
        raise Retry()
    now_ring, now_discards = _view((folder / META_FILE).read_bytes(), folder)
    if now_ring.first_step > ring.first_step or now_discards != discards:
        raise Retry()
    return Snapshot(folder, staged, small, payload, ring.count, ring.appended)


def _check_hdf5(staged: Path, small: list[str]) -> None:
    """Every copied ``data.h5`` opens and reads whole, else :class:`Retry` (see the module docstring)."""
    import h5py

    from trajstore.storages.hdf5 import DATA_FILE, LOCKING

    for rel in small:
        if rel.rsplit("/", 1)[-1] != DATA_FILE:
            continue
        for swmr in (True, False):  # files of the format before SWMR-always open only without it
            try:
                with h5py.File(staged / rel, "r", swmr=swmr, locking=LOCKING) as f:
                    f.visititems(lambda _, obj: obj[...] if isinstance(obj, h5py.Dataset) else None)
                break
            except (OSError, RuntimeError, KeyError, ValueError):
                continue
        else:
            raise Retry()
