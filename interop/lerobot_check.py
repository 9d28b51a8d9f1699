"""The LeRobot half of ``make interop-check``: open an export with LeRobot's own reader and compare it
with the reference that ``lerobot_reference.py dump`` wrote from the buffer. Runs in the LeRobot venv
(``python benchmarks/peers/_venvs.py lerobot``), offline:

    HF_HUB_OFFLINE=1 <lerobot python> interop/lerobot_check.py DATASET REPO_ID REFERENCE.npz

Checks: episode count and lengths, fps, tasks (``meta.tasks`` and each item's ``task``), every low-dim
value of every frame exactly, ``timestamp`` / ``frame_index`` / ``episode_index``, every camera frame
within codec loss (PSNR >= MIN_PSNR_DB, and the decoded frame is closer to its own reference than to
any other distinct frame of its episode: the right timestamp), ``delta_timestamps`` windows (values and
``*_is_pad`` at episode edges) and ``meta.stats``. Then what trajstore keeps where LeRobot has no place
(see ``trajstore.interop.lerobot._trajstore_meta``): LeRobot loads info.json with its ``trajstore`` entry
and keeps it in ``meta.info``; a scalar leaf (entry shape ``[]``) is a LeRobot feature of shape ``(1,)``
that LeRobot hands out as one value; the ``episode_data/<key>`` columns of ``meta/episodes`` are visible in
``meta.episodes`` and decode to the reference's episode data, and none of them (nor a final observation)
reaches LeRobot's frames; ``meta/trajstore/final_observations.parquet`` holds the reference's final
observations (frames exact PNG). Prints one line per check; exits 1 on a failure.

Two work-arounds for this machine (see shared/reference/lerobot-offline.md): torchvision's compiled ops
cannot load beside the CPU torch, so placeholder op schemas are declared before importing LeRobot; and
LeRobot's PyAV path needs a torchvision API that torchvision 0.28 removed, so its
``decode_video_frames`` is replaced by a PyAV function with the same contract.
"""

from __future__ import annotations

import io
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import av  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

MIN_PSNR_DB = 30.0
TORCHVISION_OPS = ("roi_align", "_roi_align_backward", "ps_roi_align", "_ps_roi_align_backward", "roi_pool",
                   "_roi_pool_backward", "ps_roi_pool", "_ps_roi_pool_backward", "nms", "qnms", "qroi_align",
                   "deform_conv2d", "_deform_conv2d_backward")
_LIB = torch.library.Library("torchvision", "DEF")  # kept alive: the schemas live as long as it does
for _op in TORCHVISION_OPS:
    _LIB.define(f"{_op}(Tensor x) -> Tensor")

import lerobot.datasets.lerobot_dataset as lerobot_dataset  # noqa: E402


def decode_with_pyav(video_path, timestamps, tolerance_s, backend=None) -> torch.Tensor:
    """Frames nearest each timestamp (s) as float32 ``(N, C, H, W)`` in [0, 1]; raises if one is farther
    than ``tolerance_s`` from its timestamp."""
    with av.open(str(video_path)) as container:
        stream = container.streams.video[0]
        container.seek(int(min(timestamps) / stream.time_base), stream=stream, backward=True)
        times, frames = [], []
        for frame in container.decode(stream):
            t = float(frame.pts * stream.time_base)
            times.append(t)
            frames.append(frame.to_ndarray(format="rgb24"))
            if t >= max(timestamps) + tolerance_s:
                break
    times = np.array(times)
    out = []
    for ts in timestamps:
        k = int(np.argmin(np.abs(times - ts)))
        if abs(times[k] - ts) > tolerance_s:
            raise AssertionError(f"{video_path}: no frame within {tolerance_s} s of {ts} s (nearest {times[k]} s)")
        out.append(frames[k])
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).float() / 255


lerobot_dataset.decode_video_frames = decode_with_pyav
LeRobotDataset = lerobot_dataset.LeRobotDataset

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        FAILURES.append(what)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def to_hwc(frame: torch.Tensor) -> np.ndarray:
    return np.clip(np.rint(frame.permute(1, 2, 0).numpy() * 255), 0, 255).astype(np.uint8)


