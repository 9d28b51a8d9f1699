"""An aligned window batch from native-rate streams against the same batch from pre-resampled steps.

The data: ``--episodes`` (6) episodes of ``--episode-seconds`` (10) s, three streams with jittered
int64-nanosecond timestamps (up to +-20% of the period): a 480x640 RGB camera ``wrist`` at 30 Hz
(JPEG, the routing default for ``kind="image"``), joint positions ``joints`` float32 ``(7,)`` at
500 Hz and commands ``action`` float32 ``(7,)`` at 50 Hz. Written (not timed) twice:

* ``stream``: a ``StreamBuffer`` of the three streams, read through
  ``view = buf.aligned(anchor="wrist", how={"joints": "linear"})`` (``--how``; action by ``previous``);
* ``replay``: a ``ReplayBuffer`` of steps pre-resampled at the camera's frames (what a user does by
  hand today): each step the frame, the joints linearly interpolated at its time (NumPy) and the
  latest command at or before it, plus the frame's timestamp; the same JPEG storage.

One batch: 64 anchors drawn at random, the camera at [-0.1, 0] s, the joints at 10 offsets
(-9/30 .. 0 s), an action chunk of 16 (0 .. 15/30 s):

* stream: ``view.sample_windows(64, delta_timestamps={"wrist": [-0.1, 0.0], "joints": [...], "action": [...]})``;
* replay: ``rb.sample_windows(64, delta_indices={"wrist": [-3, 0], "joints": range(-9, 1),
  "action": range(16)}, pad=True)``.

A second pair, ``low-dim``, is the same batch without the camera (a view of ``joints`` and
``action`` anchored at the camera's frames, against a ``ReplayBuffer`` of the same steps without the
frame): there JPEG decoding no longer hides the cost of alignment.

Reported per source and pair: ms per batch, the median and the minimum of ``--repeats`` (20) batches
(stream and replay alternate, the same seed each, after one warm-up batch each, readers opened
read-only), and the ratio stream / replay (target <= 1.5). A check first: at 8 anchors the view's step
and the pre-resampled step hold the same frame, command and timestamp and joints within 1e-4, and
both batches have the same leaves and shapes. ``--profile``: ``--profile-batches`` (5) aligned
batches of each pair under cProfile (the top ``--profile-top`` entries by own time and by cumulative
time), beside the replay batches' own-time top.

Each ``--src LABEL=DIR`` runs in a fresh process of its own (``PYTHONPATH=DIR``). No peer reads
native-rate streams aligned, so there is no ``--peers``. No timing is asserted anywhere.

Run (the project's python)::

    python benchmarks/streams_windows.py [--src LABEL=DIR ...] [--repeats 20] [--profile]

Figures (2 cores shared with other jobs, load average 1.6-3.8), ms per batch, median / min, stream vs replay:

* defaults (480x640): ``batch`` 469 / 193 against 458 / 155 (x1.02 / x1.25; JPEG decoding of up to 128
  frames dominates both); an earlier run 181 / 113 against 271 / 126 (x0.67 / x0.89);
* ``low-dim`` (no camera): 2.00 / 1.14 against 1.08 / 0.569 (x1.84 / x2.01); with 48x64 frames x1.77-2.05;
  ``--episodes 60`` (10 min, 300,000 joint samples): x5.1-7.8. The low-dim batch misses 1.5x, and more so
  the longer the streams: each stream is read through ``StreamBuffer.read_samples`` (a sub-buffer
  ``get_at``, ``timestamp`` leaf included) whose HDF5 read covers the span of the needed samples (one
  slice read, then a gather): at 60 episodes h5py ``__getitem__`` is 52% of the batch's own time and
  ``read_samples`` 70% cumulative (a whole read of the 300,000-row joints values takes 3.1 ms), against
  ``align`` 8%; at 6 episodes ``read_samples`` 42%, ``align`` 13%, ``np.unique`` and interpolation ~14%.
  Keeping a low-dim stream's samples in memory after the view's first read (up to 64 MiB a stream; the
  cameras still read by position) gave, in a trial: ``low-dim`` x0.95 (6 episodes) and x0.88 (60),
  ``batch`` x0.97 and x1.12.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402

CHILD = "--child"
PAIRS = ("batch", "low_dim")


def main() -> None:
    if sys.argv[1:2] == [CHILD]:
        print(json.dumps(run(json.loads(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_source_arguments(ap)
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--episode-seconds", type=float, default=10.0)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--camera-hz", type=float, default=30.0)
    ap.add_argument("--joints-hz", type=float, default=500.0)
    ap.add_argument("--action-hz", type=float, default=50.0)
    ap.add_argument("--how", default="linear", choices=("linear", "previous", "nearest"), help="the joints' method")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=20, help="timed batches per contender and pair (default 20)")
    ap.add_argument("--profile", action="store_true", help="profile the aligned batch (cProfile) and print the top")
    ap.add_argument("--profile-batches", type=int, default=5)
    ap.add_argument("--profile-top", type=int, default=30)
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--workdir", type=Path, help="where the buffers go (default: a new folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args()
    cons = hx.contenders(argparse.Namespace(src=args.src, python=args.python, peers="", no_install=True))
    work = hx.workdir(args, "streams-windows-")
    config = {k: v for k, v in vars(args).items() if k not in ("src", "python", "json", "workdir", "keep")}
    results = hx.run_sources(cons, work, Path(__file__).resolve(), CHILD,
                             lambda i, out: {**config, "out": str(out)}, timeout=3600, keep=args.keep)
    report(args, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def report(args: argparse.Namespace, results: dict[str, dict]) -> None:
    print(f"\nAligned window batch: {args.batch} anchors, camera {args.height}x{args.width} at [-0.1, 0] s, joints "
          f"at 10 offsets ({args.how}), action chunk of 16; {args.episodes} episodes of {args.episode_seconds:g} s "
          f"(camera {args.camera_hz:g} Hz, joints {args.joints_hz:g} Hz, action {args.action_hz:g} Hz); ms per batch "
          f"over {args.repeats} batches, alternating; ratio stream / replay (target <= 1.5)")
    rows = []
    for label, res in results.items():
        if "failed" in res:
            rows.append([label, f"failed: {res['failed']}"])
            continue
        for pair in PAIRS:
            p = res["pairs"][pair]
            if "failed" in p:
                rows.append([f"{label} {pair}", f"failed: {p['failed']}"])
                continue
            s, r = p["stream"], p["replay"]
            rows.append([f"{label} {pair.replace('_', '-')}", s["median_ms"], s["min_ms"], r["median_ms"], r["min_ms"],
                         hx.ratio(s["median_ms"], r["median_ms"]), hx.ratio(s["min_ms"], r["min_ms"]),
                         s["open_ms"], r["open_ms"]])
    print(hx.table(["source pair", "stream med ms", "min", "replay med ms", "min", "ratio med", "ratio min",
                    "stream open ms", "replay open ms"], rows))
    for label, res in results.items():
        if "failed" in res:
            continue
        print(f"  {label}: {res['anchors']} anchors held; load average {res['load'][0]:.1f} -> {res['load'][1]:.1f}; "
              f"check: {'ok' if not res['problems'] else '; '.join(res['problems'])}")
        for pair, text in (res.get("profile") or {}).items():
            print(f"\n-- profile of {args.profile_batches} aligned batches, {pair} ({label}):\n{text}")
            print(f"-- profile of {args.profile_batches} replay batches, {pair} ({label}), own time:\n"
                  f"{res['profile_replay'][pair]}")


# -- in the measured source tree's process -----------------------------------------------------------
CAMERA, JOINTS, ACTION = "wrist", "joints", "action"
CHUNK = 32  # samples per extend while writing


def run(config: dict) -> dict:
    import time

    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.streams import StreamBuffer

    out = Path(config["out"])
    load0 = os.getloadavg()
    write(config, out)
    perf = time.perf_counter
    offsets = {"joints": [(i - 9) / config["camera_hz"] for i in range(10)],
               "action": [i / config["camera_hz"] for i in range(16)]}
    delta_t = {"batch": {CAMERA: [-0.1, 0.0], **offsets}, "low_dim": offsets}
    delta_i = {"batch": {CAMERA: [-int(round(0.1 * config["camera_hz"])), 0], JOINTS: range(-9, 1),
                         ACTION: range(16)}, "low_dim": {JOINTS: range(-9, 1), ACTION: range(16)}}
    how = {JOINTS: config["how"]}
    result: dict = {"pairs": {}}
    a = perf()
    reader = StreamBuffer.load_from(out / "stream")
    views = {"batch": reader.aligned(anchor=CAMERA, how=how)}
    stream_open = perf() - a
    try:
        views["low_dim"] = reader.aligned(anchor=CAMERA, how=how, streams=[JOINTS, ACTION])
    except Exception as exc:  # a tree whose view cannot leave its anchor out: no low-dim pair, the reason given
        result["pairs"]["low_dim"] = {"failed": f"aligned(anchor={CAMERA!r}, streams=[joints, action]): "
                                                f"{type(exc).__name__}: {exc}"}
    a = perf()
    replays = {"batch": ReplayBuffer.load_from(out / "replay")}
    replay_open = perf() - a
    replays["low_dim"] = ReplayBuffer.load_from(out / "replay_low")
    result["anchors"] = len(views["batch"])
    result["problems"] = check(views["batch"], replays["batch"], delta_t["batch"], delta_i["batch"], config)
    for pair, view in views.items():
        rb = replays[pair]
        calls = {"stream": lambda rng: view.sample_windows(config["batch"], delta_timestamps=delta_t[pair], rng=rng),
                 "replay": lambda rng: rb.sample_windows(config["batch"], delta_indices=delta_i[pair], pad=True,
                                                         rng=rng)}
        times: dict[str, list[float]] = {side: [] for side in calls}
        for fn in calls.values():
            fn(np.random.default_rng(12345))  # warm-up: caches, first file opens
        for r in range(config["repeats"]):
            for side in (("stream", "replay") if r % 2 == 0 else ("replay", "stream")):
                a = perf()
                calls[side](np.random.default_rng(r))
                times[side].append(perf() - a)
        result["pairs"][pair] = {side: {"median_ms": float(np.median(t) * 1e3), "min_ms": float(np.min(t) * 1e3),
                                        "max_ms": float(np.max(t) * 1e3)} for side, t in times.items()}
        result["pairs"][pair]["stream"]["open_ms"] = stream_open * 1e3
        result["pairs"][pair]["replay"]["open_ms"] = replay_open * 1e3
    if config["profile"]:
        result["profile"], result["profile_replay"] = {}, {}
        for pair, view in views.items():
            result["profile"][pair] = profile(lambda rng: view.sample_windows(
                config["batch"], delta_timestamps=delta_t[pair], rng=rng), config, ("tottime", "cumulative"))
            result["profile_replay"][pair] = profile(lambda rng: replays[pair].sample_windows(
                config["batch"], delta_indices=delta_i[pair], pad=True, rng=rng), config, ("tottime",), 15)
    for rb in replays.values():
        rb.close()
    reader.close()
    result["load"] = [load0[0], os.getloadavg()[0]]
    return result


def episode(config: dict, k: int, frames) -> dict:
    """Episode ``k``'s streams: name -> (int64 ns timestamps (N,), values (N, ...))."""
    import numpy as np

    rng = np.random.default_rng(k)
    base = int(round(k * (config["episode_seconds"] + 1) * 1e9))
    out = {}
    for name in (CAMERA, JOINTS, ACTION):
        rate = config[f"{name if name != CAMERA else 'camera'}_hz"]
        n = max(1, int(round(config["episode_seconds"] * rate)))
        jitter = int(0.2e9 / rate)
        rel = np.round(np.arange(n) * 1e9 / rate).astype(np.int64) + rng.integers(-jitter, jitter + 1, n)
        rel[0] = max(0, rel[0])
        values = frames[np.arange(n) % len(frames)] if name == CAMERA else rng.uniform(-1, 1, (n, 7)).astype(
            np.float32)
        out[name] = (base + rel, values)
    return out


