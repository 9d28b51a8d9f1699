"""The recorded data of the training-loader benchmark: ``DATA/raw`` (NumPy only) and the trajstore buffers.

Shapes (``SHAPES``):

* ``pusht``: one camera ``observation/image`` 96x96x3 uint8, ``observation/state`` (2,) and ``action``
  (2,) float32, 100 episodes of 200 steps (20k steps), 10 fps;
* ``aloha``: four cameras ``observation/images/{cam_high,cam_low,cam_left_wrist,cam_right_wrist}``
  480x640x3 uint8, state and action (14,), 6 episodes of 120 steps, 50 fps.

Frames: the top half is the frame code of ``_loader_common`` (flat cells coding the global step and the
camera); the bottom half is texture: a static per-camera pattern (smooth gradients, coarse noise) that
drifts sideways, a moving disc and +-3 levels of sensor noise, so that JPEG and video codecs work about as
on a simple simulated scene. State and action code the step exactly (``_loader_common.state_values``).

``DATA/raw``: ``<leaf with "__" for "/">.npy`` per leaf, ``episode_ends.npy`` (int64 cumulative ends) and
``meta.json`` (``shape``, ``fps``, ``cameras``, ``episode_len``, ``episodes``, ``steps``, ``version``).
``DATA/trajstore_jpeg`` / ``DATA/trajstore_video``: trajstore buffers written through the public API
(cameras routed by ``kind="image"`` metadata: JPEG by default, ``kind_storage_cls={"image":
VideoStorage}`` for H.264 video), one ``extend`` and ``end_episode`` per episode.

Run: ``python _data.py --data DIR --shape pusht [--episodes N] [--episode-len L] [--trajstore jpeg,video]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _loader_common as lc  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "peers"))
from _workload import nest  # noqa: E402  (NumPy only, as in every peer venv)

VERSION = 1  # of the generated content; a folder of another version is written again

ALOHA_CAMERAS = ("cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist")
SHAPES: dict[str, dict[str, Any]] = {
    "pusht": {"cameras": ["observation/image"], "hw": (96, 96), "dim": 2, "fps": 10, "episodes": 100,
              "episode_len": 200},
    "aloha": {"cameras": [f"observation/images/{c}" for c in ALOHA_CAMERAS], "hw": (480, 640), "dim": 14,
              "fps": 50, "episodes": 6, "episode_len": 120},
}


class Texture:
    """The bottom half of one camera's frames: ``frame(step)`` -> ``(H - H // 2, W, 3)`` uint8."""

    def __init__(self, h: int, w: int, camera: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed * 100 + camera)
        self.h, self.w = h - h // 2, w
        y, x = np.mgrid[0:self.h, 0:w].astype(np.float32)
        y, x = y / self.h, x / w
        cy, cx = max(2, self.h // 12), max(2, w // 12)
        coarse = self.rng.normal(0, 22, (cy + 1, cx + 1, 3)).astype(np.float32)
        gy, gx = y * cy, x * cx
        iy, ix = gy.astype(int), gx.astype(int)
        fy, fx = (gy - iy)[..., None], (gx - ix)[..., None]
        tex = ((1 - fy) * (1 - fx) * coarse[iy, ix] + (1 - fy) * fx * coarse[iy, ix + 1]
               + fy * (1 - fx) * coarse[iy + 1, ix] + fy * fx * coarse[iy + 1, ix + 1])
        tint = self.rng.uniform(60, 160, 3).astype(np.float32)
        self.base = np.stack([tint[0] + 60 * x, tint[1] + 40 * y, tint[2] - 40 * x * y], -1) + tex
        self.y, self.x = y, x
        self.phase = self.rng.uniform(0, 2 * np.pi, 3)

    def frame(self, step: int) -> np.ndarray:
        img = np.roll(self.base, (step * max(1, self.w // 160)) % self.w, axis=1)
        cy = 0.5 + 0.3 * np.sin(step / 13 + self.phase[0])
        cx = 0.5 + 0.35 * np.cos(step / 19 + self.phase[1])
        disc = np.clip((0.12 - np.hypot((self.y - cy) * self.h / self.w, self.x - cx)) * 40, 0, 1)[..., None]
        img = img * (1 - disc) + disc * np.array([230, 60, 50], np.float32)
        img = img + self.rng.integers(-3, 4, img.shape[:2], dtype=np.int16)[..., None]
        return np.clip(img, 0, 255).astype(np.uint8)


def make_frame(texture: Texture, step: int, camera: int, h: int) -> np.ndarray:
    """One checkable frame ``(H, W, 3)`` uint8: the code of (step, camera) on top, the texture below."""
    frame = np.empty((h, texture.w, 3), np.uint8)
    lc.paint_code(frame, step, camera)
    frame[h // 2:] = texture.frame(step)
    return frame


def generate(data: str | Path, shape: str, episodes: int | None = None, episode_len: int | None = None,
             seed: int = 0) -> Path:
    """Write ``DATA/raw`` for ``shape`` (reused as is when its meta.json says the same); returns ``DATA``.

    Raises KeyError for an unknown shape.
    """
    if shape not in SHAPES:
        raise KeyError(f"unknown shape {shape!r} (known: {', '.join(SHAPES)})")
    cfg = SHAPES[shape]
    episodes, episode_len = episodes or cfg["episodes"], episode_len or cfg["episode_len"]
    steps = episodes * episode_len
    meta = {"shape": shape, "fps": cfg["fps"], "cameras": cfg["cameras"], "episode_len": episode_len,
            "episodes": episodes, "steps": steps, "seed": seed, "version": VERSION}
    data = Path(data)
    raw = data / "raw"
    if (raw / "meta.json").exists() and json.loads((raw / "meta.json").read_text()) == meta:
        return data
    if data.exists():
        shutil.rmtree(data)  # every contender's folder was made from the old data
    raw.mkdir(parents=True)
    h, w = cfg["hw"]
    for c, key in enumerate(cfg["cameras"]):
        out = np.lib.format.open_memmap(raw / lc.leaf_file(key), mode="w+", dtype=np.uint8, shape=(steps, h, w, 3))
        texture = Texture(h, w, c, seed)
        for t in range(steps):
            out[t] = make_frame(texture, t, c, h)
        out.flush()
        del out
    all_steps = np.arange(steps)
    np.save(raw / lc.leaf_file(lc.STATE_KEY), lc.state_values(all_steps, cfg["dim"]))
    np.save(raw / lc.leaf_file(lc.ACTION_KEY), lc.action_values(all_steps, cfg["dim"]))
    np.save(raw / "episode_ends.npy", np.arange(1, episodes + 1, dtype=np.int64) * episode_len)
    (raw / "meta.json").write_text(json.dumps(meta))
    return data


def load_raw(data: str | Path) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, Any]]:
    """``({leaf: array (frames memory-mapped)}, episode_ends, meta)`` of ``DATA/raw``."""
    raw = Path(data) / "raw"
    meta = json.loads((raw / "meta.json").read_text())
    keys = [*meta["cameras"], lc.STATE_KEY, lc.ACTION_KEY]
    arrays = {k: np.load(raw / lc.leaf_file(k), mmap_mode="r") for k in keys}
    return arrays, np.load(raw / "episode_ends.npy"), meta


def trajstore_space(meta: dict[str, Any], frame_shape: tuple[int, ...], dim: int) -> Any:
    """The step space: cameras ``kind="image"``, HWC, with the shape's fps; state and action float32."""
    from trajstore.spaces import BoxSpace, DictSpace

    cam = {"kind": "image", "layout": "HWC", "fps": meta["fps"]}
    leaves = {k: BoxSpace(0, 255, tuple(frame_shape), np.uint8, metadata=cam) for k in meta["cameras"]}
    leaves[lc.STATE_KEY] = BoxSpace(-1e7, 1e7, (dim,), np.float32)
    leaves[lc.ACTION_KEY] = BoxSpace(-1e7, 1e7, (dim,), np.float32)

    def build(d: dict[str, Any]) -> Any:
        return DictSpace({k: build(v) if isinstance(v, dict) else v for k, v in d.items()})
    return build(nest(leaves))


def build_trajstore(data: str | Path, variant: str) -> Path:
    """Write ``DATA/trajstore_<variant>`` (``jpeg``: the default routing; ``video``: VideoStorage) from
    ``DATA/raw``, unless it is there already; returns its path. Raises ValueError for another variant."""
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, VideoStorage, dict_storage_kwargs_from_space

    if variant not in ("jpeg", "video"):
        raise ValueError(f"trajstore variant {variant!r}: want jpeg or video")
    out = Path(data) / f"trajstore_{variant}"
    done = out.with_name(out.name + ".complete")
    if done.exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    arrays, ends, meta = load_raw(data)
    space = trajstore_space(meta, arrays[meta["cameras"][0]].shape[1:], arrays[lc.STATE_KEY].shape[1])
    routing = {"kind_storage_cls": {"image": VideoStorage}} if variant == "video" else {}
    rb = ReplayBuffer.create(DictStorage, space, cache_path=out, capacity=None,
                             **dict_storage_kwargs_from_space(space, **routing))
    start = 0
    for end in ends.tolist():
        rb.extend(nest({k: np.ascontiguousarray(v[start:end]) for k, v in arrays.items()}))
        rb.end_episode()
        start = end
    rb.close()
    done.write_text("")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--shape", required=True, choices=list(SHAPES))
    ap.add_argument("--episodes", type=int)
    ap.add_argument("--episode-len", type=int)
    ap.add_argument("--trajstore", default="", help="comma-separated trajstore variants to build (jpeg, video)")
    args = ap.parse_args()
    generate(args.data, args.shape, args.episodes, args.episode_len)
    for variant in [v for v in args.trajstore.split(",") if v]:
        build_trajstore(args.data, variant)
    print(json.dumps({"data": str(args.data), "trajstore": args.trajstore}))


if __name__ == "__main__":
    main()