def main(root: str, repo_id: str, reference: str) -> None:
    ref = dict(np.load(reference))
    lengths, tasks, fps = ref.pop("__lengths__"), [str(t) for t in ref.pop("__tasks__")], float(ref.pop("__fps__"))
    episode_data = json.loads(str(ref.pop("__episode_data__")))
    final_episodes = ref.pop("__final_episodes__").tolist()
    finals = {k[len("__final__."):]: ref.pop(k) for k in list(ref) if k.startswith("__final__.")}
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    episode_of = np.repeat(np.arange(len(lengths)), lengths)
    ds = LeRobotDataset(repo_id, root=root)
    renamed = leaf_keys(ds)
    for old, new in renamed.items():  # an export with key_map: the reference's keys are the leaf paths
        for table in (ref, finals):
            if old in table:
                table[new] = table.pop(old)
    if renamed:
        print(f"features renamed by the export (leaf -> key): {renamed}")
    cameras = [k for k in ds.meta.camera_keys]
    low_dim = [k for k in ref if k not in cameras]
    print(f"{root}: {ds.num_episodes} episodes, {ds.num_frames} frames, fps {ds.fps}, cameras {cameras} "
          f"({', '.join(ds.meta.features[k]['dtype'] for k in cameras)}), low-dim {low_dim}")
    check(ds.num_episodes == len(lengths) and ds.num_frames == int(lengths.sum()),
          f"episodes {ds.num_episodes} == {len(lengths)}, frames {ds.num_frames} == {int(lengths.sum())}")
    check(ds.fps == fps, f"fps {ds.fps} == {fps:g}")
    check([ds.meta.episodes[e]["length"] for e in range(len(lengths))] == lengths.tolist(), "episode lengths")
    distinct = list(dict.fromkeys(tasks))
    check(list(ds.meta.tasks.index) == distinct, f"meta.tasks {list(ds.meta.tasks.index)} == {distinct}")
    check(sorted(cameras) == sorted(k for k in ref if ref[k].ndim == 4), "every camera leaf is a camera feature")

    value_errors, frame_psnr, wrong_frame, meta_errors = 0, [], 0, 0
    for i in range(ds.num_frames):
        item = ds[i]
        e = int(episode_of[i])
        local = i - starts[e]
        meta_errors += (item["task"] != tasks[e] or int(item["episode_index"]) != e
                        or int(item["frame_index"]) != local or int(item["index"]) != i
                        or float(item["timestamp"]) != float(np.float32(local / fps)))
        for k in low_dim:  # LeRobot's item hands float64 out as float32 and int32 as int64: compare as it casts
            got = item[k].numpy().reshape(ref[k][i].shape)
            value_errors += not np.array_equal(got, ref[k][i].astype(got.dtype))
        for k in cameras:
            frame = to_hwc(item[k])
            frame_psnr.append(psnr(frame, ref[k][i]))
            episode_frames = ref[k][starts[e]:starts[e] + lengths[e]].astype(np.float64)
            dists = np.abs(episode_frames - frame).mean(axis=(1, 2, 3))
            own = np.abs(episode_frames[local] - ref[k][i]).mean()
            # closer to its own reference than to any other frame that differs from it (same-looking frames tie)
            others = [d for j, d in enumerate(dists) if np.abs(episode_frames[j] - episode_frames[local]).mean() > 1]
            wrong_frame += bool(others) and min(others) <= dists[local] + own
    check(meta_errors == 0, f"task, episode_index, frame_index, index, timestamp of every frame ({meta_errors} wrong)")
    check(value_errors == 0, f"every low-dim value of every item exact, in the dtype LeRobot hands out "
                             f"({value_errors} wrong of {ds.num_frames * len(low_dim)})")
    table = ds.hf_dataset.data  # the arrow columns LeRobot loaded: the stored dtype and values
    stored_errors = 0
    for k in low_dim:
        typ = table.schema.field(k).type
        value_type = getattr(typ, "value_type", typ)  # a vector's element type
        stored = np.asarray(table.column(k).to_pylist(), dtype=ref[k].dtype).reshape(ref[k].shape)
        stored_errors += value_type.to_pandas_dtype() != ref[k].dtype or not np.array_equal(stored, ref[k])
    check(stored_errors == 0, f"every low-dim column LeRobot loads holds the leaf's values exactly, in its dtype "
                              f"({stored_errors} of {len(low_dim)} columns wrong)")
    if cameras:
        check(min(frame_psnr) >= MIN_PSNR_DB, f"every camera frame within codec loss: PSNR min "
                                              f"{min(frame_psnr):.1f} dB, mean {np.mean([p for p in frame_psnr if np.isfinite(p)] or [np.inf]):.1f} dB "
                                              f"(>= {MIN_PSNR_DB:g})")
        check(wrong_frame == 0, f"every decoded frame is its own timestamp's ({wrong_frame} closer to another frame)")

    # delta_timestamps windows: past frames of each camera, future actions; clamped and flagged at the edges
    camera_offsets, action_offsets = [-2, -1, 0], [0, 1, 2, 3, 4, 5]
    delta = {k: [d / fps for d in camera_offsets] for k in cameras}
    delta["action"] = [d / fps for d in action_offsets]
    windows = LeRobotDataset(repo_id, root=root, delta_timestamps=delta)
    window_errors = 0
    for i in range(windows.num_frames):
        item = windows[i]
        e = int(episode_of[i])
        lo, hi = starts[e], starts[e] + lengths[e] - 1
        want = np.clip(i + np.array(action_offsets), lo, hi)
        window_errors += not np.array_equal(item["action"].numpy(), ref["action"][want])
        window_errors += not np.array_equal(item["action_is_pad"].numpy(), (i + np.array(action_offsets)) > hi)
        for k in cameras:
            want = np.clip(i + np.array(camera_offsets), lo, hi)
            window_errors += not all(psnr(to_hwc(f), ref[k][j]) >= MIN_PSNR_DB for f, j in zip(item[k], want))
            window_errors += not np.array_equal(item[f"{k}_is_pad"].numpy(), (i + np.array(camera_offsets)) < lo)
    check(window_errors == 0, f"delta_timestamps windows (cameras {camera_offsets}, action {action_offsets} steps): "
                              f"values and is_pad at every anchor ({window_errors} wrong)")

    stats = ds.meta.stats
    action = ref["action"].astype(np.float64)
    check(np.array_equal(np.asarray(stats["action"]["min"]), action.min(0))
          and np.array_equal(np.asarray(stats["action"]["max"]), action.max(0))
          and np.allclose(np.asarray(stats["action"]["mean"]), action.mean(0), rtol=0, atol=1e-9)
          and np.allclose(np.asarray(stats["action"]["std"]), action.std(0), rtol=0, atol=1e-9),
          "meta.stats of action: min, max exact; mean, std within 1e-9")
    check_trajstore_entry(ds, root, episode_data, final_episodes, finals)
    print(f"{'PASSED' if not FAILURES else 'FAILED'}: {root}", flush=True)
    if FAILURES:
        sys.exit(1)


