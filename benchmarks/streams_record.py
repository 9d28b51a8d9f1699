"""Recording sensors at their own rates: the caller's time in ``StreamBuffer.append`` against ``ReplayBuffer.append``.

A robot records each sensor from its driver's thread: two 480x640 RGB cameras at 30 Hz
(``wrist``, ``front``; JPEG, the routing default for ``kind="image"``), joint positions at 500 Hz
(float32 ``(7,)``) and a force-torque sensor at 1 kHz (float32 ``(6,)``), each sample with an
int64-nanosecond timestamp (the nominal time plus jitter of up to +-20% of the period). Four threads,
one per stream, record ``--seconds`` (60) of simulated time in episodes of ``--episode-seconds`` (20);
between episodes the threads wait and the main thread ends the episode.

Every sample goes, from the same thread and in the same run, to both contenders (the one called
first alternates from sample to sample, so that load hits both alike):

* ``stream``: one ``StreamBuffer`` holding the four streams: ``buf.append(name, value, t_ns)``;
* ``replay``: one ``ReplayBuffer`` per sensor with the leaves a stream keeps (``DictSpace({"timestamp":
  int64 (), "value": the sensor's space})``, routed by ``dict_storage_kwargs_from_space``):
  ``rb.append({"timestamp": t_ns, "value": value})``; at an episode's end each of the four
  ``rb.end_episode()`` (their times summed).

Two pacings (``--modes``): ``paced``, each thread sleeps until its sample's simulated time (a real
robot: the writers encode while the threads wait), and ``fast``, no sleep (throughput: the backlog grows
until staging is full, then ``append`` waits: backpressure, ``write_stats.blocked_seconds``).

Reported per source, pacing and kind (``low-dim``: joints + force-torque appends; ``camera``: both
cameras' appends): the caller's time per ``append`` in us, median / p99 / max, both contenders, and
the ratios stream / replay (target <= 1.5). Backlog: every ``--sample-every`` s (wall) a monitor
thread reads, per sensor, the samples appended minus ``write_stats.steps_written`` (the staged and
queued samples not yet written); reported are its maximum over the first and the second half of the
run and the slope of a line fit (samples/s; about 0: no growth), plus ``blocked_seconds``; the stream
side through ``StreamBuffer.write_stats(name)``. ``end_episode`` ms: median over the episodes where that side ended
first (the two sides alternate; the first one waits for the write-behind of both, the second finds
little left). ``late``: per stream, the share of paced samples whose thread woke more than one period
late (CPU starvation or the GIL; the threads catch up without sleeping). A check after
the run: every stream and every ReplayBuffer holds what was appended, episodes and low-dim values
exact. ``--profile``: each recording thread runs under cProfile; the top entries are printed.

Each ``--src LABEL=DIR`` runs in a fresh process of its own (``PYTHONPATH=DIR``); a tree without
``trajstore.streams`` is reported as failed. No peer records native-rate streams (LeRobot, robomimic
and Diffusion Policy store one row per step), so there is no ``--peers``. No timing is asserted anywhere.

Run (the project's python)::

    python benchmarks/streams_record.py [--src LABEL=DIR ...] [--seconds 60] [--modes paced,fast] [--profile]

Figures (``--seconds 30 --episode-seconds 10``, 2 cores shared with other jobs, load average 0.8 -> 2.4;
us per append, median / p99, stream vs replay):

* paced, low-dim: stream 31.1 / 158, replay 25.6 / 144 (x1.21 / x1.09); camera: 145 / 12565 against
  138 / 9879 (x1.05 / x1.27);
* fast, low-dim: 13.9 / 75.7 against 12.0 / 63.5 (x1.16 / x1.19); camera: 178 / 30389 against 535 / 35088
  (x0.33 / x0.87: the camera threads compete with four JPEG writers; noise).

No backlog growth when paced: slopes -0.5 .. 0 samples/s on both sides; maxima first / second half:
cameras 21-22 / 6-10 frames, joints 228 / 352 (both sides), force-torque 380 / 319 (stream) and 431 /
511 (replay), i.e. under 0.7 s of data (a few staged blocks); nothing blocked. ``end_episode`` 83 ms
(stream: 4 sub-buffer flushes and the log commit) against 46 ms for the four ReplayBuffers. Late wake-ups: 10-19% of the
paced samples (19% at 1 kHz), so the p99 figures include the GIL and the machine's load. The stream
side's extra per low-dim append is its timestamp work (``one_ns``, the order check, the in-memory
time column, the stream lock): a few us on a ~10-25 us ``ReplayBuffer.append``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402

MODES = ("paced", "fast")
CHILD = "--child"


def main() -> None:
    if sys.argv[1:2] == [CHILD]:
        print(json.dumps(run(json.loads(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_source_arguments(ap)
    ap.add_argument("--seconds", type=float, default=60.0, help="simulated seconds recorded per pacing (default 60)")
    ap.add_argument("--episode-seconds", type=float, default=20.0, help="simulated seconds per episode (default 20)")
    ap.add_argument("--modes", default=",".join(MODES), help="paced, fast (default: both)")
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--camera-hz", type=float, default=30.0)
    ap.add_argument("--joints-hz", type=float, default=500.0)
    ap.add_argument("--ft-hz", type=float, default=1000.0)
    ap.add_argument("--sample-every", type=float, default=0.5, help="backlog sampling period, wall s (default 0.5)")
    ap.add_argument("--profile", action="store_true", help="run the recording threads under cProfile; print the top")
    ap.add_argument("--profile-top", type=int, default=30, help="entries printed per profile (default 30)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--workdir", type=Path, help="where the buffers go (default: a new folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        ap.error(f"--modes takes {', '.join(MODES)}")
    cons = hx.contenders(argparse.Namespace(src=args.src, python=args.python, peers="", no_install=True))
    work = hx.workdir(args, "streams-record-")
    config = {"modes": modes, "seconds": args.seconds, "episode_seconds": args.episode_seconds,
              "height": args.height, "width": args.width,
              "rates": {"camera": args.camera_hz, "joints": args.joints_hz, "ft": args.ft_hz},
              "sample_every": args.sample_every, "profile": args.profile, "profile_top": args.profile_top}
    results = hx.run_sources(cons, work, Path(__file__).resolve(), CHILD,
                             lambda i, out: {**config, "out": str(out)},
                             timeout=max(600.0, 20 * args.seconds * len(modes)), keep=args.keep)
    report(args, modes, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def report(args: argparse.Namespace, modes: list[str], results: dict[str, dict]) -> None:
    print(f"\nRecord 2 cameras {args.height}x{args.width} RGB @ {args.camera_hz:g} Hz + joints (7,) @ "
          f"{args.joints_hz:g} Hz + force-torque (6,) @ {args.ft_hz:g} Hz, {args.seconds:g} s simulated in episodes of "
          f"{args.episode_seconds:g} s, 4 threads; caller's us per append; ratios stream / replay (target <= 1.5)")
    for mode in modes:
        print(f"\n== {mode}" + (": each thread sleeps until its sample's time" if mode == "paced" else
                                 ": as fast as possible"))
        rows = []
        for label, res in results.items():
            if "failed" in res:
                rows.append([label, f"failed: {res['failed']}"])
                continue
            m = res["modes"][mode]
            for kind in ("low_dim", "camera"):
                s, r = m["stream"]["calls"][kind], m["replay"]["calls"][kind]
                rows.append([f"{label} {kind.replace('_', '-')}", s["n"], s["median_us"], s["p99_us"], s["max_us"],
                             r["median_us"], r["p99_us"], r["max_us"], hx.ratio(s["median_us"], r["median_us"]),
                             hx.ratio(s["p99_us"], r["p99_us"])])
        print(hx.table(["source kind", "appends", "stream med", "p99", "max", "replay med", "p99", "max",
                        "ratio med", "ratio p99"], rows))
        rows = []
        for label, res in results.items():
            if "failed" in res:
                continue
            m = res["modes"][mode]
            for side in ("stream", "replay"):
                b = m[side]["backlog"]
                for name, g in (b["streams"] or {"-": None}).items():
                    if g is None:
                        rows.append([f"{label} {side}", "-", "not exposed", "-", "-", "-", "-"])
                        continue
                    rows.append([f"{label} {side} {name}", g["first_half_max"], g["second_half_max"], g["slope_per_s"],
                                 g["final"], b["blocked_s"], m[side]["end_episode_ms"]])
        print("\nbacklog (samples appended, not yet written): max over the first / second half, slope, at the end")
        print(hx.table(["source side stream", "max 1st half", "max 2nd half", "slope /s", "final", "blocked s",
                        "end_episode ms"], rows))
        for label, res in results.items():
            if "failed" in res:
                continue
            m = res["modes"][mode]
            late = ", ".join(f"{n} {x * 100:.1f}%" for n, x in m["late"].items()) if mode == "paced" else "-"
            print(f"  {label}: wall {m['wall_s']:.1f} s, late samples {late}, "
                  f"load average {m['load'][0]:.1f} -> {m['load'][1]:.1f}; check: "
                  f"{'ok' if not m['problems'] else '; '.join(m['problems'])}")
            if m.get("profile"):
                print(f"\n-- profile of the recording threads ({label}, {mode}):\n{m['profile']}")


# -- the recording, in the measured source tree's process ---------------------------------------------
SENSORS = {"wrist": "camera", "front": "camera", "joints": "joints", "ft": "ft"}  # stream name -> its rate key
KINDS = {"low_dim": ("joints", "ft"), "camera": ("wrist", "front")}
DIMS = {"joints": 7, "ft": 6}


def run(config: dict) -> dict:
    """Every pacing of ``config["modes"]``, one after the other, in new folders under ``config["out"]``."""
    from trajstore.testing import moving_scene

    out = Path(config["out"])
    frames = {name: moving_scene(64, config["height"], config["width"], seed=k)
              for k, name in enumerate(KINDS["camera"], 1)}
    return {"modes": {mode: record(config, mode, out / mode, frames) for mode in config["modes"]}}


def episode_data(config: dict, name: str, k: int, frames: dict) -> tuple:
    """Stream ``name``'s samples in episode ``k``: int64 ns timestamps (N,), their offsets from the
    episode's start in seconds, and the values (a frame cycle for a camera, uniform floats else)."""
    import numpy as np

    rate = config["rates"][SENSORS[name]]
    span = min(config["episode_seconds"], config["seconds"] - k * config["episode_seconds"])
    n = max(1, int(round(span * rate)))
    rng = np.random.default_rng([list(SENSORS).index(name), k])
    nominal = np.round(np.arange(n) * 1e9 / rate).astype(np.int64)
    rel = nominal + rng.integers(-int(0.2e9 / rate), int(0.2e9 / rate) + 1, n)
    rel[0] = max(0, rel[0])
    t_ns = int(round(k * (config["episode_seconds"] + 1) * 1e9)) + rel
    if name in DIMS:
        values = rng.uniform(-1, 1, (n, DIMS[name])).astype(np.float32)
    else:
        values = frames[name][np.arange(n) % len(frames[name])]
    return t_ns, rel / 1e9, values


