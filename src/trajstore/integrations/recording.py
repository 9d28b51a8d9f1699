"""The main job: record simulator episodes into a routed buffer, and check them read back.

:func:`record_pusht` records PushT episodes under the scripted policy through
:func:`~trajstore.storages.dict_storage_kwargs_from_space`; with ``reference`` it also
saves every recorded step, uncompressed by any lossy codec, to a ``.npz`` file that
:func:`verify_buffer` compares against the buffer (in another process, from the folder alone).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import tree

#: Lossy leaves must match the reference to within these bounds (ImageStorage's default JPEG,
#: quality 90 4:4:4, or default video settings, on PushT's flat-shaded 96x96 frames; see
#: tests/storages for the codecs' bounds). Measured on ``make demo`` (10 episodes, 3000 frames)
#: with JPEG: worst frame 40.9 dB, mean absolute error 0.64 levels (45.6 dB and 0.35 at quality 95).
MIN_PSNR_DB = 30.0
MAX_MEAN_ABS_ERROR = 3.0


def record_pusht(out: str | os.PathLike, episodes: int, *, video: bool = False, capacity: int | None = None,
                 seed: int = 0, max_steps: int | None = None, image_format: str = "JPEG",
                 reference: str | os.PathLike | None = None, progress: bool = True) -> ReplayBuffer:
    """Record ``episodes`` PushT episodes into a new buffer folder ``out``; returns it closed.

    Args:
        video: store the camera with :class:`VideoStorage` (at the env's 10 fps) instead of images.
        capacity: ring capacity in steps, or ``None`` (unbounded).
        seed: episode ``k`` resets the env with ``seed + k`` (kept as its ``data["seed"]``); the policy
            noise uses ``seed`` too.
        max_steps: cap on steps per episode (default: the env's 300).
        image_format: ``"JPEG"`` or ``"PNG"`` for the image storage.
        reference: also save the raw steps to this ``.npz`` for :func:`verify_buffer`.

    Raises:
        StorageExistsError: ``out`` exists and is not empty.
        ImportError: gymnasium / gym-pusht (or av, for video) are not installed: ``pip install trajstore[sim]``.
    """
    from tqdm import tqdm

    from trajstore.integrations import pusht
    from trajstore.integrations.gymnasium import run_episode, transition_space
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    space = transition_space(pusht.observation_space(), pusht.action_space())
    routing: dict[str, Any] = {"kind_kwargs": {"image": {"format": image_format}}}
    if video:
        from trajstore.storages.video import VideoStorage

        routing = {"kind_storage_cls": {"image": VideoStorage}}
    env = pusht.make_env()
    policy = pusht.ScriptedPushPolicy()
    rng = np.random.default_rng(seed)
    kept: list[dict] = []
    rb = ReplayBuffer.create(DictStorage, space, cache_path=out, capacity=capacity,
                             **dict_storage_kwargs_from_space(space, **routing))
    try:
        with tqdm(total=episodes, unit="episode", disable=not progress, desc="recording PushT") as bar:
            for k in range(episodes):
                steps = list(run_episode(env, policy, seed=seed + k, rng=rng, observation=pusht.to_observation,
                                         max_steps=max_steps))
                batch = {key: _stack([s[key] for s in steps]) for key in ("observation", "action", "reward",
                                                                           "terminated", "truncated")}
                rb.extend(batch)
                rb.end_episode(seed=seed + k)
                if reference is not None:
                    kept.append(batch)
                bar.set_postfix(steps=rb.total_steps)
                bar.update()
    finally:
        rb.close()
        env.close()
    if reference is not None:
        _save_reference(reference, space, kept, capacity)
    return rb


def _stack(values: list[Any]) -> Any:
    if isinstance(values[0], dict):
        return {k: _stack([v[k] for v in values]) for k in values[0]}
    return np.stack([np.asarray(v) for v in values])


def _save_reference(path: str | os.PathLike, space: Any, batches: list[dict], capacity: int | None) -> None:
    columns = zip(*(tree.flatten(space, b) for b in batches))  # per leaf: its arrays, batch by batch
    flat = {path: np.concatenate(arrays) for path, arrays in zip(tree.leaf_paths(space), columns)}
    if capacity is not None:
        flat = {p: v[-capacity:] for p, v in flat.items()}
    np.savez_compressed(path, **{"|".join(p): v for p, v in flat.items()})


@dataclass
class LeafCheck:
    key: str
    storage: str
    exact: bool
    max_abs_error: float
    mean_abs_error: float
    min_psnr_db: float | None  # lossy leaves: worst per-step PSNR
    ok: bool


def verify_buffer(path: str | os.PathLike, reference: str | os.PathLike, *, batch_size: int = 256) -> list[LeafCheck]:
    """Compare every step of the buffer at ``path`` with the reference ``.npz``.

    Leaves in lossless storages (HDF5, PNG, memmap) must be equal; JPEG and video leaves must reach
    :data:`MIN_PSNR_DB` on every step and :data:`MAX_MEAN_ABS_ERROR` overall.

    Raises:
        ValueError: the buffer and the reference hold different numbers of steps or leaves.
    """
    from trajstore.replay_buffer.info import describe

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