def leaf_keys(ds) -> dict:
    """``{leaf path joined by ".": LeRobot feature key}`` of the features the export renamed (``key_map``),
    from info.json's ``trajstore`` entry."""
    entry = ds.meta.info.get("trajstore") or {}
    return {".".join(spec["leaf"]): key for key, spec in entry.get("features", {}).items()
            if ".".join(spec["leaf"]) != key}


def decode_cell(value, encoding):
    return json.loads(value) if encoding == "json" and value is not None else value


def check_trajstore_entry(ds, root: str, episode_data: list, final_episodes: list, finals: dict) -> None:
    """What LeRobot did with trajstore's additions (the ``trajstore`` entry, episode data columns, the final
    observations file)."""
    import pyarrow.parquet as pq
    from PIL import Image

    entry = ds.meta.info.get("trajstore")
    check(isinstance(entry, dict) and entry.get("version") == 1,
          "LeRobot loaded info.json with its 'trajstore' entry (kept in meta.info, version 1)")
    if not isinstance(entry, dict):
        return
    scalars = [k for k, f in entry["features"].items() if f["shape"] == []]
    item = ds[0]
    check(all(tuple(ds.meta.features[k]["shape"]) == (1,) and item[k].numel() == 1 for k in scalars),
          f"scalar leaves {scalars}: LeRobot features of shape (1,), one value per item")
    columns = {key: spec["column"] for key, spec in entry["episode_data"].items()}
    held = ds.meta.episodes.column_names
    check(all(c in held for c in columns.values()),
          f"episode data columns {sorted(columns.values())} visible in LeRobot's meta.episodes")
    got = [{key: decode_cell(ds.meta.episodes[e][c], entry["episode_data"][key]["encoding"])
            for key, c in columns.items() if ds.meta.episodes[e][c] is not None}
           for e in range(ds.num_episodes)]
    check(got == episode_data, f"meta.episodes' episode data columns hold the episodes' data ({episode_data[:2]} ...)")
    frame_columns = set(ds.hf_dataset.column_names)
    check(not frame_columns & (set(columns.values()) | {"final_observation"}),
          f"LeRobot's frames hold no episode data or final observation column ({sorted(frame_columns)})")
    path = entry.get("final_observations")
    if not final_episodes:
        check(path is None, "no final observation, no side file named")
        return
    table = pq.read_table(os.path.join(root, path))
    check(table.column("episode_index").to_pylist() == final_episodes,
          f"{path}: one row per episode with a final observation {final_episodes}")
    errors = 0
    for key, want in finals.items():
        cells = table.column(key).to_pylist()
        for cell, w in zip(cells, want):
            value = np.asarray(Image.open(io.BytesIO(cell["bytes"]))) if isinstance(cell, dict) else np.asarray(cell)
            errors += not np.array_equal(value.reshape(w.shape), w)
    check(errors == 0, f"{path}: every final observation leaf {sorted(finals)} exact ({errors} wrong)")


if __name__ == "__main__":
    main(*sys.argv[1:4])