def resampled(data: dict, how: str) -> dict:
    """The episode as steps at the camera's frames: joints by ``how``, action by ``previous``."""
    import numpy as np

    t, frames = data[CAMERA]

    def pick(name: str, method: str) -> np.ndarray:
        ts, v = data[name]
        if method == "linear":
            return np.stack([np.interp(t, ts, v[:, d]) for d in range(v.shape[1])], 1).astype(v.dtype)
        before = np.clip(np.searchsorted(ts, t, "right") - 1, 0, len(ts) - 1)
        if method == "nearest":
            after = np.minimum(before + 1, len(ts) - 1)
            before = np.where(np.abs(ts[after] - t) < np.abs(t - ts[before]), after, before)
        return v[before]

    return {CAMERA: frames, JOINTS: pick(JOINTS, how), ACTION: pick(ACTION, "previous"), "timestamp": t}


def write(config: dict, out: Path) -> None:
    """The stream buffer and the two ReplayBuffers of pre-resampled steps (with and without the frame)."""
    import numpy as np

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
    from trajstore.streams import StreamBuffer
    from trajstore.testing import moving_scene

    frames = moving_scene(64, config["height"], config["width"], seed=1)
    cam = {"kind": "image", "layout": "HWC", "fps": config["camera_hz"]}
    streams = {CAMERA: BoxSpace(0, 255, (config["height"], config["width"], 3), np.uint8, metadata=cam),
               JOINTS: BoxSpace(-np.pi, np.pi, (7,), np.float32), ACTION: BoxSpace(-1, 1, (7,), np.float32)}
    step = DictSpace({**streams, "timestamp": BoxSpace(0, np.iinfo(np.int64).max, (), np.int64)})
    low = DictSpace({k: v for k, v in step.spaces.items() if k != CAMERA})
    rbs = [ReplayBuffer.create(DictStorage, space, cache_path=out / name, capacity=None,
                               **dict_storage_kwargs_from_space(space))
           for name, space in (("replay", step), ("replay_low", low))]
    with StreamBuffer.create(out / "stream", streams=streams) as buf:
        for k in range(config["episodes"]):
            data = episode(config, k, frames)
            for name, (t, values) in data.items():
                for a in range(0, len(t), CHUNK):
                    buf.extend(name, values[a:a + CHUNK], t[a:a + CHUNK])
            buf.end_episode()
            steps = resampled(data, config["how"])
            for a in range(0, len(steps["timestamp"]), CHUNK):
                rbs[0].extend({key: v[a:a + CHUNK] for key, v in steps.items()})
            rbs[1].extend({key: v for key, v in steps.items() if key != CAMERA})
            for rb in rbs:
                rb.end_episode()
    for rb in rbs:
        rb.close()


