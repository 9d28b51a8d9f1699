"""The recording workload every contender of the peer benchmarks writes and reads (NumPy only).

One step is a nested dict: a 128x128x3 uint8 camera frame (metadata ``kind="image"``) and four
low-dim leaves, joint positions and velocities (7,) float32, action (7,) float32 and reward ()
float32. The workload is 2048 steps in 16 episodes of 128 steps.

The harness generates the data once per run into a folder of ``.npy`` files
(:func:`generate`); each contender's script loads it into RAM (:func:`load`), so every library
is handed exactly the same steps. Frames are a synthetic camera view (smooth lighting
gradients, a static textured background, two moving objects and mild sensor noise), which
compresses about like a simple simulated scene.

This module is imported by the scripts that run inside the peers' own venvs, so it needs
nothing but NumPy and the standard library. It also holds what those scripts share: the
command line of a contender script, folder sizes, PSNR and the read-back check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

H = W = 128
STEPS = 2048
EPISODE_LEN = 128
JPEG_QUALITY = 75

# (path, shape, dtype, low, high, metadata); "/" joins nested keys
LEAVES: list[tuple[str, tuple[int, ...], str, float, float, dict[str, Any]]] = [
    ("observation/camera", (H, W, 3), "uint8", 0, 255, {"kind": "image", "layout": "HWC", "fps": 10}),
    ("observation/joint_pos", (7,), "float32", -10.0, 10.0, {}),
    ("observation/joint_vel", (7,), "float32", -10.0, 10.0, {}),
    ("action", (7,), "float32", -1.0, 1.0, {}),
    ("reward", (), "float32", -10.0, 10.0, {}),
]
FRAME_KEY = "observation/camera"
LOW_DIM_KEYS = [k for k, *_ in LEAVES if k != FRAME_KEY]


def _frames(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W].astype(np.float32) / H
    # static background texture: low-frequency noise, upsampled from 16x16 with bilinear weights
    coarse = rng.normal(0, 18, (17, 17, 3)).astype(np.float32)
    gy, gx = y * 16, x * 16
    iy, ix = gy.astype(int), gx.astype(int)
    fy, fx = (gy - iy)[..., None], (gx - ix)[..., None]
    tex = ((1 - fy) * (1 - fx) * coarse[iy, ix] + (1 - fy) * fx * coarse[iy, ix + 1]
           + fy * (1 - fx) * coarse[iy + 1, ix] + fy * fx * coarse[iy + 1, ix + 1])
    base = np.stack([90 + 60 * x, 100 + 40 * y, 140 - 50 * x * y], -1) + tex
    out = np.empty((n, H, W, 3), np.uint8)
    phase = rng.uniform(0, 2 * np.pi, 4)
    for t in range(n):
        light = 1 + 0.08 * np.sin(t / 30 + phase[0])
        img = base * light
        cy, cx = 0.5 + 0.25 * np.sin(t / 17 + phase[1]), 0.5 + 0.3 * np.cos(t / 23 + phase[2])
        disc = np.clip((0.09 - np.hypot(y - cy, x - cx)) * 60, 0, 1)[..., None]
        img = img * (1 - disc) + disc * np.array([210, 70, 40], np.float32)
        by, bx = 0.7 + 0.1 * np.sin(t / 11 + phase[3]), (0.2 + t / 300) % 1.0
        box = ((np.abs(y - by) < 0.06) & (np.abs(x - bx) < 0.1))[..., None]
        img = np.where(box, np.array([40, 160, 90], np.float32), img)
        img += rng.normal(0, 2, img.shape).astype(np.float32)
        out[t] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def generate(folder: str | os.PathLike, steps: int = STEPS, episode_len: int = EPISODE_LEN, seed: int = 0) -> Path:
    """Write the workload to ``folder`` (one ``.npy`` per leaf plus ``workload.json``); returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    assert steps % episode_len == 0, "steps must be whole episodes"
    episodes = steps // episode_len
    rng = np.random.default_rng(seed)
    frames = np.concatenate([_frames(episode_len, seed * 1000 + e) for e in range(episodes)])
    t = np.arange(steps, dtype=np.float64) % episode_len
    freq = rng.uniform(0.02, 0.08, (episodes, 7)).repeat(episode_len, 0)
    amp = rng.uniform(0.3, 1.5, (episodes, 7)).repeat(episode_len, 0)
    off = rng.uniform(-1, 1, (episodes, 7)).repeat(episode_len, 0)
    data = {
        FRAME_KEY: frames,
        "observation/joint_pos": (off + amp * np.sin(freq * t[:, None])).astype(np.float32),
        "observation/joint_vel": (amp * freq * np.cos(freq * t[:, None])).astype(np.float32),
        "action": rng.uniform(-1, 1, (steps, 7)).astype(np.float32),
        "reward": rng.uniform(-1, 1, steps).astype(np.float32),
    }
    for key, value in data.items():
        np.save(folder / (key.replace("/", ".") + ".npy"), value)
    (folder / "workload.json").write_text(json.dumps({"steps": steps, "episode_len": episode_len, "seed": seed}))
    return folder


