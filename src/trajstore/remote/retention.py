"""Which objects a push may delete: those no reader can still need.

A reader holds the manifest it opened with and reads the objects it names for as long as the
buffer stays open (a training run: hours). So a push keeps every object named by

* the new manifest,
* the manifest it replaces (always, whatever the retention),
* every older manifest that was replaced less than ``retain_seconds`` ago (by the pushers' clocks),

and deletes the other objects, except those it cannot rule out that another push needs: the objects
the URL's manifest names when retention runs, those of kept manifests of later generations, and every
object written at or after this push took the push lock (:mod:`~trajstore.remote.push_lock`), so a
push that took over a lock this one lost, or uploaded meanwhile, keeps what it uploaded. Each pushed manifest is also kept as ``manifests/<generation>.json``
(written before the manifest itself) until it falls out of retention, so the next push knows what
older snapshots still name. A reader that keeps a buffer open longer than the retention after the
next-but-one push may find an object gone: its read raises ``FormatError`` (open it again).
"""

from __future__ import annotations

from typing import Any

from trajstore.errors import FormatError
from trajstore.remote.layout import MANIFEST, OBJECTS
from trajstore.remote.manifest import Manifest
from trajstore.remote.push_lock import modified_time

HISTORY = "manifests"
#: Default retention of replaced snapshots (seconds): one hour.
RETAIN_SECONDS = 3600.0


def history_name(generation: int) -> str:
    return f"{HISTORY}/{generation:08d}.json"


def history(fs: Any, root: str) -> dict[int, str]:
    """Generation -> path of the manifests kept under ``root/manifests/``."""
    if not fs.exists(f"{root}/{HISTORY}"):
        return {}
    out = {}
    for path in fs.find(f"{root}/{HISTORY}"):
        stem = path.rsplit("/", 1)[-1].removesuffix(".json")
        if stem.isdigit():
            out[int(stem)] = path
    return out


def collect(fs: Any, root: str, url: str, new: Manifest, previous: Manifest | None, now: float,
            retain_seconds: float, *, written_before: float | None = None) -> tuple[list[str], list[str]]:
    """``(objects to delete, history manifests to delete)`` after ``new`` was written (paths under ``root``).

    Read after the push lock was taken (:mod:`~trajstore.remote.push_lock`). Besides the retained
    snapshots, the objects named by the URL's manifest as it is now and by any kept manifest of a later
    generation than ``new`` (a push that took over a lock this one lost) are kept; so is every object
    whose modification time (the store's clock) is not before ``written_before`` (the push lock's
    acquisition time): objects another push uploaded meanwhile. On a store that reports no
    modification times, such objects are kept too (nothing is deleted that cannot be dated).
    """
    kept = history(fs, root)
    snapshots = {new.generation: new}
    if previous is not None:
        snapshots[previous.generation] = previous
    for generation in sorted(kept, reverse=True):
        if generation in snapshots:
            continue
        if generation > new.generation:  # a later push's: kept whatever its age
            snapshots[generation] = _load(fs, url, kept[generation]) or Manifest(generation, {})
            continue
        successor = snapshots.get(generation + 1)
        if successor is None or now - successor.created >= retain_seconds:
            break  # replaced long enough ago: it and everything older are out of retention
        loaded = _load(fs, url, kept[generation])
        if loaded is None:
            break
        snapshots[generation] = loaded
    named = {e.key.rsplit("/", 1)[-1] for m in snapshots.values() for e in m.files.values()}
    current = _load(fs, url, f"{root}/{MANIFEST}")
    if current is not None:
        named |= {e.key.rsplit("/", 1)[-1] for e in current.files.values()}
    present = fs.find(f"{root}/{OBJECTS}", detail=True) if fs.exists(f"{root}/{OBJECTS}") else {}
    stale_objects = [p for p, info in present.items() if p.rsplit("/", 1)[-1] not in named
                     and _older(info, written_before)]
    stale_history = [path for generation, path in kept.items() if generation not in snapshots]
    return stale_objects, stale_history


def _load(fs: Any, url: str, path: str) -> Manifest | None:
    """The manifest at ``path`` (a full path, or :data:`MANIFEST` under the URL), or None if gone/damaged."""
    try:
        return Manifest.from_bytes(fs.cat_file(path), f"{url}/{path.rsplit('/', 1)[-1]}")
    except (FileNotFoundError, FormatError):
        return None


def _older(info: dict[str, Any], written_before: float | None) -> bool:
    if written_before is None:
        return True
    t = modified_time(info)
    return t is not None and t < written_before
