"""One measurement of ``format_imports.py``, run in a fresh process: ``python format_imports_run.py JOB JSON``.

Prints one JSON line: ``{"seconds": best wall seconds of the timed part, "peak_rss_mb": ..., ...}``.
Jobs ``ts-*`` import trajstore (the project's python, ``PYTHONPATH`` a source tree); ``tfrecord-*`` run in
the ``tfrecord`` peer venv (tfrecord 1.14.6, Pillow, crc32c); ``robomimic-*`` in the ``robomimic`` venv
(robomimic 0.3.0, torch). Nothing is imported at module level beyond the standard library and NumPy, so
each python only needs what its jobs use.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


# -- RLDS: trajstore ----------------------------------------------------------------------------
def ts_rlds_parse(cfg: dict) -> dict:
    from trajstore.interop.rlds._example import parse_example
    from trajstore.interop.rlds._tfrecord import crc32c, iter_records

    def run() -> int:
        n = 0
        for shard in cfg["shards"]:
            for ref, payload in iter_records(shard):
                parse_example(payload, ref.where())
                n += 1
        return n

    seconds, records = _best(run, cfg["repeat"])
    return {"seconds": seconds, "records": records, "crc32c": crc32c.__module__}


def ts_rlds_import(cfg: dict) -> dict:
    from trajstore.interop.rlds import import_rlds

    def run() -> int:
        shutil.rmtree(cfg["out"], ignore_errors=True)
        return import_rlds(cfg["src"], cfg["out"], camera=cfg["camera"]).steps

    seconds, steps = _best(run, cfg["repeat"])
    return {"seconds": seconds, "steps": steps}


# -- RLDS: the tfrecord package -------------------------------------------------------------------
def tfrecord_parse(cfg: dict) -> dict:
    """tfrecord's ``example_loader`` (no CRC check: tfrecord 1.14.6 reads the CRC words and ignores them);
    with ``crc`` the masked CRC32C of every payload is computed (crc32c package) and compared with the
    record's stored header and footer words, read from a memory map of the shard (tfrecord gives no access
    to them)."""
    import mmap

    import crc32c
    from tfrecord import example_pb2
    from tfrecord.reader import example_loader, extract_feature_dict, tfrecord_iterator

    mapping = {"byte": "bytes_list", "float": "float_list", "int": "int64_list"}

    def masked(data) -> int:
        c = crc32c.crc32c(data)
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    def run() -> int:
        n = 0
        for shard in cfg["shards"]:
            if not cfg["crc"]:
                for _ in example_loader(shard, None):
                    n += 1
                continue
            with open(shard, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as blob:
                pos = 0
                for record in tfrecord_iterator(shard):
                    length = len(record)
                    stored = int.from_bytes(blob[pos + 12 + length:pos + 16 + length], "little")
                    head = int.from_bytes(blob[pos + 8:pos + 12], "little")
                    if masked(blob[pos:pos + 8]) != head or masked(record) != stored:
                        raise RuntimeError(f"{shard}: record {n}: CRC mismatch")
                    ex = example_pb2.Example()
                    ex.ParseFromString(record)
                    extract_feature_dict(ex.features, None, mapping)
                    pos += 16 + length
                    n += 1
        return n

    seconds, records = _best(run, cfg["repeat"])
    return {"seconds": seconds, "records": records}


def tfrecord_decode(cfg: dict) -> dict:
    """tfrecord's ``example_loader`` + Pillow: every episode's frames decoded into one ``(T, H, W, 3)``
    uint8 array, state/action reshaped to ``(T, n)``: what one writes by hand without TensorFlow."""
    import io

    from PIL import Image
    from tfrecord.reader import example_loader

    def run() -> int:
        steps = 0
        for shard in cfg["shards"]:
            for ex in example_loader(shard, None):
                frames = np.stack([np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))
                                   for b in ex["steps/observation/image"]])
                state = ex["steps/observation/state"].reshape(len(frames), -1)
                action = ex["steps/action"].reshape(len(frames), -1)
                assert frames.dtype == np.uint8 and len(state) == len(action)
                steps += len(frames)
        return steps

    seconds, steps = _best(run, cfg["repeat"])
    return {"seconds": seconds, "steps": steps}


# -- robomimic: trajstore -------------------------------------------------------------------------
def ts_robomimic_import(cfg: dict) -> dict:
    from trajstore.interop.robomimic import import_robomimic

    def run() -> int:
        shutil.rmtree(cfg["out"], ignore_errors=True)
        return import_robomimic(cfg["src"], cfg["out"], camera=cfg["camera"]).steps

    seconds, steps = _best(run, cfg["repeat"])
    if not cfg.get("keep_out"):
        shutil.rmtree(cfg["out"], ignore_errors=True)
    return {"seconds": seconds, "steps": steps}


def ts_robomimic_read(cfg: dict) -> dict:
    """``rb.sample_windows(B, window)`` batches (every leaf ``(B, window, ...)``, frames decoded uint8); best of
    ``repeat`` rounds of ``batches``."""
    from trajstore.replay_buffer import ReplayBuffer

    rng = np.random.default_rng(0)
    with ReplayBuffer.load_from(cfg["rb"]) as rb:
        for _ in range(cfg["warmup"]):
            rb.sample_windows(cfg["batch"], cfg["window"], rng=rng)
        b, seconds = None, float("inf")
        for _ in range(cfg["repeat"]):
            t0 = time.perf_counter()
            for _ in range(cfg["batches"]):
                b = rb.sample_windows(cfg["batch"], cfg["window"], rng=rng)
            seconds = min(seconds, time.perf_counter() - t0)
    shape = list(b["observation"]["agentview_image"].shape)
    return {"seconds": seconds, "samples": cfg["batch"] * cfg["batches"], "shape": shape}


# -- robomimic: robomimic 0.3.0 ---------------------------------------------------------------------
def _sequence_dataset(cfg: dict, cache: str):
    import robomimic.utils.obs_utils as ObsUtils
    from robomimic.utils.dataset import SequenceDataset

    ObsUtils.initialize_obs_utils_with_obs_specs({"obs": {"low_dim": cfg["low_dim"], "rgb": cfg["rgb"]}})
    return SequenceDataset(hdf5_path=cfg["src"], obs_keys=cfg["low_dim"] + cfg["rgb"],
                           dataset_keys=["actions", "rewards", "dones"], frame_stack=cfg["frame_stack"],
                           seq_length=cfg["seq_length"], pad_frame_stack=True, pad_seq_length=True,
                           hdf5_cache_mode=cache, hdf5_use_swmr=True, load_next_obs=False)


def robomimic_load(cfg: dict) -> dict:
    import io
    import contextlib

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        ds = _sequence_dataset(cfg, cfg["cache"])
    return {"seconds": time.perf_counter() - t0, "samples": len(ds)}


def robomimic_read(cfg: dict) -> dict:
    """``SequenceDataset.__getitem__`` batches through a torch ``DataLoader(num_workers=0)`` drawing samples
    uniformly with replacement (as ``sample_windows`` does); best of ``repeat`` rounds of ``batches``."""
    import contextlib
    import io

    import torch
    from torch.utils.data import DataLoader, RandomSampler

    torch.manual_seed(0)
    # one intra-op thread: with torch's default (one per core) the collate of the same cached items varied
    # 20x between runs on a busy 2-core machine; trajstore's reads run in the calling thread too.
    torch.set_num_threads(1)
    with contextlib.redirect_stdout(io.StringIO()):
        ds = _sequence_dataset(cfg, cfg["cache"])
    rounds = cfg["warmup"] + cfg["repeat"] * cfg["batches"]
    sampler = RandomSampler(ds, replacement=True, num_samples=rounds * cfg["batch"])
    loader = iter(DataLoader(ds, batch_size=cfg["batch"], sampler=sampler, num_workers=0))
    for _ in range(cfg["warmup"]):
        next(loader)
    b, seconds = None, float("inf")
    for _ in range(cfg["repeat"]):
        t0 = time.perf_counter()
        for _ in range(cfg["batches"]):
            b = next(loader)
        seconds = min(seconds, time.perf_counter() - t0)
    shape = list(b["obs"][cfg["rgb"][0]].shape)
    return {"seconds": seconds, "samples": cfg["batch"] * cfg["batches"], "shape": shape}


JOBS = {"ts-rlds-parse": ts_rlds_parse, "ts-rlds-import": ts_rlds_import, "tfrecord-parse": tfrecord_parse,
        "tfrecord-decode": tfrecord_decode, "ts-robomimic-import": ts_robomimic_import,
        "ts-robomimic-read": ts_robomimic_read, "robomimic-load": robomimic_load,
        "robomimic-read": robomimic_read}


def main() -> None:
    job, cfg = sys.argv[1], json.loads(sys.argv[2])
    out = JOBS[job](cfg)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if not Path(sys.argv[0]).name.startswith("format_imports_run"):
        raise SystemExit("run as a script")
    main()
