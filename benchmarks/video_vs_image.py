"""VideoStorage next to JPEG ImageStorage on the same frames, in replay buffers: bytes and read times.

Workload per frame size (``--sizes``, default 96x96, 128x128 and 480x640): episodes of 128
steps of a smooth moving scene (``trajstore.testing.moving_scene``, one seed per episode; 16
episodes, 8 at 480x640), one step an ``(H, W, 3)`` uint8 camera ``observation/image`` plus a
2-float state and a 2-float action (HDF5). Each buffer is written with ``extend`` per episode
and ``end_episode``, closed, and reopened read-only, so reads go through the files (from the
page cache: every file was just written).

Rows, per source tree (``--src LABEL=DIR``, each measured in fresh processes of its own, e.g.
``--src before=/tmp/main-src-video/src --src after=src``):

* ``JPEG``: ``ImageStorage`` with its defaults (quality 90, 4:4:4);
* ``video``: ``VideoStorage`` with the defaults of that tree (a buffer written by the tree);
* ``video, no frame cache``: the same with the decoded-frame cache off (trees that have one,
  ``video.FRAME_CACHE_BYTES``): what a read costs when the frames are not among the last ones
  decoded, as in a data set much bigger than the cache (32 MiB);
* ``video gop N``: ``gop_size=N`` for each N of ``--gops`` (default 1, 2, 8), no frame cache (gop
  8 is main's default: a folder written by main, read by the tree).

Times, ms per batch (median of ``--rounds * --batches`` timed batches; batch by batch the
buffers take turns, in rotating order, so that load from other processes hits them alike;
one untimed batch per buffer and case first):

* ``random``: ``rb[idx]``, 256 random steps (any order, repeats possible);
* ``window``: ``rb.sample_windows(64, delta_indices={"observation": [-1, 0]}, pad=True)``;
* ``dp``: the Diffusion-Policy batch, ``rb.sample_windows(64, delta_indices={"observation":
  [-1, 0], "action": range(16)}, pad=True)``: 64 anchors over all episodes.

Also ``bytes/frame`` of the camera's storage folder, ``write ms/frame`` (extend + end_episode of
all episodes), and the minimum PSNR of the frames of one random batch against the written ones.
Ratios: each video row / that tree's JPEG row (same process, same rounds), and a tree's video
row / the first tree's (``before``). Absolute times depend on the machine and its load; compare
ratios. No timing is asserted anywhere.

Run: ``python benchmarks/video_vs_image.py [--src LABEL=DIR ...] [--sizes 96x96,128x128,480x640]
[--gops 1,2,8] [--rounds 5] [--batches 4]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

EPISODE = 128


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


# -- child: one source tree --------------------------------------------------------------------
def child(cfg: dict[str, Any]) -> dict[str, Any]:
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace
    from trajstore.storages import DictStorage, ImageStorage, VideoStorage, dict_storage_kwargs_from_space
    from trajstore.storages.frames import video as vmod
    from trajstore.testing import psnr

    frames = np.load(cfg["frames"], mmap_mode="r")
    n, h, w = frames.shape[:3]
    space = DictSpace({"observation": DictSpace({
        "image": BoxSpace(0, 255, (h, w, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 30}),
        "state": BoxSpace(-1, 1, (2,), np.float32)}), "action": BoxSpace(-1, 1, (2,), np.float32)})
    has_cache = hasattr(vmod, "FRAME_CACHE_BYTES")
    setups: list[tuple[str, Any, dict[str, Any], bool]] = [("JPEG", ImageStorage, {}, True), ("video", VideoStorage, {}, True)]
    if has_cache:
        setups.append(("video, no frame cache", VideoStorage, {}, False))
    for g in cfg["gops"]:  # the decoder alone: no frame cache
        setups.append((f"video gop {g}" + (", no frame cache" if has_cache else ""), VideoStorage, {"gop_size": g}, False))
    root = Path(cfg["folder"])
    root.mkdir(parents=True, exist_ok=True)
    rows, buffers = [], []
    for i, (name, cls, kw, cache) in enumerate(setups):
        kwargs = dict_storage_kwargs_from_space(space, kind_storage_cls={"image": cls}, kind_kwargs={"image": kw})
        path = root / f"rb{i}"
        rb = ReplayBuffer.create(DictStorage, space, cache_path=path, capacity=None, **kwargs)
        t0 = time.perf_counter()
        for a in range(0, n, EPISODE):
            ep = np.asarray(frames[a:a + EPISODE])
            rb.extend({"observation": {"image": ep, "state": np.zeros((len(ep), 2), np.float32)},
                       "action": np.zeros((len(ep), 2), np.float32)})
            rb.end_episode()
        write = (time.perf_counter() - t0) / n * 1e3
        rb.close()
        cam = next(p for p in path.rglob("storage.json") if "image" in p.parent.name).parent
        rows.append({"name": name, "bytes": folder_bytes(cam) / n, "write": write, "random": [], "window": [],
                     "dp": [], "cache": cache, "gop": kw.get("gop_size", "default")})
        buffers.append(ReplayBuffer.load_from(path))
    rng = np.random.default_rng(0)
    obs = {"observation": [-1, 0]}
    dp = {"observation": [-1, 0], "action": list(range(16))}
    cases = {"random": lambda rb: rb[rng.integers(0, n, 256)],
             "window": lambda rb: rb.sample_windows(64, delta_indices=obs, pad=True, rng=rng),
             "dp": lambda rb: rb.sample_windows(64, delta_indices=dp, pad=True, rng=rng)}
    default_cache = getattr(vmod, "FRAME_CACHE_BYTES", 0)

    def use(row: dict[str, Any]) -> None:
        if has_cache:
            vmod.FRAME_CACHE_BYTES = default_cache if row["cache"] else 0

    for row, rb in zip(rows, buffers):  # warm-up: open the files once, as a long-running reader has
        use(row)
        _reset_video_caches(rb)
        idx = np.random.default_rng(1).integers(0, n, 256)
        q = psnr(np.asarray(rb[idx]["observation"]["image"]), np.asarray(frames[idx]))
        row["psnr_min"] = float(np.min(q))
        for case in cases.values():
            case(rb)
    pairs = list(zip(rows, buffers))
    for r in range(cfg["rounds"] * cfg["batches"]):  # batch by batch, the buffers in turn (rotating order)
        for name, case in cases.items():
            for row, rb in pairs[r % len(pairs):] + pairs[:r % len(pairs)]:
                t0 = time.perf_counter()
                case(rb)
                row[name].append((time.perf_counter() - t0) * 1e3)
    for rb in buffers:
        rb.close()
    for row in rows:
        for name in cases:
            row[name] = statistics.median(row[name])
    return {"size": f"{h}x{w}", "frames": n, "rows": rows}


def _reset_video_caches(rb: Any) -> None:
    """Drop decoded frames left from the build's check (a new cache of the configured size)."""
    for storage in rb.storage.storages.values():
        if hasattr(storage, "_new_reader_cache"):
            storage._readers = storage._new_reader_cache()


