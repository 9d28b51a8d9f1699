"""LeRobot 0.4.4 as a contender of the training-loader benchmark (its own venv, offline).

``--build`` writes ``DATA/lerobot`` with LeRobot's own writer: ``LeRobotDataset.create("bench/<shape>",
fps, features, root=DATA/lerobot, use_videos=True, image_writer_threads=4)``, ``add_frame`` per step
(task "bench"), ``save_episode()`` per episode, ``finalize()``; cameras as ``video`` features in
LeRobot's default codec (AV1 by libsvtav1, ``g=2``, ``crf=30``); leaf names with "." for "/". The
work-arounds of ``peers/_lerobot_compat.py`` apply (placeholder torchvision op schemas, a PyAV decoder
of LeRobot's contract, ordinary scheduling after each encode).

The loader: ``LeRobotDataset("bench/<shape>", root=DATA/lerobot, delta_timestamps={camera and
"observation.state": [-1/fps, 0], "action": [i/fps for i in range(16)]})`` in the benchmark's
``DataLoader`` (``_loader_common.torch_loader``). Frames come back float32 ``(B, 2, 3, H, W)`` in [0, 1]
and are checked as they are (``_loader_common.check_batch`` reads the code cells of float CHW frames
too); ``index`` is LeRobot's ``index`` column; its ``<key>_is_pad`` flags are checked.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent / "peers"))
import _lerobot_compat as compat  # noqa: E402
import _loader_common as lc  # noqa: E402

TASK = "bench"
IMAGE_WRITER_THREADS = 4


def _data_arg() -> Path:
    return Path(sys.argv[sys.argv.index("--data") + 1]).resolve() if "--data" in sys.argv[:-1] else Path(".")


compat.setup(_data_arg() / "lerobot.hf-cache")

import numpy as np  # noqa: E402
import torch  # noqa: E402,F401 - before lerobot, as LeRobot imports it

import lerobot  # noqa: E402
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

compat.install_pyav_decoder()


def name(key: str) -> str:
    return key.replace("/", ".")


def build(data: Path, truth: lc.Truth) -> None:
    raw = data / "raw"
    out = data / "lerobot"
    done = data / "lerobot.complete"
    if done.exists():
        return
    import shutil
    shutil.rmtree(out, ignore_errors=True)
    arrays = {k: np.load(raw / lc.leaf_file(k), mmap_mode="r") for k in truth.cameras + [lc.STATE_KEY, lc.ACTION_KEY]}
    features = {name(k): {"dtype": "video", "shape": truth.frame_shape, "names": ["height", "width", "channels"]}
                for k in truth.cameras}
    for k in (lc.STATE_KEY, lc.ACTION_KEY):
        features[name(k)] = {"dtype": "float32", "shape": (arrays[k].shape[1],), "names": None}
    ds = LeRobotDataset.create(f"bench/{truth.meta['shape']}", int(truth.fps), features, root=out, use_videos=True,
                               image_writer_threads=IMAGE_WRITER_THREADS)
    start = 0
    for end in truth.episode_ends.tolist():
        for t in range(start, end):
            ds.add_frame({**{name(k): np.asarray(v[t]) for k, v in arrays.items()}, "task": TASK})
        ds.save_episode()
        compat.reset_scheduler()
        start = end
    ds.finalize()
    ds.stop_image_writer()
    done.write_text("")


def main() -> None:
    args = lc.parse_args()
    data = Path(args.data).resolve()
    truth = lc.load_truth(data)
    if args.build:
        t0 = time.perf_counter()
        build(data, truth)
        lc.built(args, data / "lerobot", time.perf_counter() - t0, "lerobot")
        return
    if not (data / "lerobot.complete").exists():
        lc.unavailable(args, truth, f"no {data / 'lerobot'} (run with --build)", "lerobot")
        return
    fps = truth.fps
    delta = {**{name(k): [o / fps for o in lc.OBS_OFFSETS] for k in truth.cameras + [lc.STATE_KEY]},
             name(lc.ACTION_KEY): [o / fps for o in lc.ACTION_OFFSETS]}

    def make_loader():
        ds = LeRobotDataset(f"bench/{truth.meta['shape']}", root=data / "lerobot", delta_timestamps=delta)
        return lc.torch_loader(ds, args)

    def to_numpy(batch):
        out = {k: batch[name(k)].numpy() for k in (lc.STATE_KEY, lc.ACTION_KEY)}
        for k in truth.cameras:  # float (B, 2, 3, H, W) in [0, 1], as LeRobot hands it to a policy
            out[k] = batch[name(k)].numpy()
        out[lc.INDEX_KEY] = batch["index"].numpy()
        for k in truth.offsets():  # LeRobot's "<key>_is_pad" flags, checked against the episodes
            if name(k) + lc.PAD_SUFFIX in batch:
                out[k + lc.PAD_SUFFIX] = batch[name(k) + lc.PAD_SUFFIX].numpy()
        return out

    lc.measure(make_loader, to_numpy, truth, args, contender="lerobot", folder=data / "lerobot",
               notes=f"lerobot {lerobot.__version__}: AV1 video (libsvtav1, g=2, crf=30), PyAV decode "
                     "(peers/_lerobot_compat); frames float32 CHW in [0, 1] (checked as they are); "
                     "index: LeRobot's index column")


if __name__ == "__main__":
    main()
