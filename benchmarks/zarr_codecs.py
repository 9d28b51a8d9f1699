"""Frame codecs of the Diffusion Policy zarr export on PushT frames: bytes, PSNR, export and import time.

Records ``--episodes`` PushT episodes (gym-pusht, the scripted policy of
``trajstore.recording.pusht``, 96x96 frames, seeds 0, 1, ...) into a buffer whose frames are
PNG (exact), then exports it with each frame setting of
:func:`trajstore.interop.zarr.export_zarr` and imports each export back (PNG frames).

Per setting: bytes per frame of ``data/<pixels>`` on disk, its ratio against raw frames, PSNR in
dB of the exported frames against the recorded ones (``trajstore.testing.psnr``: mean and min),
and the wall time of the export and of the import as ratios against the raw setting in the same
run (best of ``--repeat``). Needs the ``sim`` and ``zarr`` extras.

Run: ``python benchmarks/zarr_codecs.py [--episodes 5] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from trajstore.recording.pusht import ScriptedPushPolicy
from trajstore.recording.pusht_recording import record_pusht
from trajstore.interop.zarr import export_zarr, import_zarr
from trajstore.replay_buffer import ReplayBuffer
from trajstore.testing import psnr

SETTINGS = (("raw", None, False), ("jpeg2k", "jpeg2k", False), ("jpeg2k lossless", "jpeg2k", True),
            ("jpegxl", "jpegxl", False), ("jpegxl lossless", "jpegxl", True))


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import zarr

    work = Path(tempfile.mkdtemp(prefix="zarr-codecs-"))
    try:
        # The scripted policy's full-length episodes (300 steps each), as the README's figures were measured.
        record_pusht(work / "rb", args.episodes, camera="png", progress=False, policy=ScriptedPushPolicy())
        with ReplayBuffer.load_from(work / "rb") as rb:
            frames = rb[:]["observation"]["pixels"]
        print(f"{len(frames)} PushT frames {frames.shape[1:]} in {args.episodes} episodes")
        rows = []
        for name, compressor, lossless in SETTINGS:
            out = work / name.replace(" ", "-")

            def export() -> None:
                shutil.rmtree(out, ignore_errors=True)
                export_zarr(work / "rb", out, compressor=compressor, lossless=lossless)

            def reimport() -> None:
                shutil.rmtree(work / "back", ignore_errors=True)
                import_zarr(out, work / "back", camera="png")

            t_export = _best(export, args.repeat)
            t_import = _best(reimport, args.repeat)
            nbytes = sum(f.stat().st_size for f in (out / "data" / "observation.pixels").glob("[0-9]*"))
            got = zarr.open_group(str(out), mode="r")["data/observation.pixels"][:]
            db = psnr(got, frames)
            rows.append((name, nbytes / len(frames), db, t_export, t_import))
        raw = rows[0]
        print(f"{'setting':<16} {'bytes/frame':>11} {'x raw':>6} {'PSNR mean':>9} {'PSNR min':>8} "
              f"{'export x':>8} {'import x':>8}")
        for name, per_frame, db, t_export, t_import in rows:
            mean = "exact" if np.isinf(db).all() else f"{np.mean(db[np.isfinite(db)]):.1f}"
            low = "exact" if np.isinf(db).all() else f"{db.min():.1f}"
            print(f"{name:<16} {per_frame:>11,.0f} {per_frame / raw[1]:>6.3f} {mean:>9} {low:>8} "
                  f"{t_export / raw[3]:>8.2f} {t_import / raw[4]:>8.2f}")
        print(f"raw: export {raw[3]:.2f} s, import {raw[4]:.2f} s ({len(frames)} steps)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
