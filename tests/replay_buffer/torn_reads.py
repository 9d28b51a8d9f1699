"""Helpers of the torn-read tests: a ring whose every leaf encodes its step number, a writer process
that keeps overwriting it, and a check of every step a reader gets.

Step number ``n`` is stored as

* ``camera`` (PNG chunks, lossless): every pixel ``[n % 251, (n // 251) % 251, (n // 251**2) % 251]``;
* ``step`` (HDF5): ``n``;
* ``pair`` (memmap): ``[n, -n - 1]``.

So a step whose leaves come from different steps (a torn step), or a whole step that is not the one
its logical index names, is found by :func:`check_steps`. Only the public API is used.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, MemmapStorage, dict_storage_kwargs_from_space

H = W = 8
CAPACITY = 64
EPISODE = 8  # steps per episode: a commit (end_episode) every 8 steps, a ring drop every 8 (capacity / 8)
BASE = 251


def space() -> DictSpace:
    return DictSpace({
        "camera": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 30}),
        "step": BoxSpace(0, 2**40, (), np.int64),
        "pair": BoxSpace(-2**40, 2**40, (2,), np.int64),
    })


def storage_kwargs() -> dict[str, Any]:
    return dict_storage_kwargs_from_space(space(), kind_kwargs={"image": {"format": "PNG"}},
                                          key_storage_cls={"pair": MemmapStorage})


def steps(start: int, n: int) -> dict[str, np.ndarray]:
    """Steps ``start .. start + n - 1``, each leaf encoding its step number (module docstring)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    digits = np.stack([ids % BASE, (ids // BASE) % BASE, (ids // BASE**2) % BASE], 1).astype(np.uint8)
    camera = np.broadcast_to(digits[:, None, None, :], (n, H, W, 3)).copy()
    return {"camera": camera, "step": ids, "pair": np.stack([ids, -ids - 1], 1)}


@dataclass
class Tally:
    """What a reader saw: reads done, steps checked, ``StaleReadError`` raised, and the bad steps."""

    reads: int = 0
    steps: int = 0
    stale: int = 0
    torn: int = 0  # leaves of one step encode different step numbers
    misplaced: int = 0  # the leaves agree, but on another step than the logical index names
    bad_reads: int = 0  # reads that returned at least one torn or misplaced step
    examples: list[str] = field(default_factory=list)

    def add(self, other: "Tally") -> None:
        self.reads += other.reads
        self.steps += other.steps
        self.stale += other.stale
        self.torn += other.torn
        self.misplaced += other.misplaced
        self.bad_reads += other.bad_reads
        self.examples += other.examples[:5 - len(self.examples)]


def leaf_steps(batch: dict[str, Any]) -> dict[str, np.ndarray]:
    """The step number each leaf of a batch ``(N, ...)`` encodes, ``-1`` where a leaf is not a valid encoding."""
    cam = np.asarray(batch["camera"]).astype(np.int64)
    n = len(cam)
    flat = cam.reshape(n, -1, 3)
    uniform = (flat == flat[:, :1, :]).all(axis=(1, 2))
    cam_step = np.where(uniform, flat[:, 0, 0] + BASE * flat[:, 0, 1] + BASE**2 * flat[:, 0, 2], -1)
    pair = np.asarray(batch["pair"])
    pair_step = np.where(pair[:, 1] == -pair[:, 0] - 1, pair[:, 0], -1)
    return {"camera": cam_step, "step": np.asarray(batch["step"]).astype(np.int64), "pair": pair_step}


def check_steps(batch: dict[str, Any], expected: np.ndarray | None, tally: Tally, where: str) -> None:
    """Count the torn steps of ``batch`` (leaves disagree) and the misplaced ones (all leaves agree on
    a step number other than ``expected``, when given) into ``tally``."""
    got = leaf_steps(batch)
    cam, hdf5, mm = got["camera"], got["step"], got["pair"]
    torn = (cam != hdf5) | (mm != hdf5) | (cam < 0) | (mm < 0)
    misplaced = ~torn & (hdf5 != expected) if expected is not None else np.zeros_like(torn)
    tally.steps += len(hdf5)
    tally.torn += int(torn.sum())
    tally.misplaced += int(misplaced.sum())
    tally.bad_reads += bool((torn | misplaced).any())
    for i in np.flatnonzero(torn | misplaced)[:5 - len(tally.examples)]:
        want = "" if expected is None else f", expected step {int(expected[i])}"
        tally.examples.append(f"{where}: row {i}: camera {int(cam[i])}, hdf5 {int(hdf5[i])}, "
                              f"memmap {int(mm[i])}{want}")


def write_ring(path: str, ready: Any, stop: Any, pause_s: float = 0.0) -> None:
    """The writer process: create a ring of :data:`CAPACITY` steps at ``path``, fill it, set ``ready``,
    then record episodes of :data:`EPISODE` steps (each ``end_episode`` commits) until ``stop`` is set
    (or the process that started it is gone), sleeping ``pause_s`` after each episode."""
    parent = os.getppid()
    rb = ReplayBuffer.create(DictStorage, space(), cache_path=path, capacity=CAPACITY, multiprocessing=True,
                             **storage_kwargs())
    n = 0
    try:
        while n < CAPACITY:
            rb.extend(steps(n, EPISODE))
            rb.end_episode()
            n += EPISODE
        ready.set()
        while not stop.is_set() and os.getppid() == parent:
            rb.extend(steps(n, EPISODE))
            rb.end_episode()
            n += EPISODE
            if pause_s:
                time.sleep(pause_s)
    finally:
        rb.close()


def read_fresh(path: Path, rounds: int, multiprocessing: bool) -> Tally:
    """Open the ring, read every step, close; ``rounds`` times. Each step read must be whole and be the
    step its logical index names: logical ``i`` is step number ``total_steps - len + i`` of the view read."""
    tally = Tally()
    for r in range(rounds):
        with ReplayBuffer.load_from(path, read_only=True, multiprocessing=multiprocessing) as rb:
            read_view(rb, tally, f"open {r}")
    return tally


def read_refreshing(path: Path, rounds: int) -> Tally:
    """One open reader: ``refresh()``, then read every step, ``rounds`` times (checks as :func:`read_fresh`)."""
    tally = Tally()
    with ReplayBuffer.load_from(path, read_only=True, multiprocessing=True) as rb:
        for r in range(rounds):
            rb.refresh()
            read_view(rb, tally, f"round {r}")
    return tally


def read_view(rb: ReplayBuffer, tally: Tally, where: str) -> None:
    """Read all steps of ``rb``'s current view once and check them; a ``StaleReadError`` is counted."""
    from trajstore.errors import StaleReadError

    first, count = rb.total_steps - len(rb), len(rb)  # the view the read is made under
    tally.reads += 1
    try:
        data = rb[:]
    except StaleReadError:
        tally.stale += 1
        return
    assert len(data["step"]) == count
    check_steps(data, first + np.arange(count), tally, f"{where} (steps {first}..{first + count - 1})")
