"""The data of ``format_imports.py``: a synthetic RLDS dataset (TFDS folder of TFRecord shards) and a
robomimic-layout HDF5 file, written here with NumPy, Pillow and h5py.

RLDS (``rlds_dataset``): ``name`` ``bench``, version ``1.0.0``, one ``train`` split of ``shards`` shards;
episode ``e`` has ``steps`` steps with ``observation/image`` (``(S, S, 3)`` uint8, ``encoding`` PNG or
JPEG q95), ``observation/state`` ``(8,)`` float32, ``action`` ``(7,)`` float32, ``reward`` float32, and the
bools ``is_first``/``is_last``/``is_terminal``. Records are framed with masked CRC32C and encoded from the
wire-format description (``tests/interop_rlds/records.py``, the project's test encoder).

robomimic (``robomimic_file``): the layout of ``tests/fixtures/robomimic_hdf5/README.md``: ``data/demo_e``
with ``actions`` (N, 7), ``rewards``, ``dones``, ``states`` (N, 10), ``obs/agentview_image`` and
``obs/robot0_eye_in_hand_image`` (N, 84, 84, 3) uint8 gzip, ``obs/robot0_eef_pos`` (N, 3), ``obs/object``
(N, 10), the same under ``next_obs`` (shifted by one step), ``mask/train`` every demo; ``env_args`` with
``control_freq`` 20.

Frames are smooth gradients with a moving square and mild noise (a camera-like PNG/JPEG size, not
incompressible noise).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
IMAGE_FORMATS = {"png": "PNG", "jpeg": "JPEG"}


def frame(e: int, t: int, size: int, rng: np.random.Generator, camera: int = 0) -> np.ndarray:
    """One camera-like ``(size, size, 3)`` uint8 frame of episode ``e``, step ``t``."""
    y, x = np.mgrid[0:size, 0:size]
    img = np.empty((size, size, 3), np.uint8)
    img[..., 0] = (x * 255 // size + 7 * e + camera * 40) % 256
    img[..., 1] = (y * 255 // size + 3 * t) % 256
    img[..., 2] = ((x + y) * 127 // size + 50 * camera) % 256
    s = size // 6
    cx, cy = (5 * t + 11 * e) % (size - s), (3 * t + 5 * e) % (size - s)
    img[cy:cy + s, cx:cx + s] = (230, 40, 40)
    noise = rng.integers(-4, 5, img.shape)
    return np.clip(img.astype(np.int16) + noise, 0, 255).astype(np.uint8)


def _encode(img: np.ndarray, fmt: str) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, IMAGE_FORMATS[fmt], **({"quality": 95} if fmt == "jpeg" else {}))
    return buf.getvalue()


def _features(size: int, encoding: str) -> dict:
    p = "tensorflow_datasets.core.features."

    def tensor(dtype, *dims, cls="tensor_feature.Tensor"):
        return {"pythonClassName": p + cls, "tensor": {
            "dtype": dtype, "encoding": "none", "shape": {"dimensions": [str(d) for d in dims]} if dims else {}}}

    def fdict(children):
        return {"pythonClassName": p + "features_dict.FeaturesDict", "featuresDict": {"features": children}}

    image = {"pythonClassName": p + "image_feature.Image", "image": {
        "dtype": "uint8", "encodingFormat": encoding, "shape": {"dimensions": [str(size), str(size), "3"]}}}
    scalar_bool = tensor("bool", cls="scalar.Scalar")
    return fdict({"steps": {"pythonClassName": p + "dataset_feature.Dataset", "sequence": {
        "length": "-1", "feature": fdict({
            "is_first": scalar_bool, "is_last": scalar_bool, "is_terminal": scalar_bool,
            "observation": fdict({"image": image, "state": tensor("float32", 8)}),
            "action": tensor("float32", 7), "reward": tensor("float32", cls="scalar.Scalar")})}}})


def rlds_dataset(root: Path, episodes: int, steps: int, *, size: int = 64, encoding: str = "png",
                 shards: int = 4, seed: int = 0) -> Path:
    """Write the RLDS dataset into ``root`` (its builder folder, made here); returns ``root``."""
    sys.path.insert(0, str(ROOT))
    from tests.interop_rlds.records import example, record

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    per = [len(part) for part in np.array_split(np.arange(episodes), shards)]
    e = 0
    for i, n in enumerate(per):
        with open(root / f"bench-train.tfrecord-{i:05d}-of-{shards:05d}", "wb") as f:
            for _ in range(n):
                T = steps
                f.write(record(example({
                    "steps/is_first": ("int64", [1] + [0] * (T - 1)),
                    "steps/is_last": ("int64", [0] * (T - 1) + [1]),
                    "steps/is_terminal": ("int64", [0] * (T - 1) + [1]),
                    "steps/observation/image": ("bytes", [_encode(frame(e, t, size, rng), encoding)
                                                          for t in range(T)]),
                    "steps/observation/state": ("float", rng.standard_normal(T * 8).astype(np.float32)),
                    "steps/action": ("float", rng.uniform(-1, 1, T * 7).astype(np.float32)),
                    "steps/reward": ("float", (np.arange(T) == T - 1).astype(np.float32)),
                })))
                e += 1
    info = {"name": "bench", "version": "1.0.0", "fileFormat": "tfrecord",
            "splits": [{"name": "train", "shardLengths": [str(n) for n in per]}]}
    (root / "dataset_info.json").write_text(json.dumps(info))
    (root / "features.json").write_text(json.dumps(_features(size, encoding)))
    return root


def rlds_shards(root: Path) -> list[Path]:
    return sorted(root.glob("bench-train.tfrecord-*"))


CAMERAS = ("agentview_image", "robot0_eye_in_hand_image")
LOW_DIM = {"robot0_eef_pos": 3, "object": 10}


def robomimic_file(path: Path, demos: int, steps: int, *, size: int = 84, seed: int = 0) -> Path:
    """Write the robomimic-layout file ``path`` (``demos`` demos of ``steps`` samples); returns ``path``."""
    import h5py

    rng = np.random.default_rng(seed)
    env_args = {"env_name": "Lift", "env_version": "1.4.1", "type": 1,
                "env_kwargs": {"control_freq": 20, "camera_names": ["agentview", "robot0_eye_in_hand"],
                               "camera_heights": size, "camera_widths": size}}
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["total"] = demos * steps
        data.attrs["env_args"] = json.dumps(env_args, indent=4)
        for e in range(demos):
            g = data.create_group(f"demo_{e}")
            g.attrs["num_samples"] = steps
            g["actions"] = rng.uniform(-1, 1, (steps, 7))
            g["rewards"] = (np.arange(steps) == steps - 1).astype(np.float64)
            g["dones"] = (np.arange(steps) == steps - 1).astype(np.int64)
            g["states"] = rng.standard_normal((steps, 10))
            frames = {c: np.stack([frame(e, t, size, rng, k) for t in range(steps + 1)])
                      for k, c in enumerate(CAMERAS)}
            low = {k: rng.standard_normal((steps + 1, n)) for k, n in LOW_DIM.items()}
            for group, rows in (("obs", slice(0, steps)), ("next_obs", slice(1, steps + 1))):
                for c in CAMERAS:
                    g.create_dataset(f"{group}/{c}", data=frames[c][rows], compression="gzip",
                                     chunks=(min(steps, 16), size, size, 3))
                for k in LOW_DIM:
                    g[f"{group}/{k}"] = low[k][rows]
        f["mask/train"] = np.array([f"demo_{e}" for e in range(demos)], dtype="S")
    return path
