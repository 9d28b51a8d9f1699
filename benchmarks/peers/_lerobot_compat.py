"""What a script needs to run LeRobot 0.4.4 in the ``lerobot`` peer venv (see ``_venvs``), offline.

Facts from ``/work/shared/reference/lerobot-offline.md``, measured on these machines:

* The only torchvision 0.28.0 wheel on the index is a CUDA build whose compiled ops do not load
  beside the CPU torch 2.13.0: ``import torchvision`` fails on ``torchvision::nms``. LeRobot's
  dataset code never calls those ops, so :func:`define_torchvision_op_schemas` declares
  placeholder schemas for them before anything imports torchvision.
* LeRobot's PyAV video path calls ``torchvision.io.VideoReader`` (gone in torchvision 0.28) and
  torchcodec does not load beside torch 2.13 CPU. :func:`install_pyav_decoder` replaces
  ``lerobot.datasets.lerobot_dataset.decode_video_frames`` with :func:`decode_frames`, a PyAV
  function of the same contract. Like LeRobot's torchcodec path (its ``VideoDecoderCache``), it
  keeps one open container per file, so a read pays for seeking and decoding, not for opening.
* libsvtav1 (LeRobot's default encoder) switches a process running as root to real-time
  scheduling; :func:`reset_scheduler` puts it back after each ``save_episode()``.

Import this module first, call :func:`setup` with a folder for the Hugging Face caches, and only
then import lerobot.
"""

from __future__ import annotations

import os
from pathlib import Path

TORCHVISION_OPS = ("roi_align", "_roi_align_backward", "ps_roi_align", "_ps_roi_align_backward", "roi_pool",
                   "_roi_pool_backward", "ps_roi_pool", "_ps_roi_pool_backward", "nms", "qnms", "qroi_align",
                   "deform_conv2d", "_deform_conv2d_backward")
_LIBRARIES: list = []  # the torch.library handle must outlive the import of torchvision


def define_torchvision_op_schemas() -> None:
    import torch

    lib = torch.library.Library("torchvision", "DEF")
    for op in TORCHVISION_OPS:
        lib.define(f"{op}(Tensor x) -> Tensor")
    _LIBRARIES.append(lib)


def setup(cache_dir: str | os.PathLike) -> None:
    """Offline Hugging Face with its caches under ``cache_dir``, then the torchvision schemas.

    ``datasets`` converts parquet files into Arrow files in its cache when a dataset is opened; the
    cache goes into the benchmark's own folder so that runs neither share nor leave it.
    """
    cache = Path(cache_dir)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ["HF_HOME"] = str(cache / "hf-home")
    os.environ["HF_DATASETS_CACHE"] = str(cache / "hf-datasets")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    define_torchvision_op_schemas()


def reset_scheduler() -> None:
    """Back to ordinary scheduling if an encoder switched this process to SCHED_FIFO."""
    if hasattr(os, "sched_setscheduler") and os.sched_getscheduler(0) != os.SCHED_OTHER:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


_containers: dict[str, object] = {}


def decode_frames(video_path, timestamps, tolerance_s, backend=None):
    """Frames of ``video_path`` nearest to ``timestamps`` (s): float32 ``(N, C, H, W)`` in [0, 1].

    Seeks to the keyframe at or before the first timestamp and decodes forward until the last one;
    raises ``ValueError`` if a timestamp has no frame within ``tolerance_s`` (LeRobot's contract).
    """
    import av
    import numpy as np
    import torch

    key = str(video_path)
    container = _containers.get(key)
    if container is None:
        container = _containers[key] = av.open(key)
    stream = container.streams.video[0]
    base = float(stream.time_base)
    first, last = min(timestamps), max(timestamps)
    container.seek(max(0, int(first / base)), stream=stream, backward=True, any_frame=False)
    frames, times = [], []
    for frame in container.decode(stream):
        t = frame.pts * base
        frames.append(frame.to_ndarray(format="rgb24"))
        times.append(t)
        if t >= last - tolerance_s:
            break
    times_arr = np.asarray(times)
    picks = []
    for ts in timestamps:
        k = int(np.argmin(np.abs(times_arr - ts)))
        if abs(times_arr[k] - ts) >= tolerance_s:
            raise ValueError(f"{key}: no frame within {tolerance_s} s of {ts} s (nearest {times_arr[k]} s)")
        picks.append(frames[k])
    return torch.from_numpy(np.stack(picks)).permute(0, 3, 1, 2).float().div_(255)


def install_pyav_decoder() -> None:
    import lerobot.datasets.lerobot_dataset as lerobot_dataset

    lerobot_dataset.decode_video_frames = decode_frames
