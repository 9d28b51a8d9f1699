"""A reference copy of recorded steps, and the check of a buffer against it.

With ``reference=`` the recording functions keep every recorded step, untouched by any lossy
codec, in a ``.npz`` file (one array per leaf, keys joined by ``|``); :func:`compare_to_reference` reads
the buffer back (in another process, from the folder alone) and compares every step with it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajstore.recording.step import copy_leaves
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import Space, tree

#: Lossy leaves must match the reference to within these bounds (ImageStorage's default JPEG,
#: quality 90 4:4:4, or default video settings, on PushT's flat-shaded 96x96 frames; see
#: tests/storages for the codecs' bounds). Measured on ``make demo`` (10 episodes, 3000 frames)
#: with JPEG: worst frame 40.9 dB, mean absolute error 0.64 levels (45.6 dB and 0.35 at quality 95).
MIN_PSNR_DB = 30.0
MAX_MEAN_ABS_ERROR = 3.0


class ReferenceSteps:
    """Collects raw copies of recorded steps, episode by episode (an ``on_step`` callback).

    The steps of an episode are kept when its last step (terminated or truncated) arrives; those of
    an episode that never ended (discarded on an interrupt) are not.
    """

    def __init__(self) -> None:
        self.episodes: list[dict] = []  # one batch (leading axis = steps) per episode
        self._current: list[dict] = []

    def __call__(self, step: dict) -> None:
        self._current.append(copy_leaves(step))
        if step["terminated"] or step["truncated"]:
            self.episodes.append(_stack(self._current))
            self._current = []

    def save(self, path: str | os.PathLike, space: Space, capacity: int | None) -> None:
        """Write the kept episodes' steps (the newest ``capacity`` of them for a ring) to ``path`` (.npz).

        Raises:
            ValueError: no episode was kept.
        """
        if not self.episodes:
            raise ValueError("no episode was recorded: nothing to save as a reference")
        columns = zip(*(tree.flatten(space, b) for b in self.episodes))  # per leaf: its arrays, episode by episode
        flat = {p: np.concatenate(arrays) for p, arrays in zip(tree.leaf_paths(space), columns)}
        if capacity is not None:
            flat = {p: v[-capacity:] for p, v in flat.items()}
        np.savez_compressed(path, **{"|".join(p): v for p, v in flat.items()})


def _stack(values: list[Any]) -> Any:
    if isinstance(values[0], dict):
        return {k: _stack([v[k] for v in values]) for k in values[0]}
    return np.stack([np.asarray(v) for v in values])


@dataclass
class LeafCheck:
    key: str
    storage: str
    exact: bool
    max_abs_error: float
    mean_abs_error: float
    min_psnr_db: float | None  # lossy leaves: worst per-step PSNR
    ok: bool


def compare_to_reference(path: str | os.PathLike, reference: str | os.PathLike, *, batch_size: int = 256) -> list[LeafCheck]:
    """Compare every step of the buffer at ``path`` with the reference ``.npz``.

    Leaves in lossless storages (HDF5, PNG, memmap) must be equal; JPEG and video leaves must reach
    :data:`MIN_PSNR_DB` on every step and :data:`MAX_MEAN_ABS_ERROR` overall.

    Raises:
        ValueError: the buffer and the reference hold different numbers of steps or leaves.
    """
    from trajstore.ops.info import describe

    leaves = describe(path).leaves
    storage_of = {leaf.key: leaf.storage for leaf in leaves}
    lossless = {leaf.key: leaf.lossless for leaf in leaves}
    with np.load(reference, allow_pickle=False) as ref, ReplayBuffer.load_from(path, read_only=True) as rb:
        expected = {k.replace("|", "/"): ref[k] for k in ref.files}
        n = len(rb)
        if set(expected) != set(storage_of) or any(len(v) != n for v in expected.values()):
            raise ValueError(f"the reference holds {sorted(expected)} with {[len(v) for v in expected.values()]} "
                             f"steps; the buffer holds {sorted(storage_of)} with {n}")
        stats = {k: [0.0, 0.0, np.inf] for k in expected}  # max abs, sum abs, min psnr
        for start in range(0, n, batch_size):
            got = dict(zip(("/".join(p) for p in tree.leaf_paths(rb.space)),
                           tree.flatten(rb.space, rb[start:start + batch_size])))
            for key, want in expected.items():
                a = np.asarray(got[key]).astype(np.float64) if want.dtype.kind != "U" else got[key]
                b = want[start:start + batch_size]
                if want.dtype.kind == "U":
                    stats[key][0] = max(stats[key][0], float(np.any(a != b)))
                    continue
                err = np.abs(a - b.astype(np.float64))
                stats[key][0] = max(stats[key][0], float(err.max(initial=0)))
                stats[key][1] += float(err.sum())
                if want.dtype == np.uint8 and want.ndim == 4:
                    mse = np.maximum((err ** 2).reshape(len(err), -1).mean(axis=1), 1e-10)
                    stats[key][2] = min(stats[key][2], float(np.min(10 * np.log10(255.0 ** 2 / mse))))
    checks = []
    for key, (max_err, sum_err, psnr) in stats.items():
        lossy = not lossless[key]
        mean_err = sum_err / max(1, expected[key].size)
        ok = (psnr >= MIN_PSNR_DB and mean_err <= MAX_MEAN_ABS_ERROR) if lossy else max_err == 0
        checks.append(LeafCheck(key, storage_of[key], not lossy, max_err, mean_err,
                                None if not np.isfinite(psnr) else psnr, ok))
    return checks
