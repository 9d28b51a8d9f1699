"""LeRobot as a contender of the peer benchmarks (see ``_workload.run_contender``).

Runs in LeRobot's own venv (``_venvs.peer_python("lerobot")``: lerobot 0.4.4, CPU torch 2.13.0),
offline, with the work-arounds of ``_lerobot_compat`` (placeholder torchvision op schemas, a PyAV
frame decoder, ordinary scheduling after video encoding). Layout: a LeRobot v3.0 dataset folder
(``LeRobotDataset.create(root=<folder>, fps=10)``); leaf paths become feature names with "."
(``observation.camera``), the reward a ``(1,)`` feature; every frame gets the task "bench".

* write, ``append``: ``ds.add_frame(step)`` per step and ``ds.save_episode()`` every 128 steps
  (LeRobot's end of an episode: it writes the episode's parquet rows, encodes its video and
  updates the metadata), ``ds.finalize()`` at the end. Camera as LeRobot records by default: a
  ``video`` feature (AV1 by libsvtav1, ``g=2``, ``crf=30``, via PNG files written by an image
  writer of 4 threads, as ``lerobot-record`` uses per camera). LeRobot has no batch call, so
  ``extend`` is reported as unsupported.
* reopen: ``LeRobotDataset(repo_id, root=<folder>)`` (offline), then ``ds[index]``; the frame comes
  back float32 ``(3, H, W)`` in [0, 1] and is turned into uint8 ``(H, W, 3)`` outside the clock.
* windows (``_windows``): the dataset written as above with the camera as ``video`` (variant
  ``video``) or ``image`` (variant ``png``: PNG inside the parquet files); read through
  ``LeRobotDataset(..., delta_timestamps={camera and state: [-0.1, 0], "action": [k / 10 for k in
  range(16)]})``; one batch is ``default_collate([ds[i] for i in 64 random indices])`` (what a
  ``DataLoader(ds, batch_size=64, num_workers=0)`` does).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import _lerobot_compat as compat


def _cache_dir() -> Path:
    """Hugging Face caches next to the folder this run writes or reads (see ``compat.setup``)."""
    for flag in ("--out", "--path"):
        if flag in sys.argv[:-1]:
            p = Path(sys.argv[sys.argv.index(flag) + 1]).resolve()
            return p.parent / f"{p.name}.hf-cache"
    return Path(tempfile.gettempdir()) / "trajstore-peers-lerobot-hf"


compat.setup(_cache_dir())

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import default_collate  # noqa: E402

import _windows as win  # noqa: E402
import _workload as wl  # noqa: E402

import lerobot  # noqa: E402
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

compat.install_pyav_decoder()

REPO_ID = "trajstore-bench/workload"
FPS = 10  # the workload's camera rate (its "fps" metadata)
TASK = "bench"
IMAGE_WRITER_THREADS = 4


def name(path: str) -> str:
    return path.replace("/", ".")


def features(camera: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for key, shape, dtype, *_ in wl.LEAVES:
        if key == wl.FRAME_KEY:
            out[name(key)] = {"dtype": camera, "shape": shape, "names": ["height", "width", "channels"]}
        else:
            out[name(key)] = {"dtype": dtype, "shape": shape or (1,), "names": None}
    return out


def info() -> dict[str, Any]:
    return {"library": "lerobot", "version": lerobot.__version__, "torch": torch.__version__}


def record(out: str, data: dict[str, np.ndarray], episode_len: int, camera: str) -> tuple[float, ...]:
    """Record the workload step by step with the camera as ``camera`` ("video" or "image").

    Returns ``(t_create, t0, record_s, end_s, t_close, t1)`` as ``_workload.write_result`` takes them.
    """
    frames = [{name(k): np.array(v[i]).reshape(-1) if v.ndim == 1 else np.array(v[i]) for k, v in data.items()}
              for i in range(len(data[wl.FRAME_KEY]))]
    t_create = time.perf_counter()
    ds = LeRobotDataset.create(REPO_ID, FPS, features(camera), root=out, use_videos=camera == "video",
                               image_writer_threads=IMAGE_WRITER_THREADS)
    t0 = time.perf_counter()

    def end() -> None:
        ds.save_episode()
        compat.reset_scheduler()

    record_s, end_s = wl.time_recording(frames, lambda f: ds.add_frame({**f, "task": TASK}), end, episode_len)
    t_close = time.perf_counter()
    ds.finalize()
    ds.stop_image_writer()
    return t_create, t0, record_s, end_s, t_close, time.perf_counter()


def write(out: str, data: dict[str, np.ndarray], episode_len: int, mode: str) -> dict[str, Any]:
    if mode != "append":
        return {"unsupported": "LeRobot 0.4.4 records frame by frame only (add_frame)"}
    n = len(data[wl.FRAME_KEY])
    t_create, t0, record_s, end_s, t_close, t1 = record(out, data, episode_len, "video")
    return wl.write_result(n, t_create, t0, record_s, end_s, t_close, t1, "AV1 video (libsvtav1, g=2, crf=30)")


def _step(item: dict[str, Any]) -> dict[str, Any]:
    """One item of ``ds[i]`` as the workload's flat step: uint8 HWC frame, reward ``()``."""
    out = {}
    for key, shape, *_ in wl.LEAVES:
        value = item[name(key)]
        if key == wl.FRAME_KEY:
            value = (value * 255).round().clamp(0, 255).to(torch.uint8).movedim(-3, -1)
        value = value.numpy()
        out[key] = value[..., 0] if not shape and value.ndim and value.shape[-1] == 1 else value
    return out


def reopen(path: str, index: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    ds = LeRobotDataset(REPO_ID, root=path)
    t1 = time.perf_counter()
    item = ds[index]
    t2 = time.perf_counter()
    return {"open_ms": (t1 - t0) * 1e3, "read_ms": (t2 - t1) * 1e3, "step": wl.nest(_step(item))}


def read_all(path: str) -> tuple[dict[str, np.ndarray], int | None]:
    ds = LeRobotDataset(REPO_ID, root=path)
    steps = [_step(ds[i]) for i in range(len(ds))]
    return {k: np.stack([s[k] for s in steps]) for k in steps[0]}, ds.meta.total_episodes


class Windows:
    """``prepare``/``open``/``normalize`` of the ``windows`` command (see ``_windows``)."""

    delta_timestamps = {**{name(k): [d / FPS for d in win.OBS_OFFSETS] for k in win.OBS_KEYS},
                        "action": [d / FPS for d in win.ACTION_OFFSETS]}

    def prepare(self, path: str, data: dict[str, np.ndarray], episode_len: int, variant: str) -> dict[str, Any]:
        camera = "image" if variant == "png" else "video"
        record(path, data, episode_len, camera)
        return {"camera": "PNG in parquet" if camera == "image" else "AV1 video, PyAV decode"}

    def open(self, path: str, variant: str) -> Callable[[np.random.Generator], Any]:
        ds = LeRobotDataset(REPO_ID, root=path, delta_timestamps=self.delta_timestamps)

        def sample(rng: np.random.Generator) -> Any:
            return default_collate([ds[int(i)] for i in rng.integers(0, len(ds), win.BATCH)])
        return sample

    def normalize(self, batch: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        leaves = _step(batch)
        leaves["reward"] = leaves["reward"].reshape(-1)
        masks = {k: batch[f"{name(k)}_is_pad"].numpy() for k in win.OFFSETS}
        return leaves, masks


if __name__ == "__main__":
    wl.run_contender(write, reopen, read_all, info, Windows())
