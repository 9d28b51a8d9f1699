"""Camera batches read through the buffer against the decoder alone on the same frames ("the floor").

Per trajstore source tree (``--src LABEL=DIR``, repeatable; each in a process of its own) and per
frame size (``--sizes``, default 128x128, 96x96 and 480x640) and format (JPEG at ``--quality`` /
``--subsampling``, default q75 4:2:0, and PNG), one buffer holds a camera leaf only: ``--episodes``
episodes of ``--episode-len`` smooth synthetic frames (a textured background, a moving disc and
box, sensor noise; the same frames in every process). Then, for ``--batches`` rounds, alternating
inside the process so that load on the machine hits every case alike:

* ``floor 1t``: the codec trajstore uses (simplejpeg for JPEG, Pillow for PNG) decoding the same
  frames' bytes, already in RAM as whole files, into a new ``(N, H, W, C)`` array on this thread
  (PNG: ``Image.open`` and a copy into the row, what any Pillow reader does);
* ``floor pool``: the same split in two halves over a pool of 2 threads (trajstore's pool size);
* ``rb[idx]``: a random batch of ``--batch`` (256) steps, any order with repeats;
* ``windows``: ``rb.sample_windows(--windows, delta_indices={"cam": [-1, 0]}, pad=True)`` (64
  windows: 128 frames), against the floor of the same number of frames drawn the same way.

Frames of 100k pixels or more (480x640) get ``--big-batch`` (64) steps, half as many windows and
2 episodes: a batch of 256 would be 236 MB of pixels per array.

* ``in order (*)`` (a source whose ImageStorage has ``read_in_order``): the random batch's frames read
  from the camera's storage in the requested order, each decoded straight into its row. A source with
  ``SpaceStorage.read_leaves_in_order`` does the same inside ``rb[idx]`` and the windows (the buffer hands
  the order down); an older one reads sorted slots and reorders the whole batch with one more copy.

Reported: the median ms of each, and ``ratio`` = trajstore / the faster floor (1.00 is the decoder
alone; the target is <= 1.15); then trajstore's fastest batch and ``ratio of mins``, the same ratio
of the fastest batches; then the median CPU time (``time.process_time``: every thread of the process,
user and system) of the one-thread floor and of trajstore, and their ratio: on loaded cores, where
wall times mostly measure waiting for a CPU, the steadiest measure of the work each does. ``--profile``: the top of a cProfile of the random batch (JPEG,
first size), by own time. All reads come from the page cache. No timing is asserted anywhere.

Run (the project's python)::

    python benchmarks/decode_floor.py --src before=/tmp/main-src/src --src after=src [--batches 15]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import _harness as hx  # noqa: E402

CHILD = "--child"
#: Frames of at least this many pixels (480x640) get ``--big-batch`` steps and half as many windows, and 2
#: episodes (a batch of 256 would be 236 MB of pixels per array).
BIG_PIXELS = 100_000


def main() -> None:
    if sys.argv[1:2] == [CHILD]:
        print(json.dumps(run(json.loads(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_source_arguments(ap)
    ap.add_argument("--sizes", default="128x128,96x96,480x640", help="HxW,... (default 128x128,96x96,480x640)")
    ap.add_argument("--formats", default="JPEG,PNG")
    ap.add_argument("--quality", type=int, default=75)
    ap.add_argument("--subsampling", default="420")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--episode-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=256, help="steps of the random batch (default 256)")
    ap.add_argument("--windows", type=int, default=64, help="windows of the window batch (default 64)")
    ap.add_argument("--big-batch", type=int, default=64,
                    help="steps of the random batch of frames of >= 100k pixels (half as many windows; default 64)")
    ap.add_argument("--batches", type=int, default=15, help="timed rounds per case (default 15)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the random batch (first size, JPEG)")
    ap.add_argument("--workdir", type=Path, help="where the buffers go (default: a new folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args()
    cons = hx.contenders(argparse.Namespace(src=args.src, python=args.python, peers="", no_install=True))
    work = hx.workdir(args, "decode-floor-")
    config = {k: v for k, v in vars(args).items() if k not in ("src", "python", "workdir", "keep")}
    results = hx.run_sources(cons, work, Path(__file__).resolve(), CHILD,
                             lambda i, out: {**config, "out": str(out)}, timeout=3600, keep=args.keep)
    report(args, results)


def report(args: argparse.Namespace, results: dict[str, dict]) -> None:
    print(f"\nCamera batches vs the decoder alone (same frames, same process, alternating); JPEG q{args.quality} "
          f"{args.subsampling}; camera at [-1, 0] in windows; median ms "
          f"of {args.batches}; ratio = trajstore / the faster floor (target <= 1.15)")
    rows = []
    for label, res in results.items():
        if "failed" in res:
            rows.append([label, f"failed: {res['failed']}"])
            continue
        for case in res["cases"]:
            best = min(case["floor_1t"], case["floor_pool"])
            low, busy = case["min"], case["cpu"]
            rows.append([label, case["size"], case["format"], case["what"], case["floor_1t"], case["floor_pool"],
                         case["trajstore"], hx.ratio(case["trajstore"], best), low[2],
                         hx.ratio(low[2], min(low[:2])), busy[0], busy[2], hx.ratio(busy[2], busy[0]), case["check"]])
    print(hx.table(["source", "size", "format", "batch", "floor 1t ms", "floor pool ms", "trajstore ms",
                    "ratio", "min ms", "ratio of mins", "floor 1t CPU ms", "trajstore CPU ms", "CPU ratio",
                    "check"], rows))
    for label, res in results.items():
        if res.get("load"):
            print(f"  {label}: load average {res['load'][0]:.1f} -> {res['load'][1]:.1f}")
        if res.get("profile"):
            print(f"\n-- profile of 20 random batches ({label}), own time:\n{res['profile']}")


# -- in the measured source tree's process -----------------------------------------------------------
def frames_of(n: int, h: int, w: int, seed: int) -> "np.ndarray":  # noqa: F821
    """``n`` smooth frames ``(n, h, w, 3)`` uint8: a textured gradient, a moving disc and box, noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    y, x = y / h, x / w
    coarse = rng.normal(0, 18, (17, 17, 3)).astype(np.float32)
    tex = coarse[(y * 16).astype(int), (x * 16).astype(int)]
    base = np.stack([90 + 60 * x, 100 + 40 * y, 140 - 50 * x * y], -1) + tex
    out = np.empty((n, h, w, 3), np.uint8)
    for t in range(n):
        cy, cx = 0.5 + 0.25 * np.sin(t / 17 + seed), 0.5 + 0.3 * np.cos(t / 23 + seed)
        disc = np.clip((0.09 - np.hypot(y - cy, x - cx)) * 60, 0, 1)[..., None]
        img = base * (1 - disc) + disc * np.array([210, 70, 40], np.float32)
        box = ((np.abs(y - 0.7) < 0.06) & (np.abs(x - (0.2 + t / 300) % 1.0) < 0.1))[..., None]
        img = np.where(box, np.array([40, 160, 90], np.float32), img)
        img += rng.normal(0, 2, img.shape).astype(np.float32)
        out[t] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def run(cfg: dict) -> dict:
    import cProfile
    import io
    import os
    import pstats
    import time
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import simplejpeg
    from PIL import Image

    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
    from trajstore.storages._selection import select

    pool = ThreadPoolExecutor(2)
    out_dir = Path(cfg["out"])
    cases, load0, profile = [], os.getloadavg()[0], None

    def decoder(fmt: str):
        if fmt == "JPEG":
            return lambda b, row: simplejpeg.decode_jpeg(b, colorspace="RGB", buffer=row)

        def png(b: bytes, row: np.ndarray) -> None:
            with Image.open(io.BytesIO(b), formats=["PNG"]) as img:
                row[...] = np.asarray(img)
        return png

    for size in cfg["sizes"].split(","):
        h, w = (int(v) for v in size.split("x"))
        big = h * w >= BIG_PIXELS
        n_ep, ep_len = (min(2, cfg["episodes"]) if big else cfg["episodes"]), cfg["episode_len"]
        n_batch, n_windows = (cfg["big_batch"], cfg["big_batch"] // 2) if big else (cfg["batch"], cfg["windows"])
        frames = np.concatenate([frames_of(ep_len, h, w, e) for e in range(n_ep)])
        for fmt in cfg["formats"].split(","):
            space = DictSpace({"cam": BoxSpace(0, 255, (h, w, 3), np.uint8,
                                               metadata={"kind": "image", "layout": "HWC", "fps": 10})})
            opts = {"format": fmt} if fmt == "PNG" else {"quality": cfg["quality"], "subsampling": cfg["subsampling"]}
            path = out_dir / f"{size}-{fmt}"
            rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=None,
                                     **dict_storage_kwargs_from_space(space, kind_kwargs={"image": opts}))
            for e in range(n_ep):
                rb.extend({"cam": frames[e * ep_len:(e + 1) * ep_len]})
                rb.end_episode()
            rb.close()
            rb = ReplayBuffer.load_from(path)
            if fmt == "JPEG":
                enc = [simplejpeg.encode_jpeg(f, quality=cfg["quality"], colorspace="RGB",
                                              colorsubsampling=cfg["subsampling"]) for f in frames]
            else:
                enc = []
                for f in frames:
                    buf = io.BytesIO()
                    Image.fromarray(f).save(buf, format="PNG", compress_level=1)
                    enc.append(buf.getvalue())
            dec = decoder(fmt)
            rng = np.random.default_rng(0)

            def floor(ids: np.ndarray, threads: int) -> np.ndarray:
                o = np.empty((len(ids), h, w, 3), np.uint8)
                blobs = [enc[i] for i in ids.tolist()]

                def part(a: int, b: int) -> None:
                    for i in range(a, b):
                        dec(blobs[i], o[i])
                if threads == 1:
                    part(0, len(ids))
                else:
                    half = len(ids) // 2
                    for f in [pool.submit(part, 0, half), pool.submit(part, half, len(ids))]:
                        f.result()
                return o

            def window_ids() -> np.ndarray:  # 64 anchors, camera at [-1, 0], the first step padded by itself
                anchors = rng.integers(0, len(frames), n_windows)
                prev = np.where(anchors % ep_len == 0, anchors, anchors - 1)
                return np.stack([prev, anchors], 1).reshape(-1)

            checks = []
            idx = rng.integers(0, len(frames), n_batch)
            got = rb[idx]["cam"]
            checks.append(bool(np.array_equal(got, floor(idx, 1))))  # the codec's own decode of the same frames
            data, _ = rb.sample_windows(n_windows, delta_indices={"cam": [-1, 0]}, pad=True)
            checks.append(data["cam"].shape == (n_windows, 2, h, w, 3))
            times: dict[str, list[float]] = {k: [] for k in ("r1", "rp", "rt", "w1", "wp", "wt", "ot")}
            cpu: dict[str, list[float]] = {k: [] for k in times}
            cam = rb.storage.storages["cam"]  # the camera's ImageStorage: slot == step (no ring here)
            in_order = getattr(cam, "read_in_order", None)  # a source that has it: the batch without the reorder
            for _ in range(cfg["batches"]):
                idx = rng.integers(0, len(frames), n_batch)
                wid = window_ids()
                for key, fn in (("r1", lambda: floor(idx, 1)), ("rp", lambda: floor(idx, 2)),
                                ("rt", lambda: rb[idx]), ("w1", lambda: floor(wid, 1)),
                                ("wp", lambda: floor(wid, 2)),
                                ("wt", lambda: rb.sample_windows(n_windows, delta_indices={"cam": [-1, 0]},
                                                                 pad=True)),
                                ("ot", (lambda: in_order(select(idx, len(frames)))) if in_order else None)):
                    if fn is None:
                        continue
                    t0, c0 = time.perf_counter(), time.process_time()
                    fn()
                    times[key].append(1e3 * (time.perf_counter() - t0))
                    cpu[key].append(1e3 * (time.process_time() - c0))
            med = {k: float(np.median(v)) for k, v in times.items() if v}
            low = {k: float(np.min(v)) for k, v in times.items() if v}
            busy = {k: float(np.median(v)) for k, v in cpu.items() if v}
            check = "ok" if all(checks) else "WRONG"
            if in_order is not None:
                check_order = bool(np.array_equal(in_order(select(idx, len(frames)))[0], rb[idx]["cam"]))
                for d in (med, low, busy):
                    d["o1"], d["op"] = d["r1"], d["rp"]
            for what, p in ((f"rb[idx] {n_batch}", "r"), (f"windows {n_windows}x2", "w"),
                            (f"in order {n_batch} (*)", "o")):
                if p + "t" not in med:
                    continue
                cases.append({"size": size, "format": fmt, "what": what, "floor_1t": med[p + "1"],
                              "floor_pool": med[p + "p"], "trajstore": med[p + "t"],
                              "check": check if p != "o" else ("ok" if check_order and all(checks) else "WRONG"),
                              "min": [low[p + "1"], low[p + "p"], low[p + "t"]],
                              "cpu": [busy[p + "1"], busy[p + "p"], busy[p + "t"]]})
            if cfg["profile"] and profile is None and fmt == "JPEG":
                pr = cProfile.Profile()
                pr.enable()
                for _ in range(20):
                    rb[rng.integers(0, len(frames), n_batch)]
                pr.disable()
                text = io.StringIO()
                pstats.Stats(pr, stream=text).sort_stats("tottime").print_stats(15)
                profile = text.getvalue()
            rb.close()
    return {"cases": cases, "load": [load0, os.getloadavg()[0]], "profile": profile}


if __name__ == "__main__":
    main()