def record(config: dict, mode: str, out: Path, frames: dict) -> dict:
    import cProfile
    import io
    import pstats
    import threading
    import time

    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
    from trajstore.streams import StreamBuffer

    h, w = config["height"], config["width"]
    cam = {"kind": "image", "layout": "HWC", "fps": config["rates"]["camera"]}
    spaces = {"wrist": BoxSpace(0, 255, (h, w, 3), np.uint8, metadata=cam),
              "front": BoxSpace(0, 255, (h, w, 3), np.uint8, metadata=cam),
              "joints": BoxSpace(-np.pi, np.pi, (7,), np.float32), "ft": BoxSpace(-100, 100, (6,), np.float32)}
    (out / "replay").mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    buf = StreamBuffer.create(out / "stream", streams=spaces)
    rbs = {}
    for name, space in spaces.items():
        step = DictSpace({"timestamp": BoxSpace(0, np.iinfo(np.int64).max, (), np.int64), "value": space})
        rbs[name] = ReplayBuffer.create(DictStorage, step, cache_path=out / "replay" / name, capacity=None,
                                        **dict_storage_kwargs_from_space(step))
    episodes = int(np.ceil(config["seconds"] / config["episode_seconds"] - 1e-9))
    paced = mode == "paced"
    calls = {side: {name: [] for name in spaces} for side in ("stream", "replay")}
    count = dict.fromkeys(spaces, 0)
    late = dict.fromkeys(spaces, 0)
    clock, errors, profiles = [0.0], [], {}
    start, done, stop = threading.Barrier(len(spaces) + 1), threading.Barrier(len(spaces) + 1), threading.Event()
    perf = time.perf_counter

    def worker(name: str) -> None:
        rb, s_calls, r_calls = rbs[name], calls["stream"][name], calls["replay"][name]
        period = 1.0 / config["rates"][SENSORS[name]]
        prof = cProfile.Profile() if config["profile"] else None
        order = ((s_calls, lambda v, t: buf.append(name, v, t)),
                 (r_calls, lambda v, t: rb.append({"timestamp": t, "value": v})))
        try:
            for k in range(episodes):
                t_ns, rel, values = episode_data(config, name, k, frames)
                start.wait()
                t0 = clock[0]
                if prof:
                    prof.enable()
                for i in range(len(t_ns)):
                    t, v = t_ns[i], values[i]
                    if paced:
                        pause = t0 + rel[i] - perf()
                        if pause > 0:
                            time.sleep(pause)
                        elif pause < -period:
                            late[name] += 1
                    for out_calls, put in (order if i % 2 == 0 else order[::-1]):  # who goes first alternates
                        a = perf()
                        put(v, t)
                        out_calls.append(perf() - a)
                    count[name] += 1
                if prof:
                    prof.disable()
                done.wait()
            profiles[name] = prof
        except BaseException as exc:  # reported by the main thread
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            start.abort()
            done.abort()

    samples: list[dict] = []
    t_start = perf()

    def snapshot() -> None:
        samples.append({"t": perf() - t_start, "appended": dict(count),
                        "replay": {n: rb.write_stats.steps_written for n, rb in rbs.items()},
                        "stream": None if (ws := stream_write_stats(buf)) is None else
                        {n: x.steps_written for n, x in ws.items()}})

    def monitor() -> None:
        while not stop.wait(config["sample_every"]):
            snapshot()

    threads = [threading.Thread(target=worker, args=(name,), name=f"record-{name}") for name in spaces]
    mon = threading.Thread(target=monitor, name="backlog-monitor")
    for th in threads + [mon]:
        th.start()
    ends: dict[str, list[tuple[float, bool]]] = {"stream": [], "replay": []}  # (seconds, ended first)
    firsts = ("stream", "replay")
    try:
        for k in range(episodes):
            clock[0] = perf()
            start.wait()
            done.wait()
            if k == episodes - 1:
                wall = perf() - t_start
                stop.set()
                mon.join()
                snapshot()
            for side in firsts if k % 2 == 0 else firsts[::-1]:
                a = perf()
                if side == "stream":
                    buf.end_episode()
                else:
                    for rb in rbs.values():
                        rb.end_episode()
                ends[side].append((perf() - a, side == firsts[k % 2]))
    except threading.BrokenBarrierError:
        stop.set()
        raise RuntimeError(f"a recording thread failed: {'; '.join(errors)}") from None
    finally:
        for th in threads + [mon]:
            th.join()
    stream_blocked = None if (ws := stream_write_stats(buf)) is None else sum(x.blocked_seconds for x in ws.values())
    replay_blocked = sum(rb.write_stats.blocked_seconds for rb in rbs.values())
    buf.close()
    for rb in rbs.values():
        rb.close()
    result = {"wall_s": wall, "load": [load0[0], os.getloadavg()[0]], "episodes": episodes,
              "late_share": sum(late.values()) / max(1, sum(count.values())) if paced else 0.0,
              "late": {n: late[n] / max(1, count[n]) for n in spaces},
              "problems": check(config, out, episodes, frames, count)}
    for side, blocked in (("stream", stream_blocked), ("replay", replay_blocked)):
        result[side] = {"calls": {**{kind: summary([x for n in names for x in calls[side][n]])
                                     for kind, names in KINDS.items()},
                                  **{n: summary(calls[side][n]) for n in spaces}},
                        "backlog": {"streams": backlog(samples, side), "blocked_s": blocked},
                        "end_episode_ms": float(np.median([x for x, first in ends[side] if first]
                                                          or [x for x, _ in ends[side]]) * 1e3)}
    if config["profile"]:
        stats = pstats.Stats(*[p for p in profiles.values() if p], stream=(text := io.StringIO()))
        stats.sort_stats("tottime").print_stats(config["profile_top"])
        stats.sort_stats("cumulative").print_stats(config["profile_top"])
        result["profile"] = text.getvalue()
    return result


