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

A copy is taken again only when the folder changed under it: if a copy fails while every file in the
folder kept its size, modification time and inode and ``trajstore.json`` its bytes, no writer moved
anything, and the folder is damaged (a payload file an index names is missing:
:class:`~trajstore.damage.DamagedDataError`; a file that does not read back: ``FormatError``).
:func:`check_undamaged` checks a folder before any copy, as a read-only open sees it (``ReplayBuffer.damaged``).
"""

from __future__ import annotations

import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

from trajstore._json import loads_bounded
from trajstore.damage import DamagedBufferWarning, DamagedDataError
from trajstore.errors import FormatError, RetriesExhaustedError
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
    """The writer changed what was being copied: take the copy again. ``missing``: payload files an
    index names that are not in the folder (else empty); the message says what failed."""

    def __init__(self, reason: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.missing = missing


def check_undamaged(folder: Path) -> None:
    """Raise if a read-only open of ``folder`` finds payload files missing (``ReplayBuffer.damaged``)
    while no writer moved its ring past them (a writer commits ``trajstore.json`` without the steps
    before it deletes their files: a file it deleted is not damage).

    Raises:
        DamagedDataError: (a ``FormatError``) the folder is damaged; the message names the files.
        FormatError: ``folder`` is not a buffer folder, or a file of it is damaged.
    """
    from trajstore.replay_buffer import ReplayBuffer

    for _ in range(ATTEMPTS):
        before = _view((folder / META_FILE).read_bytes(), folder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DamagedBufferWarning)
            rb = ReplayBuffer.load_from(folder, read_only=True)
        try:
            damage = rb.damaged
        finally:
            rb.close()
        if not damage:
            return
        after = _view((folder / META_FILE).read_bytes(), folder)
        if after[0].first_step == before[0].first_step and after[1] == before[1]:
            raise DamagedDataError(f"{folder}: {damage.summary()}; a damaged folder is not published (nothing was "
                                   "uploaded): copy the other episodes out with `trajstore copy SRC DST "
                                   "--skip-damaged` and push the copy")
    # the writer kept moving its ring: the files were deleted by it; the snapshot decides


def _fingerprint(folder: Path) -> tuple[bytes, tuple[tuple[str, int, int, int], ...]] | None:
    """``trajstore.json``'s bytes and ``(path, size, mtime_ns, inode)`` of every file under ``folder``:
    equal before and after a copy only if nothing was written meanwhile (``None`` if unreadable)."""
    try:
        meta = (folder / META_FILE).read_bytes()
        stats = []
        for dirpath, _, names in os.walk(folder):
            for name in names:
                st = os.stat(os.path.join(dirpath, name))
                stats.append((os.path.join(dirpath, name), st.st_size, st.st_mtime_ns, st.st_ino))
    except OSError:
        return None
    return meta, tuple(sorted(stats))


def take_snapshot(folder: Path, staged: Path) -> Snapshot:
    """Copy the committed state of ``folder`` into the empty folder ``staged`` (see the module docstring).

    Raises:
        FormatError: ``folder`` is not a buffer folder, or a copy failed while nothing in it changed: it is
            damaged (:class:`~trajstore.damage.DamagedDataError` if payload files an index names are missing).
        RetriesExhaustedError: the writer reused the slots being copied on every one of :data:`ATTEMPTS` tries.
    """
    folder = Path(folder)
    read_meta(folder)  # not a buffer folder: a FormatError before anything is copied
    for _ in range(ATTEMPTS):
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        before = _fingerprint(folder)
        try:
            return _copy_once(folder, staged)
        except Retry as exc:
            failed: Retry | FileNotFoundError = exc
        except FileNotFoundError as exc:
            failed = exc
        if before is not None and before == _fingerprint(folder):  # nothing changed: not a race but damage
            _raise_damaged(folder, failed)
    raise RetriesExhaustedError(f"{folder}: the writer's ring reused the slots being copied {ATTEMPTS} times in a row "
                                "(it drops capacity/8 steps at a time, and recorded that many while the metadata, "
                                "indexes and HDF5 files were copied); push again when it records more slowly, or "
                                "after it closes")


def _raise_damaged(folder: Path, failed: BaseException) -> None:
    missing = getattr(failed, "missing", ())
    if missing:
        named = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise DamagedDataError(f"{folder}: {len(missing)} payload file(s) an index names are missing ({named}); "
                               "a damaged folder is not published (nothing was uploaded): copy the other episodes "
                               "out with `trajstore copy SRC DST --skip-damaged` and push the copy")
    raise FormatError(f"{folder}: {failed}; no writer changed the folder meanwhile, so it is damaged (nothing was "
                      "uploaded): `trajstore verify` lists what")


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
    missing = tuple(rel for rel in referenced_payload(staged) if rel not in payload)
    if missing:  # an index names a payload file that was deleted (and maybe replaced) meanwhile
        raise Retry(f"payload file(s) missing: {', '.join(missing[:5])}", missing)
    _check_hdf5(staged, small)
    log = (loads_bounded(first, source=str(folder / META_FILE)).get("episodes") or {}).get("log")
    if isinstance(log, dict) and log.get("file") not in small:  # compacted into the next generation meanwhile
        raise Retry(f"{META_FILE} names the episode log {log.get('file')!r}, which is not in the folder")
    now_ring, now_discards = _view((folder / META_FILE).read_bytes(), folder)
    if now_ring.first_step > ring.first_step or now_discards != discards:
        raise Retry("the writer's ring moved while copying")
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
            raise Retry(f"{rel} does not read back whole")