def load(folder: str | os.PathLike, keys: list[str] | None = None) -> tuple[dict[str, np.ndarray], int]:
    """The flat ``{path: array}`` data in RAM, and the episode length."""
    folder = Path(folder)
    info = json.loads((folder / "workload.json").read_text())
    keys = [k for k, *_ in LEAVES] if keys is None else keys
    return {k: np.load(folder / (k.replace("/", ".") + ".npy")) for k in keys}, int(info["episode_len"])


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a/b": x}`` -> ``{"a": {"b": x}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split("/")
        d = out
        for p in parents:
            d = d.setdefault(p, {})
        d[leaf] = value
    return out


def flatten(nested: Any, prefix: str = "") -> dict[str, Any]:
    """The inverse of :func:`nest` for any mapping with ``items()`` (dicts, TensorDicts)."""
    out: dict[str, Any] = {}
    for key, value in nested.items():
        path = prefix + key
        if hasattr(value, "items"):
            out.update(flatten(value, path + "/"))
        else:
            out[path] = value
    return out


def steps_of(data: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """One nested dict per step, with owned (copied) leaves, as an environment would hand them over."""
    n = len(data[FRAME_KEY])
    return [nest({k: np.array(v[i]) for k, v in data.items()}) for i in range(n)]


def episodes_of(data: dict[str, np.ndarray], episode_len: int) -> list[dict[str, Any]]:
    """One nested dict of ``(episode_len, ...)`` arrays per episode."""
    n = len(data[FRAME_KEY])
    return [nest({k: np.ascontiguousarray(v[a:a + episode_len]) for k, v in data.items()})
            for a in range(0, n, episode_len)]


def folder_bytes(folder: str | os.PathLike) -> tuple[int, int]:
    """``(sum of file sizes, bytes allocated on disk)`` of every file under ``folder``."""
    size = alloc = 0
    for root, _, files in os.walk(folder):
        for name in files:
            st = os.stat(os.path.join(root, name))
            size += st.st_size
            alloc += st.st_blocks * 512
    return size, alloc


def psnr(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """dB per frame of ``(N, H, W, 3)`` uint8 arrays (inf where equal); works in blocks of 64 frames."""
    mse = np.empty(len(actual))
    for a in range(0, len(actual), 64):
        d = (actual[a:a + 64].astype(np.int16) - expected[a:a + 64].astype(np.int16)).astype(np.float64)
        d = d.reshape(len(d), -1)
        mse[a:a + 64] = np.einsum("ij,ij->i", d, d) / d.shape[1]
    with np.errstate(divide="ignore"):
        return 10 * np.log10(255.0 ** 2 / mse)


def check(read: dict[str, np.ndarray], data: dict[str, np.ndarray], episodes: int | None = None,
          expected_episodes: int | None = None) -> dict[str, Any]:
    """Compare what a contender read back (flat dict, all steps) with what it was given.

    Low-dim leaves must be equal (shape, dtype and values); frames are compared by PSNR; the
    number of episodes the folder records, for a library that records episodes, must match.
    """
    bad = []
    if episodes is not None and episodes != expected_episodes:
        bad.append(f"{episodes} episodes recorded, want {expected_episodes}")
    for key in LOW_DIM_KEYS:
        got = np.asarray(read[key])
        want = data[key]
        if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
            bad.append(f"{key}: got {got.dtype}{got.shape}, want {want.dtype}{want.shape}"
                       + ("" if got.shape != want.shape else f", {int(np.sum(got != want))} values differ"))
    frames = np.asarray(read[FRAME_KEY])
    if frames.shape != data[FRAME_KEY].shape or frames.dtype != np.uint8:
        bad.append(f"{FRAME_KEY}: got {frames.dtype}{frames.shape}, want uint8{data[FRAME_KEY].shape}")
        return {"low_dim_exact": False, "problems": bad, "psnr_min": None, "psnr_mean": None}
    q = psnr(frames, data[FRAME_KEY])
    finite = q[np.isfinite(q)]
    return {"low_dim_exact": not bad, "problems": bad, "psnr_min": float(q.min()),
            "psnr_mean": float(finite.mean()) if len(finite) else float("inf")}


# ---- the command line every contender script offers -------------------------------------------

def run_contender(write: Callable[..., dict[str, Any]], reopen: Callable[..., dict[str, Any]],
                  read_all: Callable[[str], tuple[dict[str, np.ndarray], int | None]],
                  info: Callable[[], dict[str, Any]], windows: Any = None) -> None:
    """Parse a contender script's command line, run the command and print one JSON line.

    Commands (the script's module-level imports are done before any of them starts):

    * ``import``: nothing; the harness times the whole process to know what starting and
      importing cost.
    * ``write --workload W --out DIR --mode append|extend [--check]``: ``write(out, data,
      episode_len, mode)`` records the workload into the new folder ``out`` and returns
      ``steps``, ``total_s`` (from creating the buffer to closing it), ``end_episode_s`` (the
      end-of-episode calls alone), ``create_s``, ``record_s``, ``close_s`` and a ``camera``
      label; the folder's ``bytes`` and ``bytes_allocated`` are added; with ``--check`` the
      folder is then reopened, ``read_all(out)`` reads every step back (and the number of
      episodes, or None) and :func:`check` compares them with the workload.
    * ``reopen --path DIR --index I [--workload W]``: ``reopen(path, index)`` opens an existing
      folder and reads one step, returning ``{"open_ms", "read_ms", "step"}``; with
      ``--workload`` the step is compared with the workload (``step_ok``: low-dim leaves equal;
      ``frame_psnr`` against the frame written at ``I``, ``frame_psnr_neighbours`` the best
      against the frames at ``I - 1`` and ``I + 1``).
    * ``windows --workload W --path DIR [--variant V] --prepare``: write the workload into ``DIR``
      for window reads; ``windows --workload W --path DIR [--variant V] [--batches N]
      [--check-batches K] [--seed S]``: open it, check ``K`` batches (the warm-up) and time ``N``
      more (``windows`` is the script's contender object; see ``_windows``). A script without one
      prints ``{"unsupported": ...}``. A ``write`` may likewise return ``{"unsupported": reason}``.
    """
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["import", "write", "reopen", "windows"])
    ap.add_argument("--workload")
    ap.add_argument("--out")
    ap.add_argument("--mode", choices=["append", "extend"], default="append")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--path")
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--variant", default="")
    ap.add_argument("--prepare", action="store_true")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--check-batches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    result: dict[str, Any] = {"command": args.command, **info()}
    if args.command == "write":
        data, episode_len = load(args.workload)
        result.update(write(args.out, data, episode_len, args.mode))
        result["bytes"], result["bytes_allocated"] = folder_bytes(args.out)
        if args.check and "unsupported" not in result:
            t0 = time.perf_counter()
            read, episodes = read_all(args.out)
            result["check"] = check(read, data, episodes, len(data[FRAME_KEY]) // episode_len)
            result["check_s"] = time.perf_counter() - t0
    elif args.command == "windows":
        if windows is None:
            result["unsupported"] = "no window reads in this contender"
        else:
            import _windows
            result.update(_windows.run(windows, args))
    elif args.command == "reopen":
        out = reopen(args.path, args.index)
        step = flatten(out.pop("step"))
        result.update(out)
        if args.workload:
            data, _ = load(args.workload, LOW_DIM_KEYS)
            result["step_ok"] = all(np.array_equal(np.asarray(step[k]), data[k][args.index]) for k in LOW_DIM_KEYS)
            frames = np.load(Path(args.workload) / (FRAME_KEY.replace("/", ".") + ".npy"), mmap_mode="r")
            frame = np.asarray(step[FRAME_KEY])
            if frame.shape == frames.shape[1:]:
                near = [i for i in (args.index - 1, args.index + 1) if 0 <= i < len(frames)]
                result["frame_psnr"] = float(psnr(frame[None], frames[args.index][None])[0])
                result["frame_psnr_neighbours"] = float(psnr(np.repeat(frame[None], len(near), 0), frames[near]).max())
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def time_recording(items: list[Any], add: Callable[[Any], Any], end: Callable[[], Any],
                   per_episode: int) -> tuple[float, float]:
    """Feed ``items`` to ``add``, calling ``end`` after every ``per_episode`` items.

    Returns (seconds in the whole loop, seconds in ``end`` alone), by ``time.perf_counter``.
    """
    start, in_end = time.perf_counter(), 0.0
    for i, item in enumerate(items):
        add(item)
        if (i + 1) % per_episode == 0:
            t = time.perf_counter()
            end()
            in_end += time.perf_counter() - t
    return time.perf_counter() - start, in_end


def write_result(steps: int, t_create: float, t0: float, record_s: float, end_s: float, t_close: float,
                 t1: float, camera: str) -> dict[str, Any]:
    """The JSON line every contender's ``write`` prints (seconds)."""
    return {"steps": steps, "create_s": t0 - t_create, "record_s": record_s, "end_episode_s": end_s,
            "close_s": t1 - t_close, "total_s": t1 - t_create, "camera": camera}
