"""lerobot-lancedb (LanceDB's LeRobot loader) as a contender of the training-loader benchmark.

Runs in the ``lancedb`` peer venv (``benchmarks/peers/_venvs.py``: lerobot-lancedb 0.3.1, lancedb
0.40 with pylance, LeRobot 0.4.4, CPU torch 2.13.0) with the stand-ins of ``_lancedb_compat``
(lerobot 0.6 module names; PyAV in place of torchcodec for decoding). CLI: see
``LOADER_CONTRACT`` / ``_loader_common.parse_args``::

    python run_lancedb.py --data DATA --build            # DATA/lerobot/ -> DATA/lance/
    python run_lancedb.py --data DATA --workers 2 --batch 32 --warmup-batches W --batches K --out R.json

``--build``: the package's own converter, ``lerobot_lancedb.convert.convert(DATA/lance, root=DATA/lerobot)``
(what ``lerobot-lance-convert --root DATA/lerobot --out DATA/lance`` runs): ``frames.lance`` (one row
per frame), ``videos.lance`` (each mp4 verbatim in a blob column plus a keyframe byte index),
``meta.lance`` and a copy of ``meta/``. The videos are LeRobot's own (not re-encoded).

Loader: the package's ``LanceDBDataset(root=DATA/lance, delta_timestamps=..., return_uint8=True)``
with Diffusion-Policy windows (every camera and ``observation.state`` at ``[-1/fps, 0]`` s, ``action``
at ``k/fps`` for ``k`` in 0..15; the dataset repeats the episode's edge frame for positions outside
it and reports ``*_is_pad``), in the benchmark's ``DataLoader`` (``_loader_common.torch_loader``: batch,
shuffle, N persistent workers) with ``multiprocessing_context=lance_mp_context()`` as its README shows. The
DataLoader calls the dataset's batched ``__getitems__`` (one frames-table read and one blob range
fetch per batch). Each batch becomes the contract's flat numpy dict in :func:`to_numpy`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

_CACHE_ENV = "TRAJSTORE_LANCEDB_HF_CACHE"


def _cache_dir() -> Path:
    """Hugging Face caches next to DATA/lance (inherited by DataLoader workers through the environment)."""
    if _CACHE_ENV not in os.environ:
        if "--data" in sys.argv[:-1]:
            data = Path(sys.argv[sys.argv.index("--data") + 1]).resolve()
            os.environ[_CACHE_ENV] = str(data / "lance.hf-cache")
        else:
            os.environ[_CACHE_ENV] = str(Path(tempfile.gettempdir()) / "trajstore-peers-lancedb-hf")
    return Path(os.environ[_CACHE_ENV])


import _lancedb_compat  # noqa: E402

_lancedb_compat.install(_cache_dir())

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from lerobot_lancedb import LanceDBDataset, lance_mp_context  # noqa: E402

import _loader_common as common  # noqa: E402

CONTENDER = "lerobot-lancedb"
STATE = "observation.state"
ACTION = "action"
OBS_OFFSETS = (-1, 0)
ACTION_STEPS = 16


def build(data: Path) -> float:
    """DATA/lerobot/ (LeRobot v3.0) -> DATA/lance/ with the package's converter; returns the seconds taken.

    Skipped (0.0) when ``DATA/lance.complete`` exists (written last, like the other contenders' markers).
    Raises FileNotFoundError if DATA/lerobot is not a finished LeRobot dataset.
    """
    from lerobot_lancedb.convert import convert

    src, out, done = data / "lerobot", data / "lance", data / "lance.complete"
    if done.exists():
        return 0.0
    if not (data / "lerobot.complete").exists() or not (src / "meta" / "info.json").is_file():
        raise FileNotFoundError(f"{src}: no finished LeRobot v3.0 dataset; build run_lerobot.py first")
    if out.exists():
        shutil.rmtree(out)
    t0 = time.perf_counter()
    convert(out, root=src)
    done.touch()
    return time.perf_counter() - t0


def delta_timestamps(video_keys: list[str], fps: int) -> dict[str, list[float]]:
    """Diffusion Policy windows in seconds, as ``LeRobotDataset``/``LanceDBDataset`` take them."""
    obs = [d / fps for d in OBS_OFFSETS]
    return {**{k: obs for k in video_keys}, STATE: obs, ACTION: [k / fps for k in range(ACTION_STEPS)]}


def open_dataset(root: Path) -> LanceDBDataset:
    """The package's training dataset over ``root`` with the benchmark's windows, frames as uint8."""
    if not (root / "frames.lance").exists():
        raise FileNotFoundError(f"{root}: no Lance layout (frames.lance missing); run with --build first")
    meta = json.loads((root / "meta" / "info.json").read_text())
    video_keys = [k for k, f in meta["features"].items() if f.get("dtype") == "video"]
    return LanceDBDataset(root=root, delta_timestamps=delta_timestamps(video_keys, int(meta["fps"])),
                          return_uint8=True)


def to_numpy(batch: dict) -> dict[str, np.ndarray]:
    """A collated ``LanceDBDataset`` batch as the contract's flat dict.

    Cameras ``observation.images.x`` uint8 ``(B, 2, 3, H, W)`` -> ``observation/images/x`` ``(B, 2, H, W, 3)``;
    ``observation.state`` ``(B, 2, D)`` and ``action`` ``(B, 16, D)`` float32; ``index`` ``(B,)`` int64;
    ``<key>_is_pad`` ``(B, T)`` bool -> ``<key with "/">_is_pad``.
    Raises KeyError naming a missing key.
    """
    out: dict[str, np.ndarray] = {}
    for key, value in batch.items():
        if not isinstance(value, torch.Tensor):
            continue
        if key.endswith(common.PAD_SUFFIX):  # "<key>_is_pad" (B, T) bool, checked against the episodes
            out[key.removesuffix(common.PAD_SUFFIX).replace(".", "/") + common.PAD_SUFFIX] = value.numpy()
        elif value.dtype == torch.uint8 and value.ndim == 5:
            out[key.replace(".", "/")] = value.permute(0, 1, 3, 4, 2).numpy()
    for key in (STATE, ACTION, "index"):
        if key not in batch:
            raise KeyError(f"LanceDBDataset batch has no {key!r} (keys: {sorted(batch)})")
    out["observation/state"] = batch[STATE].numpy()
    out["action"] = batch[ACTION].numpy()
    out["index"] = batch["index"].numpy().astype(np.int64, copy=False)
    return out


def make_loader(root: Path, args) -> DataLoader:
    """The benchmark's DataLoader (``_loader_common.torch_loader``) over :func:`open_dataset`, workers
    started by ``lance_mp_context()`` (forkserver) as the package's README asks."""
    extra = {"multiprocessing_context": lance_mp_context()} if args.workers > 0 else {}
    return common.torch_loader(open_dataset(root), args, **extra)


NOTES = ("LanceDBDataset (delta_timestamps windows, return_uint8: frames uint8, CHW turned HWC for the check) "
         "over its own converter's Lance layout of the LeRobot dataset (LeRobot's AV1 videos kept verbatim as "
         "blobs); under LeRobot 0.4.4 instead of the declared lerobot>=0.6 (needs Python 3.12); video "
         "decoded by PyAV instead of torchcodec (no FFmpeg shared libs here), same byte-range fetches; "
         "first batch includes the forkserver start: each worker re-imports torch, lerobot and lance")


def main(argv: list[str] | None = None) -> None:
    args = common.parse_args(argv)
    data = Path(args.data)
    root = data / "lance"
    truth = common.load_truth(data)
    if args.build:
        seconds = build(data)
        common.write_result({"contender": CONTENDER, "shape": truth.meta["shape"], "build_s": seconds,
                             "folder_mib": common.folder_mib(root)}, args)
        return
    if not (data / "lance.complete").exists():
        common.unavailable(args, truth, f"no {root} (run with --build)", CONTENDER)
        return
    notes = (f"lerobot-lancedb {version('lerobot-lancedb')} (lancedb {version('lancedb')}, pylance "
             f"{version('pylance')}, lerobot {version('lerobot')}): {NOTES}")
    common.measure(lambda: make_loader(root, args), to_numpy, truth, args, contender=CONTENDER, folder=root,
                   notes=notes)


if __name__ == "__main__":
    main()