def stream_write_stats(buf) -> dict | None:
    """Per stream, the StreamBuffer's write-behind figures (``buf.write_stats(name)``, a ``WriteStats``);
    None from a tree without them."""
    ws = getattr(buf, "write_stats", None)
    return None if ws is None else {name: ws(name) for name in buf.streams}


def backlog(samples: list[dict], side: str) -> dict[str, dict] | None:
    """Per stream: the backlog (appended - written) over the run summarised; None if not exposed."""
    import numpy as np

    if not samples or samples[0][side] is None:
        return None
    t = np.array([s["t"] for s in samples])
    out = {}
    for name in samples[0][side]:
        appended = [sum(s["appended"].values()) if name == "all" else s["appended"][name] for s in samples]
        b = np.array(appended, float) - np.array([s[side][name] for s in samples], float)
        half = t < t[-1] / 2
        out[name] = {"first_half_max": float(b[half].max()) if half.any() else float("nan"),
                     "second_half_max": float(b[~half].max()), "final": float(b[-1]),
                     "slope_per_s": float(np.polyfit(t, b, 1)[0]) if len(t) > 2 else float("nan")}
    return out


def summary(seconds: list[float]) -> dict:
    import numpy as np

    us = np.array(seconds) * 1e6
    return {"n": len(us), "median_us": float(np.median(us)), "p99_us": float(np.percentile(us, 99)),
            "max_us": float(us.max()), "mean_us": float(us.mean())}


