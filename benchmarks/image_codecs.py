"""Frame codecs side by side: per-frame encode and decode time and bytes per frame.

Compares, at 96x96 and 224x224 RGB uint8:

* simplejpeg JPEG (what ``ImageStorage`` uses) vs Pillow JPEG, both at ``ImageStorage``'s default
  quality, 4:4:4 chroma;
* Pillow PNG at ``compress_level`` 1 (what ``ImageStorage`` uses) vs Pillow's default 6.

Frames are synthetic camera-like images: a smooth background (gradients plus low-frequency
sinusoids), a few flat-coloured boxes (objects) and mild sensor noise (sigma 2 levels).
Times are the best of ``--repeat`` runs of ``--frames`` frames, one thread, per frame.
Results are printed as ratios against the peer; absolute times depend on the machine.

Run: ``python benchmarks/image_codecs.py [--frames 200] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import io
import time
from typing import Callable

import numpy as np
import simplejpeg
from PIL import Image

from trajstore.storages.frames import _image_codec as codec


def camera_frame(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A smooth scene with flat boxes and noise, uint8 ``(h, w, 3)``."""
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    img = np.stack([110 + 50 * np.sin(2 * np.pi * (rng.uniform(0.3, 1.5) * x + rng.uniform(0.3, 1.5) * y)
                                      + rng.uniform(0, 6)) + 40 * (x - y) for _ in range(3)], axis=-1)
    for _ in range(3):
        y0, x0 = rng.integers(0, h * 3 // 4), rng.integers(0, w * 3 // 4)
        img[y0:y0 + h // 6, x0:x0 + w // 6] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 2, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def per_frame_us(fn: Callable[[int], object], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


def pil_jpeg(frame: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=codec.JPEG_QUALITY, subsampling=0)  # 0 = 4:4:4
    return buf.getvalue()


def pil_png(level: int) -> Callable[[np.ndarray], bytes]:
    def enc(frame: np.ndarray) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, format="PNG", compress_level=level)
        return buf.getvalue()
    return enc


def pil_decode(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def sj_decode(out: np.ndarray) -> Callable[[bytes], object]:
    return lambda data: simplejpeg.decode_jpeg(data, colorspace="RGB", buffer=out)


def measure(name: str, frames: list[np.ndarray], enc: Callable, dec: Callable, repeat: int) -> dict:
    payloads = [enc(f) for f in frames]
    n = len(frames)
    return {"name": name,
            "enc_us": per_frame_us(lambda i: enc(frames[i]), n, repeat),
            "dec_us": per_frame_us(lambda i: dec(payloads[i]), n, repeat),
            "bytes": float(np.mean([len(p) for p in payloads]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"simplejpeg {simplejpeg.__version__}, Pillow {Image.__version__}; "
          f"{args.frames} frames, best of {args.repeat}")
    for size in (96, 224):
        rng = np.random.default_rng(size)
        frames = [camera_frame(size, size, rng) for _ in range(args.frames)]
        out = np.empty((size, size, 3), np.uint8)
        ours_jpeg = measure(f"simplejpeg JPEG q{codec.JPEG_QUALITY} 4:4:4", frames,
                            lambda f: codec.encode(f, "JPEG", codec.JPEG_QUALITY), sj_decode(out), args.repeat)
        peer_jpeg = measure(f"Pillow JPEG q{codec.JPEG_QUALITY} 4:4:4", frames, pil_jpeg, pil_decode, args.repeat)
        ours_png = measure(f"Pillow PNG level {codec.PNG_COMPRESS_LEVEL}", frames, pil_png(codec.PNG_COMPRESS_LEVEL),
                           pil_decode, args.repeat)
        peer_png = measure("Pillow PNG level 6 (default)", frames, pil_png(6), pil_decode, args.repeat)
        raw = size * size * 3
        print(f"\n{size}x{size} (raw frame {raw} bytes)")
        for row in (ours_jpeg, peer_jpeg, ours_png, peer_png):
            print(f"  {row['name']:30s} enc {row['enc_us']:8.1f} us  dec {row['dec_us']:8.1f} us  "
                  f"{row['bytes']:9.0f} bytes ({raw / row['bytes']:.1f}x smaller than raw)")
        for ours, peer in ((ours_jpeg, peer_jpeg), (ours_png, peer_png)):
            print(f"  {ours['name']} vs {peer['name']}: encode {peer['enc_us'] / ours['enc_us']:.2f}x faster, "
                  f"decode {peer['dec_us'] / ours['dec_us']:.2f}x faster, bytes x{ours['bytes'] / peer['bytes']:.2f}")
        print(f"  PNG level {codec.PNG_COMPRESS_LEVEL} vs JPEG (ours): encode x{ours_png['enc_us'] / ours_jpeg['enc_us']:.1f} "
              f"time, decode x{ours_png['dec_us'] / ours_jpeg['dec_us']:.1f} time, "
              f"bytes x{ours_png['bytes'] / ours_jpeg['bytes']:.1f}")


if __name__ == "__main__":
    main()