def leaves(tree, prefix: str = "") -> dict:
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in leaves(sub, f"{prefix}{key}/").items()}
    return {prefix.rstrip("/"): tree}


def check(view, rb, delta_t: dict, delta_i: dict, config: dict) -> list[str]:
    """The view's steps against the pre-resampled ones at 8 anchors, and the two batches' layouts."""
    import numpy as np

    problems = []
    if len(view) != len(rb):
        problems.append(f"{len(view)} anchors in the view, {len(rb)} pre-resampled steps")
    for i in np.random.default_rng(7).integers(0, min(len(view), len(rb)), 8):
        got, want = view[int(i)], rb[int(i)]
        for key in (CAMERA, ACTION, "timestamp"):
            if not np.array_equal(got[key], want[key]):
                problems.append(f"anchor {i}: {key} differs")
        if not np.allclose(got[JOINTS], want[JOINTS], atol=1e-4):
            problems.append(f"anchor {i}: joints differ by {np.abs(got[JOINTS] - want[JOINTS]).max():.3g}")
    (vd, vm), (rd, rm) = (view.sample_windows(config["batch"], delta_timestamps=delta_t, rng=np.random.default_rng(0)),
                          rb.sample_windows(config["batch"], delta_indices=delta_i, pad=True,
                                            rng=np.random.default_rng(0)))
    shapes = [{k: (np.shape(v), str(np.asarray(v).dtype)) for k, v in leaves(d).items() if k in delta_t}
              for d in (vd, rd)]
    masks = [{k: np.shape(v) for k, v in m.items()} for m in (vm, rm)]
    if shapes[0] != shapes[1] or masks[0] != masks[1]:
        problems.append(f"batch layouts differ: stream {shapes[0]} {masks[0]}, replay {shapes[1]} {masks[1]}")
    return problems


def profile(fn, config: dict, orders: tuple[str, ...], top: int | None = None) -> str:
    import cProfile
    import io
    import pstats

    import numpy as np

    prof = cProfile.Profile()
    prof.enable()
    for b in range(config["profile_batches"]):
        fn(np.random.default_rng(1000 + b))
    prof.disable()
    stats = pstats.Stats(prof, stream=(text := io.StringIO()))
    for order in orders:
        stats.sort_stats(order).print_stats(top or config["profile_top"])
    return text.getvalue()


if __name__ == "__main__":
    main()