def check(config: dict, out: Path, episodes: int, frames: dict, count: dict) -> list[str]:
    """What the reopened buffers hold against what was appended (empty: all right)."""
    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.streams import StreamBuffer

    problems = []
    with StreamBuffer.load_from(out / "stream") as buf:
        if buf.num_episodes != episodes:
            problems.append(f"stream buffer: {buf.num_episodes} episodes, expected {episodes}")
        for name in SENSORS:
            if buf.stream_length(name) != count[name]:
                problems.append(f"stream {name}: {buf.stream_length(name)} samples, appended {count[name]}")
                continue
            for k in range(min(episodes, buf.num_episodes)):
                t_ns, _, values = episode_data(config, name, k, frames)
                if name in DIMS:
                    got_t, got = buf.read(name, episode=k)
                    ok = np.array_equal(got_t, t_ns) and np.array_equal(got, values)
                else:
                    ok = np.array_equal(buf.timestamps(name, episode=k), t_ns)
                if not ok:
                    problems.append(f"stream {name}, episode {k}: not what was appended")
    for name in SENSORS:
        with ReplayBuffer.load_from(out / "replay" / name) as rb:
            if len(rb) != count[name] or rb.num_episodes != episodes:
                problems.append(f"replay {name}: {len(rb)} steps in {rb.num_episodes} episodes, appended "
                                f"{count[name]} in {episodes}")
    return problems


if __name__ == "__main__":
    main()
