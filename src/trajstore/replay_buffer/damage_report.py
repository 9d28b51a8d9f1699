"""The :class:`~trajstore.damage.Damage` of a buffer under one view: which held steps and episodes the
damaged payload files of its storages held. Arithmetic over the view and the storages' reports; no I/O.

A storage slot holds the held step whose logical index ``i`` maps to it (``(head + i) % capacity`` in a
ring, ``i`` otherwise); final observation number ``n`` lives in slot ``n % capacity`` (``n``) of the
final observation storage (:mod:`~trajstore.replay_buffer.final_observations`).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from trajstore.damage import Damage, DamagedFile, DamagedPart
from trajstore.replay_buffer.final_observations import FINAL_DIR
from trajstore.replay_buffer.view import View
from trajstore.storages.base import SpaceStorage


def damage_in(storage: SpaceStorage, finals: SpaceStorage | None, view: View) -> Damage:
    """The damage of a buffer whose step storage is ``storage`` and final observation storage ``finals``
    (``None`` before the first one), for the held steps and episodes of ``view``. ``O(1)`` when no
    storage reports a damaged file, ``O(held steps)`` otherwise."""
    steps = list(_damaged_parts(storage, ""))
    final = [] if finals is None else list(_damaged_parts(finals, FINAL_DIR))
    if not steps and not final:
        return Damage()
    ring, table = view.ring, view.episodes
    logical = np.arange(ring.count, dtype=np.int64)
    slots = logical if ring.capacity is None else (ring.head + logical) % ring.capacity
    held = table.episodes(view.first_step, ring.appended)
    ep_ids = np.array([e.id for e in held], np.int64)
    ep_starts = np.array([e.start for e in held], np.int64)
    ep_stops = np.array([e.stop for e in held], np.int64)

    def episodes_of(hit_steps: np.ndarray) -> tuple[int, ...]:
        k = np.searchsorted(ep_starts, hit_steps, side="right") - 1
        inside = (k >= 0) & (hit_steps < ep_stops[np.maximum(k, 0)]) if len(ep_starts) else np.zeros(0, bool)
        return tuple(int(i) for i in np.unique(ep_ids[k[inside]]))

    parts: list[DamagedPart] = []
    damaged = np.zeros(ring.count, bool)
    for key, file in steps:
        hit = np.isin(slots, file.slots)
        if hit.any():
            damaged |= hit
            parts.append(DamagedPart(key, file.path, file.problem, episodes_of(np.flatnonzero(hit)),
                                     int(hit.sum())))
    numbers = table.finals
    final_slots = numbers if ring.capacity is None else numbers % ring.capacity
    for key, file in final:
        hit = (numbers >= 0) & np.isin(final_slots, file.slots)
        if hit.any():
            parts.append(DamagedPart(key, file.path, file.problem, tuple(int(i) for i in table.ids[hit]), 0))
    episodes = sorted({i for p in parts for i in p.episodes})
    return Damage(tuple(parts), tuple(episodes), int(damaged.sum()))


def _damaged_parts(storage: SpaceStorage, prefix: str) -> Iterator[tuple[str, DamagedFile]]:
    """``(part key, damaged file)`` of ``storage`` and its parts, keys joined with ``/`` under ``prefix``."""
    parts = storage.parts()
    if not parts:
        for file in storage.damaged_files():
            yield prefix, file
        return
    for key, sub in parts.items():
        yield from _damaged_parts(sub, f"{prefix}/{key}" if prefix else key)
