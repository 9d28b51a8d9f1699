"""The caller's time in ``append`` in a 30 Hz control loop with two 480x640 cameras (JPEG).

A robot's control loop cannot wait for disk: each step it reads its sensors, acts, and hands
the step to the buffer. This script paces a loop at ``--hz`` (default 30 Hz, a 33.3 ms step),
appends one step per tick (two ``(480, 640, 3)`` uint8 camera frames from
``trajstore.testing.moving_scene`` plus joint state and action), ends an episode every
``--episode-steps`` steps, and reports the caller's time in ``append`` (median and 99th
percentile, in ms) and in ``end_episode``, then reads every frame back and checks it against
what was written (JPEG: PSNR per frame, worst and mean). The writer's background thread
encodes and writes while the loop sleeps.

Run: ``python benchmarks/control_loop.py [--steps 3000] [--hz 30] [--src DIR]`` (``--src``
picks a trajstore source tree, e.g. an older checkout, through PYTHONPATH in a subprocess).

Figures (3000 steps, 30 Hz; 2 shared cores, load average 1.5-9; targets: median <= 1.6 ms, p99 <= 5 ms):
before the speed work 0.619 / 4.11, 0.587 / 5.37 and 0.561 / 11.5 ms (median / p99; max 16-159 ms
under load); after it 0.476 / 4.12 and 0.592 / 3.42 ms (max 21-115 ms); every frame >= 48.6 dB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(steps: int, hz: float, episode_steps: int, out: str) -> dict:
    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
    from trajstore.testing import moving_scene, psnr

    cam = {"kind": "image", "layout": "HWC", "fps": hz}
    space = DictSpace({
        "observation": DictSpace({
            "front": BoxSpace(0, 255, (480, 640, 3), np.uint8, metadata=cam),
            "wrist": BoxSpace(0, 255, (480, 640, 3), np.uint8, metadata=cam),
            "joints": BoxSpace(-np.pi, np.pi, (7,), np.float32),
        }),
        "action": BoxSpace(-1, 1, (7,), np.float32),
    })
    scenes = [moving_scene(64, 480, 640, seed=s) for s in (1, 2)]  # frames cycle: enough motion to encode
    rng = np.random.default_rng(0)
    joints = rng.uniform(-1, 1, (steps, 7)).astype(np.float32)

    def step(t: int) -> dict:
        return {"observation": {"front": scenes[0][t % 64], "wrist": scenes[1][t % 64], "joints": joints[t]},
                "action": joints[t]}

    rb = ReplayBuffer.create(DictStorage, space, cache_path=out, capacity=None,
                             **dict_storage_kwargs_from_space(space))
    period = 1.0 / hz
    in_append, in_end, late = [], [], 0
    tick = time.perf_counter()
    for t in range(steps):
        s = step(t)
        start = time.perf_counter()
        rb.append(s)
        in_append.append(time.perf_counter() - start)
        if (t + 1) % episode_steps == 0:
            start = time.perf_counter()
            rb.end_episode()
            in_end.append(time.perf_counter() - start)
        tick += period
        pause = tick - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        else:
            late += 1
    start = time.perf_counter()
    rb.end_episode()
    in_end.append(time.perf_counter() - start)
    blocked = getattr(rb, "write_stats", None)
    rb.close()

    worst, total, n = float("inf"), 0.0, 0
    with ReplayBuffer.load_from(out) as reader:
        assert len(reader) == steps, (len(reader), steps)
        for a in range(0, steps, 64):
            got = reader[a:a + 64]["observation"]
            b = min(steps, a + 64)
            idx = np.arange(a, b) % 64
            for key, scene in (("front", scenes[0]), ("wrist", scenes[1])):
                p = psnr(got[key], scene[idx])
                worst, total, n = min(worst, float(p.min())), total + float(p.sum()), n + len(p)
            assert np.array_equal(got["joints"], joints[a:b])
    ms = np.array(in_append) * 1e3
    return {"steps": steps, "hz": hz, "append_median_ms": float(np.median(ms)),
            "append_p99_ms": float(np.percentile(ms, 99)), "append_max_ms": float(ms.max()),
            "end_episode_median_ms": float(np.median(in_end) * 1e3), "late_ticks": late,
            "blocked_s": None if blocked is None else blocked.blocked_seconds,
            "psnr_min_db": worst, "psnr_mean_db": total / n,
            "bytes_per_step": sum(f.stat().st_size for f in __import__("pathlib").Path(out).rglob("*")
                                  if f.is_file()) / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--hz", type=float, default=30.0)
    parser.add_argument("--episode-steps", type=int, default=300)
    parser.add_argument("--src", action="append", default=[], help="LABEL=DIR of a trajstore source tree")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.steps, args.hz, args.episode_steps, args.child)))
        return
    sources = [s.split("=", 1) for s in args.src] or [["this", ""]]
    rows = []
    for label, src in sources:
        work = tempfile.mkdtemp(prefix="trajstore-control-loop-")
        try:
            env = dict(os.environ)
            if src:
                env["PYTHONPATH"] = src
            out = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--hz", str(args.hz),
                                  "--episode-steps", str(args.episode_steps), "--child", f"{work}/rb"],
                                 env=env, capture_output=True, text=True)
            if out.returncode:
                print(f"{label}: failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            rows.append((label, json.loads(out.stdout)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{args.steps} steps at {args.hz:g} Hz, two 480x640 JPEG cameras + joints; caller's time per call")
    print(f"{'source':10} {'append med ms':>13} {'p99 ms':>8} {'max ms':>8} {'end_episode ms':>15} "
          f"{'late ticks':>10} {'PSNR min/mean dB':>17} {'KB/step':>8}")
    for label, r in rows:
        print(f"{label:10} {r['append_median_ms']:13.3f} {r['append_p99_ms']:8.3f} {r['append_max_ms']:8.1f} "
              f"{r['end_episode_median_ms']:15.1f} {r['late_ticks']:10d} "
              f"{r['psnr_min_db']:8.1f}/{r['psnr_mean_db']:<8.1f} {r['bytes_per_step'] / 1024:8.1f}")


if __name__ == "__main__":
    main()
