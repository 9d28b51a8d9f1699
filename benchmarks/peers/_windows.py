"""The Diffusion-Policy-shaped window batch every contender reads, and the check of what it returns (NumPy only).

One batch: 64 anchor steps drawn at random; the camera frame and the state (joint positions and
velocities) at offsets ``[-1, 0]`` from the anchor, the action at offsets ``0 .. 15``, the reward
at the anchor. An offset outside the anchor's episode reads the episode's first or last step and
is flagged in a mask (the rule of Diffusion Policy's ``SequenceSampler`` and of LeRobot's
``delta_timestamps``): a Diffusion Policy training sample with two observed steps and 16 actions
from the last observed step on.

A contender script offers this as a ``windows`` command (see ``_workload.run_contender``) through
an object with three methods:

* ``prepare(path, data, episode_len, variant) -> dict``: write the workload into ``path`` in the
  library's own layout for reading windows (not timed here; returns a ``camera`` label);
* ``open(path, variant) -> sample``: open it; ``sample(rng)`` returns one batch in the library's
  own form (this call is what is timed);
* ``normalize(batch) -> (leaves, masks)``: that batch as ``{path: array}`` with frames uint8
  ``(B, 2, H, W, 3)``, state ``(B, 2, 7)``, action ``(B, 16, 7)``, reward ``(B,)`` and
  ``{path: bool (B, T)}`` masks (True = padded), for :func:`check` only (never timed).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

import _workload as wl

BATCH = 64
OBS_OFFSETS = (-1, 0)
ACTION_OFFSETS = tuple(range(16))
OBS_KEYS = (wl.FRAME_KEY, "observation/joint_pos", "observation/joint_vel")
STATE_KEYS = ("observation/joint_pos", "observation/joint_vel")
OFFSETS = {**{k: OBS_OFFSETS for k in OBS_KEYS}, "action": ACTION_OFFSETS}
SPAN = (min(OBS_OFFSETS + ACTION_OFFSETS), max(OBS_OFFSETS + ACTION_OFFSETS))  # (-1, 15): 17 steps
MIN_FRAME_PSNR = 25.0  # dB against the frame of the step it should be


def expected_steps(anchors: np.ndarray, offsets: tuple[int, ...], episode_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Step indices ``(B, T)`` read for ``anchors`` at ``offsets`` (clamped into the episode), and the pad mask."""
    raw = anchors[:, None] + np.asarray(offsets)[None, :]
    first = (anchors // episode_len * episode_len)[:, None]
    steps = np.clip(raw, first, first + episode_len - 1)
    return steps, steps != raw


def _anchors(state_now: np.ndarray, data: dict[str, np.ndarray]) -> np.ndarray:
    """The step index of each row of the state at offset 0 (-1 where no step has that state)."""
    table = np.concatenate([data[k] for k in STATE_KEYS], 1)
    where = {row.tobytes(): i for i, row in enumerate(table)}
    return np.array([where.get(np.ascontiguousarray(row).tobytes(), -1) for row in state_now], np.int64)


def check(leaves: dict[str, np.ndarray], masks: dict[str, np.ndarray], data: dict[str, np.ndarray],
          episode_len: int) -> dict[str, Any]:
    """Compare one normalised batch with the workload: which steps it holds, padding, masks, frames.

    The anchor of each window is found from its state at offset 0 (every step's state is unique);
    every other entry must then be the workload's value at the expected (clamped) step, every mask
    must flag exactly the clamped offsets, and every frame must match its step at PSNR >= 25 dB with
    no frame 2 or 3 steps away nearer (``_frame_match``); ``frames_nearest_own`` counts the frames
    that match their own step better than any other within 3 steps (all of them for lossless and
    JPEG frames).
    """
    problems: list[str] = []
    now = OBS_OFFSETS.index(0)
    anchors = _anchors(np.concatenate([leaves[k][:, now] for k in STATE_KEYS], 1), data)
    if (anchors < 0).any():
        return {"ok": False, "problems": [f"{int((anchors < 0).sum())} windows hold a state no step has"]}
    psnr_min, own_best = float("inf"), [0, 0]
    for key, offsets in OFFSETS.items():
        steps, pad = expected_steps(anchors, offsets, episode_len)
        got = np.asarray(leaves[key])
        want_shape = (len(anchors), len(offsets)) + data[key].shape[1:]
        if got.shape != want_shape:
            problems.append(f"{key}: shape {got.shape}, want {want_shape}")
            continue
        mask = masks.get(key)
        if mask is None or not np.array_equal(np.asarray(mask, bool), pad):
            problems.append(f"{key}: mask " + ("missing" if mask is None else
                                               f"differs at {int((np.asarray(mask, bool) != pad).sum())} entries"))
        if key != wl.FRAME_KEY:
            bad = ~np.all((got == data[key][steps]).reshape(*steps.shape, -1), -1)
            if bad.any():
                problems.append(f"{key}: {int(bad.sum())} entries are not the expected step's value")
            continue
        q, nearest_own, best_near = _frame_match(got.reshape(-1, *got.shape[2:]), data[key], steps.reshape(-1))
        wrong = (q < MIN_FRAME_PSNR) | ~best_near
        if wrong.any():
            problems.append(f"{key}: {int(wrong.sum())} frames below {MIN_FRAME_PSNR} dB or nearer a step "
                            "2-3 steps away than their own")
        own_best = [own_best[0] + int(nearest_own.sum()), own_best[1] + len(nearest_own)]
        psnr_min = min(psnr_min, float(q.min()))
    if "reward" in leaves and not np.array_equal(np.asarray(leaves["reward"]).reshape(-1), data["reward"][anchors]):
        problems.append("reward: not the anchor step's value")
    _, obs_pad = expected_steps(anchors, OBS_OFFSETS, episode_len)
    _, act_pad = expected_steps(anchors, ACTION_OFFSETS, episode_len)
    return {"ok": not problems, "problems": problems, "windows": int(len(anchors)),
            "left_padded": int(obs_pad.any(1).sum()), "right_padded": int(act_pad.any(1).sum()),
            "psnr_min": psnr_min, "frames_nearest_own": own_best}


def _frame_match(got: np.ndarray, frames: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, ...]:
    """PSNR of each frame against its step's frame; whether no other step's frame within 3 steps is
    nearer (lossless and near-lossless codecs); whether the nearest within 3 steps is 1 step away at most.

    The second test is too strict for inter-frame video: at LeRobot's default ``crf=30`` a frame
    between two keyframes decodes nearer the keyframe before it than its own step's frame.
    """
    q = wl.psnr(got, frames[steps])
    best_d = np.zeros(len(steps), np.int64)
    best_q = q.copy()
    for d in (-3, -2, -1, 1, 2, 3):
        other = steps + d
        inside = (other >= 0) & (other < len(frames))
        qd = np.full_like(q, -np.inf)
        qd[inside] = wl.psnr(got[inside], frames[other[inside]])
        better = qd > best_q
        best_q, best_d = np.where(better, qd, best_q), np.where(better, d, best_d)
    return q, best_d == 0, np.abs(best_d) <= 1


def merge_checks(checks: list[dict[str, Any]]) -> dict[str, Any]:
    problems = [p for c in checks for p in c.get("problems", [])]
    return {"ok": all(c.get("ok") for c in checks), "problems": problems[:5],
            **{k: sum(c.get(k, 0) for c in checks) for k in ("windows", "left_padded", "right_padded")},
            "psnr_min": min((c.get("psnr_min", float("inf")) for c in checks), default=None),
            "frames_nearest_own": [sum(c.get("frames_nearest_own", [0, 0])[i] for c in checks) for i in (0, 1)]}


def run(contender: Any, args: Any) -> dict[str, Any]:
    """The ``windows`` command of a contender script (see the module docstring); returns its result fields."""
    if args.prepare:
        data, episode_len = wl.load(args.workload)
        t0 = time.perf_counter()
        out = contender.prepare(args.path, data, episode_len, args.variant)
        out["prepare_s"] = time.perf_counter() - t0
        out["bytes"], out["bytes_allocated"] = wl.folder_bytes(args.path)
        return out
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    sample: Callable[[np.random.Generator], Any] = contender.open(args.path, args.variant)
    open_s = time.perf_counter() - t0
    out: dict[str, Any] = {"open_ms": open_s * 1e3}
    if args.check_batches:  # also the warm-up
        data, episode_len = wl.load(args.workload)
        out["check"] = merge_checks([check(*contender.normalize(sample(rng)), data, episode_len)
                                     for _ in range(args.check_batches)])
    else:
        sample(rng)
    times = []
    for _ in range(args.batches):
        t = time.perf_counter()
        sample(rng)
        times.append(time.perf_counter() - t)
    out["batch_ms"] = [x * 1e3 for x in times]
    return out
