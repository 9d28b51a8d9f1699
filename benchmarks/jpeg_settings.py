"""JPEG quality x chroma subsampling on real camera frames: bytes, PSNR, encode and decode time.

The grid is quality 75/85/90/95 x subsampling 4:4:4/4:2:2/4:2:0, encoded and decoded through
``trajstore.storages.frames._image_codec`` (simplejpeg, what ``ImageStorage`` runs). Frame sets:

* **pusht**: 96x96 frames of gym-pusht's ``PushT-v0`` under the scripted policy of
  ``trajstore.recording.pusht`` (episodes reset with seeds 0, 1, ..., at most 100 steps
  each): flat-shaded objects on a white background, a 5-pixel blue agent. Needs the ``sim`` extra.
* **pusher**, **cheetah**: 96x96 frames of gymnasium's MuJoCo ``Pusher-v5`` (camera moved closer
  to the table) and ``HalfCheetah-v5`` (checkered floor) under uniformly random actions (seeded).
  Needs ``gymnasium[mujoco]`` and an OpenGL context; headless, ``MUJOCO_GL=egl`` (set here unless
  already set). Skipped with the reason printed if MuJoCo cannot render.
* **photos**, **photos96**: the colour photos that ship inside scikit-image (``skimage.data``:
  astronaut, chelsea, coffee, rocket, the left motorcycle stereo image; 300x451 to 500x741),
  at their own size and shrunk to 96x96 (centre square, Lanczos). Nothing is downloaded.

Per setting: mean bytes per frame, PSNR in dB (``trajstore.testing.psnr``, RGB) mean and min
over the set's frames, the largest error of any pixel and channel (levels), and encode and
decode time in microseconds of CPU per frame (``time.thread_time``, so time spent preempted on a
busy machine is not counted; one thread; best of ``--repeat`` passes over the set, the passes
interleaving the settings).
``bytes x`` and ``enc x`` are ratios against quality 95 4:4:4 (the default before this
benchmark) in the same run; absolute times depend on the machine.

Run: ``python benchmarks/jpeg_settings.py [--frames 200] [--repeat 20] [--sets pusht,pusher,...]``
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Callable

import numpy as np

from trajstore.storages.frames import _image_codec as codec
from trajstore.testing import psnr

QUALITIES = (75, 85, 90, 95)
SUBSAMPLINGS = ("444", "422", "420")
BASELINE = (95, "444")


# -- frame sets ------------------------------------------------------------------------------------
def pusht_frames(n: int) -> list[np.ndarray]:
    from trajstore.recording import pusht
    from trajstore.recording.loop import run_episode

    env, policy, rng = pusht.make_env(), pusht.ScriptedPushPolicy(), np.random.default_rng(0)
    frames: list[np.ndarray] = []
    seed = 0
    while len(frames) < n:
        for step in run_episode(env, policy, seed=seed, rng=rng, observation=pusht.to_observation, max_steps=100):
            frames.append(step["observation"]["pixels"])
        seed += 1
    env.close()
    return frames[:n]


def mujoco_frames(env_id: str, n: int, **make_kwargs: object) -> list[np.ndarray]:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import gymnasium as gym

    env = gym.make(env_id, render_mode="rgb_array", width=96, height=96, **make_kwargs)
    env.action_space.seed(0)
    frames: list[np.ndarray] = []
    seed = 0
    while len(frames) < n:
        env.reset(seed=seed)
        for _ in range(100):
            frames.append(np.ascontiguousarray(env.render()))
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
        seed += 1
    env.close()
    return frames[:n]


def photos() -> list[np.ndarray]:
    from skimage import data

    return [data.astronaut(), data.chelsea(), data.coffee(), data.rocket(), data.stereo_motorcycle()[0]]


def shrink(frame: np.ndarray, side: int = 96) -> np.ndarray:
    from PIL import Image

    h, w = frame.shape[:2]
    s = min(h, w)
    top, left = (h - s) // 2, (w - s) // 2
    square = Image.fromarray(frame[top:top + s, left:left + s])
    return np.asarray(square.resize((side, side), Image.Resampling.LANCZOS))


FRAME_SETS: dict[str, Callable[[int], list[np.ndarray]]] = {
    "pusht": pusht_frames,
    "pusher": lambda n: mujoco_frames("Pusher-v5", n, default_camera_config={
        "distance": 1.2, "elevation": -50.0, "azimuth": 120.0, "lookat": np.array([0.4, -0.3, 0.0])}),
    "cheetah": lambda n: mujoco_frames("HalfCheetah-v5", n),
    "photos": lambda n: photos(),
    "photos96": lambda n: [shrink(f) for f in photos()],
}


# -- measuring ---------------------------------------------------------------------------------------
def pass_us(fn: Callable[[int], object], n: int) -> float:
    """CPU time of this thread for ``fn(0) ... fn(n - 1)``, in microseconds per call."""
    t0 = time.thread_time_ns()
    for i in range(n):
        fn(i)
    return (time.thread_time_ns() - t0) / n / 1e3


def measure(frames: list[np.ndarray], repeat: int) -> dict[tuple[int, str], dict[str, float]]:
    """Every setting of the grid on ``frames``; timing passes interleave the settings (best pass kept)."""
    rows: dict[tuple[int, str], dict[str, float]] = {}
    payloads: dict[tuple[int, str], list[bytes]] = {}
    decoded = [np.empty_like(f) for f in frames]
    for q in QUALITIES:
        for s in SUBSAMPLINGS:
            payloads[q, s] = [codec.encode(f, "JPEG", q, s) for f in frames]
            for p, out in zip(payloads[q, s], decoded):
                codec.decode_into(p, out, "JPEG")
            db = np.array([psnr(d[None], f[None])[0] for d, f in zip(decoded, frames)])
            rows[q, s] = {"bytes": float(np.mean([len(p) for p in payloads[q, s]])), "psnr_mean": float(db.mean()),
                          "psnr_min": float(db.min()), "enc_us": np.inf, "dec_us": np.inf,
                          "max_err": max(int(np.abs(d.astype(np.int16) - f).max()) for d, f in zip(decoded, frames))}
    n = len(frames)
    for _ in range(repeat):  # a load spike on a shared machine hits one pass of every setting, not one setting
        for (q, s), row in rows.items():
            row["enc_us"] = min(row["enc_us"], pass_us(lambda i: codec.encode(frames[i], "JPEG", q, s), n))
            data = payloads[q, s]
            row["dec_us"] = min(row["dec_us"], pass_us(lambda i: codec.decode_into(data[i], decoded[i], "JPEG"), n))
    return rows


def report(name: str, frames: list[np.ndarray], repeat: int) -> None:
    sizes = sorted({f"{f.shape[1]}x{f.shape[0]}" for f in frames})
    raw = float(np.mean([f.size for f in frames]))
    print(f"\n{name}: {len(frames)} frames, {', '.join(sizes)}; raw {raw:.0f} bytes/frame")
    print(f"  {'setting':10s} {'bytes':>8s} {'bytes x':>7s} {'PSNR':>6s} {'min':>6s} {'maxerr':>6s} "
          f"{'enc us':>8s} {'enc x':>6s} {'dec us':>8s}")
    rows = measure(frames, repeat)
    base = rows[BASELINE]
    for (q, s), r in rows.items():
        mark = "  <- default" if (q, s) == (codec.JPEG_QUALITY, codec.JPEG_SUBSAMPLING) else ""
        print(f"  q{q} {s[0]}:{s[1]}:{s[2]}  {r['bytes']:8.0f} {r['bytes'] / base['bytes']:7.2f} "
              f"{r['psnr_mean']:6.1f} {r['psnr_min']:6.1f} {r['max_err']:6d} {r['enc_us']:8.1f} "
              f"{r['enc_us'] / base['enc_us']:6.2f} {r['dec_us']:8.1f}{mark}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=200, help="frames per recorded set (pusht, pusher, cheetah)")
    ap.add_argument("--repeat", type=int, default=20, help="timing passes over each set; the best is kept")
    ap.add_argument("--sets", default=",".join(FRAME_SETS), help="comma-separated, of " + ", ".join(FRAME_SETS))
    args = ap.parse_args()
    import simplejpeg

    print(f"simplejpeg {simplejpeg.__version__}; default q{codec.JPEG_QUALITY} {codec.JPEG_SUBSAMPLING}; "
          f"CPU time, best of {args.repeat} passes, one thread")
    for name in args.sets.split(","):
        try:
            frames = FRAME_SETS[name](args.frames)
        except Exception as exc:  # a simulator that is not installed or cannot render here
            print(f"\n{name}: skipped ({type(exc).__name__}: {exc})")
            continue
        report(name, frames, args.repeat)


if __name__ == "__main__":
    main()
