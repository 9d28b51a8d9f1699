"""Which objects a push may delete: those no reader can still need.

A reader holds the manifest it opened with and reads the objects it names for as long as the
buffer stays open (a training run: hours). So a push keeps every object named by

* the new manifest,
* the manifest it replaces (always, whatever the retention),
* every older manifest that was replaced less than ``retain_seconds`` ago (by the pushers' clocks),

and deletes the other objects. Each pushed manifest is also kept as ``manifests/<generation>.json``
(written before the manifest itself) until it falls out of retention, so the next push knows what
older snapshots still name. A reader that keeps a buffer open longer than the retention after the
next-but-one push may find an object gone: its read raises ``FormatError`` (open it again).
"""

from __future__ import annotations

from typing import Any

from trajstore.errors import FormatError
from trajstore.remote.layout import OBJECTS
from trajstore.remote.manifest import Manifest

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
            retain_seconds: float) -> tuple[list[str], list[str]]:
    """``(objects to delete, history manifests to delete)`` after ``new`` was written (paths under ``root``)."""
    kept = history(fs, root)
    snapshots = {new.generation: new}
    if previous is not None:
        snapshots[previous.generation] = previous
    for generation in sorted(kept, reverse=True):
        if generation in snapshots or generation > new.generation:
            continue
        successor = snapshots.get(generation + 1)
        if successor is None or now - successor.created >= retain_seconds:
            break  # replaced long enough ago: it and everything older are out of retention
        try:
            snapshots[generation] = Manifest.from_bytes(fs.cat_file(kept[generation]), f"{url}/{kept[generation]}")
        except (FileNotFoundError, FormatError):
            break
    named = {e.key.rsplit("/", 1)[-1] for m in snapshots.values() for e in m.files.values()}
    present = fs.find(f"{root}/{OBJECTS}") if fs.exists(f"{root}/{OBJECTS}") else []
    stale_objects = [p for p in present if p.rsplit("/", 1)[-1] not in named]
    stale_history = [path for generation, path in kept.items() if generation not in snapshots]
    return stale_objects, stale_history
