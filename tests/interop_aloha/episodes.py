"""Small ALOHA / ACT episode files for the tests, written with h5py the way the recorders create them.

Raw (``record_sim_episodes.py``): ``create_dataset(cam, (T, H, W, 3), dtype="uint8", chunks=(1, H, W, 3))``,
``create_dataset("qpos", (T, 14))`` (no dtype: float32), filled with ``root[name][...] = array``; root
attribute ``sim``. Compressed (``record_episodes.py``): each frame JPEG-encoded as OpenCV would (OpenCV takes
the array as BGR: Pillow is given the array with its channels reversed), padded with zeros to the longest
frame, ``(T, padded_size)`` uint8 with chunks ``(1, padded_size)``, ``/compress_len`` ``(num_cams, T)`` (float32)
in the camera order given, root attributes ``sim`` False and ``compress`` True; plus ``effort`` and
``base_action``.
"""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import numpy as np
from PIL import Image

T = 6
H, W = 48, 64
CAMS = ("top", "angle")
#: The recorders pass no dtype: h5py's default is float32 (h5py 3.16 wants it said).
F4 = "f4"


def frames(seed: int, steps: int = T, h: int = H, w: int = W) -> np.ndarray:
    """``(steps, h, w, 3)`` uint8 frames of smooth colour blocks (JPEG keeps them within a few levels):
    the left half red-heavy, the right half blue-heavy, so a channel swap shows."""
    rng = np.random.default_rng(seed)
    out = np.zeros((steps, h, w, 3), np.uint8)
    for t in range(steps):
        base = rng.integers(40, 200, size=3)
        out[t, :, : w // 2] = (220, base[1], 30)
        out[t, :, w // 2:] = (30, base[2], 220)
        out[t, h // 4: h // 2, w // 4: w // 2] = base
    return out


def arrays(seed: int, steps: int = T) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1000 + seed)
    return {name: rng.normal(size=(steps, n)).astype(np.float32)
            for name, n in (("qpos", 14), ("qvel", 14), ("effort", 14), ("action", 14), ("base_action", 2))}


def cv2_like_jpeg(image: np.ndarray, quality: int = 90) -> bytes:  # 4:4:4 for a tight tolerance
    """The bytes ``cv2.imencode(".jpg", image)`` would give in kind: the array is taken as BGR."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image[..., ::-1])).save(buf, format="JPEG", quality=quality, subsampling=0)
    return buf.getvalue()


def write_raw(path: Path, seed: int, steps: int = T, cams: tuple[str, ...] = CAMS, sim: bool = True) -> dict:
    """A ``record_sim_episodes.py`` file; returns what it holds (``qpos``..., ``images/<cam>``)."""
    data = arrays(seed, steps)
    imgs = {cam: frames(seed * 10 + i, steps) for i, cam in enumerate(cams)}
    with h5py.File(path, "w", rdcc_nbytes=1024 ** 2 * 2) as root:
        root.attrs["sim"] = sim
        obs = root.create_group("observations")
        image = obs.create_group("images")
        for cam in cams:
            image.create_dataset(cam, (steps, H, W, 3), dtype="uint8", chunks=(1, H, W, 3))
        obs.create_dataset("qpos", (steps, 14), dtype=F4)
        obs.create_dataset("qvel", (steps, 14), dtype=F4)
        root.create_dataset("action", (steps, 14), dtype=F4)
        root["/observations/qpos"][...] = data["qpos"]
        root["/observations/qvel"][...] = data["qvel"]
        root["/action"][...] = data["action"]
        for cam in cams:
            root[f"/observations/images/{cam}"][...] = imgs[cam]
    return {"qpos": data["qpos"], "qvel": data["qvel"], "action": data["action"], "images": imgs}


def write_compressed(path: Path, seed: int, steps: int = T, cams: tuple[str, ...] = CAMS,
                     quality: int = 90, task_order: tuple[str, ...] | None = None) -> dict:
    """A mobile-aloha ``record_episodes.py`` file with ``COMPRESS = True``; ``compress_len`` rows in
    ``task_order`` (the recorder's ``camera_names``; default ``cams``)."""
    data = arrays(seed, steps)
    imgs = {cam: frames(seed * 10 + i, steps) for i, cam in enumerate(cams)}
    order = task_order or cams
    encoded = {cam: [cv2_like_jpeg(f, quality) for f in imgs[cam]] for cam in order}
    compressed_len = np.array([[len(b) for b in encoded[cam]] for cam in order])
    padded_size = int(compressed_len.max())
    with h5py.File(path, "w", rdcc_nbytes=1024 ** 2 * 2) as root:
        root.attrs["sim"] = False
        root.attrs["compress"] = True
        obs = root.create_group("observations")
        image = obs.create_group("images")
        for cam in order:
            image.create_dataset(cam, (steps, padded_size), dtype="uint8", chunks=(1, padded_size))
        for name in ("qpos", "qvel", "effort"):
            obs.create_dataset(name, (steps, 14), dtype=F4)
            root[f"/observations/{name}"][...] = data[name]
        root.create_dataset("action", (steps, 14), dtype=F4)
        root.create_dataset("base_action", (steps, 2), dtype=F4)
        root["/action"][...] = data["action"]
        root["/base_action"][...] = data["base_action"]
        for cam in order:
            rows = np.zeros((steps, padded_size), np.uint8)
            for t, b in enumerate(encoded[cam]):
                rows[t, :len(b)] = np.frombuffer(b, np.uint8)
            root[f"/observations/images/{cam}"][...] = rows
        root.create_dataset("compress_len", (len(order), steps), dtype=F4)
        root["/compress_len"][...] = compressed_len
    return {**data, "images": imgs, "encoded": encoded, "compress_len": compressed_len}


def raw_folder(folder: Path, indices=(0, 1, 2), steps: int = T) -> dict[int, dict]:
    folder.mkdir(parents=True, exist_ok=True)
    return {n: write_raw(folder / f"episode_{n}.hdf5", n, steps) for n in indices}


def compressed_folder(folder: Path, indices=(0, 1), steps: int = T, **kw) -> dict[int, dict]:
    folder.mkdir(parents=True, exist_ok=True)
    return {n: write_compressed(folder / f"episode_{n}.hdf5", n, steps, **kw) for n in indices}


def refused(folder, out, message, exc=None, **kw):
    """``import_aloha(folder, out)`` raises ``exc`` (default FormatError) matching ``message``; ``out`` not made."""
    import pytest

    from trajstore.errors import FormatError
    from trajstore.interop.aloha import import_aloha

    with pytest.raises(exc or FormatError, match=message):
        import_aloha(folder, out, camera="png", **kw)
    assert not out.exists()


def edit(folder, n=1):
    """Episode ``n`` of ``folder`` open for editing (h5py, mode ``a``)."""
    return h5py.File(folder / f"episode_{n}.hdf5", "a")
