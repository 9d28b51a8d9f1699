"""VideoStorage next to ImageStorage (JPEG and PNG) on the same frames: read time and bytes.

Frames: ``--frames`` (600) frames of a smooth moving 128x128 scene (drifting colour gradients,
a scrolling soft grey texture and a soft blob; the scene of tests/storages/test_video.py).
Each storage is written with its defaults (video: H.264 crf 20, preset faster, keyframe
every 8 frames, 128-frame segments; JPEG quality 90, 4:4:4; PNG), flushed, closed and reopened
read-only, so every read goes through the files (no pending frames, no OS-level tricks
beyond the page cache, which holds every file after the write).

Measured per storage:

* random read: batches of 32 random indices (the same sequence for every storage), ms per
  frame, the best of ``--repeat`` passes of ``--batches`` batches (passes interleaved
  across storages, so that other load on the machine hits them alike);
* sequential read: the whole range in one ``get``, ms per frame (best of ``--repeat``);
* write: ``extend`` of all frames plus ``flush``, ms per frame (one pass);
* bytes per frame: the storage folder (payload files, index, descriptor) / frames;
* PSNR of the read frames against the written ones (dB, min over frames and mean).

Extra video rows show the keyframe interval (``gop_size`` 4 and 16) and one decode thread.

Printed as a table plus the video / JPEG and video / PNG ratios; absolute times depend on
the machine (and on other load: run it on an idle machine and compare ratios).

Run: ``python benchmarks/video_vs_image.py [--frames 600] [--batches 50] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from trajstore.spaces import BoxSpace
from trajstore.storages import ImageStorage, SpaceStorage, VideoStorage
from trajstore.storages.frames import video as video_module
from trajstore.storages.frames._image_codec import JPEG_QUALITY
from trajstore.testing import moving_scene, psnr

H = W = 128


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def build(name: str, cls: type[SpaceStorage], kwargs: dict[str, Any], frames: np.ndarray,
          root: Path) -> tuple[SpaceStorage, dict[str, Any]]:
    """Write every frame, flush, close, reopen read-only; returns the storage and the write figures."""
    space = BoxSpace(0, 255, frames.shape[1:], np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 30})
    path = root / name.replace(" ", "_").replace(",", "")
    storage = cls.create(space, capacity=None, cache_path=path, **kwargs)
    t0 = time.perf_counter()
    storage.extend(frames)
    storage.flush()
    write = (time.perf_counter() - t0) / len(frames)
    storage.close()
    with cls.load_from(path) as check:
        q = psnr(check[:], frames)
    finite = q[np.isfinite(q)]
    return cls.load_from(path, read_only=True), {
        "name": name, "write": write * 1e3, "bytes": folder_bytes(path) / len(frames), "psnr_min": q.min(),
        "psnr_mean": finite.mean() if len(finite) else float("inf"), "rand": float("inf"), "seq": float("inf")}


def time_reads(storage: SpaceStorage, row: dict[str, Any], batches: list[np.ndarray], threads: int) -> None:
    """One pass of random batches and one sequential read; keeps the best ms/frame in ``row``."""
    video_module.DECODE_THREADS = threads
    n = sum(len(b) for b in batches)
    t0 = time.perf_counter()
    for b in batches:
        storage.get(b)
    row["rand"] = min(row["rand"], (time.perf_counter() - t0) / n * 1e3)
    t0 = time.perf_counter()
    storage.get(slice(None))
    row["seq"] = min(row["seq"], (time.perf_counter() - t0) / len(storage) * 1e3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--batches", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    frames = moving_scene(args.frames, H, W)
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, args.frames, 32) for _ in range(args.batches)]
    root = Path(tempfile.mkdtemp(prefix="trajstore-bench-"))
    threads = video_module.DECODE_THREADS
    setups = [("video (H.264)", VideoStorage, {}, threads), (f"JPEG q{JPEG_QUALITY}", ImageStorage, {"format": "JPEG"}, threads),
              ("PNG", ImageStorage, {"format": "PNG"}, threads),
              ("video, gop_size 4", VideoStorage, {"gop_size": 4}, threads),
              ("video, gop_size 16", VideoStorage, {"gop_size": 16}, threads),
              ("video, 1 decode thread", VideoStorage, {}, 1)]
    try:
        built = [(*build(name, cls, kw, frames, root), t) for name, cls, kw, t in setups]
        for storage, _, t in built:  # open files once, as a long-running reader would have
            time_reads(storage, {"rand": 0.0, "seq": 0.0}, batches[:1], t)
        for _ in range(args.repeat):  # interleaved, so that other load on the machine hits every storage alike
            for storage, row, t in built:
                time_reads(storage, row, batches, t)
        for storage, _, _ in built:
            storage.close()
    finally:
        video_module.DECODE_THREADS = threads
        shutil.rmtree(root, ignore_errors=True)
    rows = [row for _, row, _ in built]
    print(f"{args.frames} frames {H}x{W}, random reads in batches of 32 ({args.batches} batches, best of "
          f"{args.repeat}); video decode threads: {threads}")
    print(f"{'storage':24s} {'random ms/frame':>16s} {'seq ms/frame':>13s} {'write ms/frame':>15s} "
          f"{'bytes/frame':>12s} {'PSNR min/mean dB':>17s}")
    for r in rows:
        print(f"{r['name']:24s} {r['rand']:16.3f} {r['seq']:13.3f} {r['write']:15.3f} {r['bytes']:12.0f} "
              f"{r['psnr_min']:8.1f}/{r['psnr_mean']:<8.1f}")
    video, jpeg, png = rows[0], rows[1], rows[2]
    for peer in (jpeg, png):
        print(f"video / {peer['name']:8s}: random read x{video['rand'] / peer['rand']:.2f}, "
              f"sequential read x{video['seq'] / peer['seq']:.2f}, write x{video['write'] / peer['write']:.2f}, "
              f"bytes x{video['bytes'] / peer['bytes']:.3f}")


if __name__ == "__main__":
    main()