# -- parent ------------------------------------------------------------------------------------
def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
    import _harness as hx

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    hx.add_source_arguments(ap)
    ap.add_argument("--sizes", default="96x96,128x128,480x640")
    ap.add_argument("--episodes", type=int, default=16, help="episodes of 128 steps (half of it at 480x640)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=4, help="timed batches per case per round")
    ap.add_argument("--gops", default="1,2,8", help="keyframe intervals of the extra video rows (8: main's default)")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    args.peers, args.no_install = "", True
    cons = hx.contenders(args)
    from trajstore.testing import moving_scene

    results: dict[str, dict[str, Any]] = {}
    for size in args.sizes.split(","):
        h, w = (int(v) for v in size.split("x"))
        work = hx.workdir(args, "video-")
        episodes = args.episodes if h * w <= 256 * 256 else max(1, args.episodes // 2)
        frames_path = work / "frames.npy"
        frames = np.lib.format.open_memmap(frames_path, "w+", np.uint8, (episodes * EPISODE, h, w, 3))
        for e in range(episodes):
            frames[e * EPISODE:(e + 1) * EPISODE] = moving_scene(EPISODE, h, w, seed=e)
        frames.flush()
        del frames
        cfg = lambda i, folder: {"frames": str(frames_path), "folder": str(folder), "rounds": args.rounds,  # noqa: E731
                                 "batches": args.batches, "gops": [int(g) for g in args.gops.split(",") if g]}
        results[size] = hx.run_sources(cons, work, Path(__file__).resolve(), "--child", cfg, timeout=3600,
                                       keep=args.keep)
    report(results, [c.label for c in cons])


def report(results: dict[str, dict[str, Any]], labels: list[str]) -> None:
    print("ms per batch (median); random: rb[idx] of 256 steps; window: 64 windows, camera at [-1, 0]; dp: 64 "
          "windows, camera at [-1, 0] + action 0..15; ratios: / JPEG of the same tree and run, / video of "
          f"{labels[0]}")
    head = (f"{'size':8s} {'tree':18s} {'storage':28s} {'bytes/frame':>11s} {'random':>7s} {'window':>7s} {'dp':>7s} "
            f"{'write/frame':>11s} {'PSNR min':>8s}  {'vs JPEG: bytes':>14s} {'random':>6s} {'window':>6s} {'dp':>6s}  "
            f"{'vs base video: random':>21s} {'window':>6s} {'dp':>6s}")
    print(head)
    for size, by_tree in results.items():
        base = by_tree.get(labels[0], {})
        base_video = {r["name"]: r for r in base.get("rows", [])}
        for label in labels:
            res = by_tree.get(label, {})
            if "failed" in res or "rows" not in res:
                print(f"{size:8s} {label:18s} failed: {res.get('failed', 'no result')}")
                continue
            jpeg = res["rows"][0]
            for r in res["rows"]:
                vs = ""
                if r is not jpeg:
                    vs = (f"  {r['bytes'] / jpeg['bytes']:14.3f} {r['random'] / jpeg['random']:6.2f} "
                          f"{r['window'] / jpeg['window']:6.2f} {r['dp'] / jpeg['dp']:6.2f}")
                    b = base_video.get("video") if r["name"] == "video" else base_video.get(r["name"])
                    if b is not None and label != labels[0]:
                        vs += (f"  {r['random'] / b['random']:21.2f} {r['window'] / b['window']:6.2f} "
                               f"{r['dp'] / b['dp']:6.2f}")
                print(f"{size:8s} {label:18s} {r['name']:28s} {r['bytes']:11.0f} {r['random']:7.2f} {r['window']:7.2f} "
                      f"{r['dp']:7.2f} {r['write']:11.3f} {r['psnr_min']:8.1f}{vs}")
    sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
    else:
        main()
