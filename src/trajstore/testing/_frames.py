"""Synthetic camera frames and PSNR, for tests and benchmarks of camera storages.

Re-exported by :mod:`trajstore.testing`; import them from there.
"""

from __future__ import annotations

import numpy as np

def moving_scene(n: int, h: int = 96, w: int = 128, seed: int = 0) -> np.ndarray:
    """uint8 ``(n, h, w, 3)``: drifting colour gradients, a scrolling soft grey texture and a soft blob."""
    rng = np.random.default_rng(seed)
    r = max(2, min(h, w) // 24)  # texture feature size grows with the frame
    k = np.exp(-0.5 * (np.arange(-2 * r, 2 * r + 1) / r) ** 2)
    tex = rng.normal(0, 1, (2 * h + 4 * r, 2 * w + 4 * r))
    tex = np.apply_along_axis(np.convolve, 0, tex, k / k.sum(), "valid")
    tex = np.apply_along_axis(np.convolve, 1, tex, k / k.sum(), "valid")
    tex *= 25 / tex.std()
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    ph = rng.uniform(0, 2 * np.pi, 5)
    out = np.empty((n, h, w, 3), np.uint8)
    for t in range(n):
        img = np.stack([128 + 50 * np.sin(2 * np.pi * (x / w + t / 60) + ph[0]),
                        128 + 50 * np.cos(2 * np.pi * (y / h - t / 90) + ph[1]),
                        128 + 40 * np.sin(2 * np.pi * ((x + y) / (h + w) + t / 45) + ph[2])], -1)
        oy = int(h / 2 + h / 3 * np.sin(t / 40 + ph[3])) % h
        img += tex[oy:oy + h, t % w:t % w + w, None]
        cy, cx = h / 2 + h / 4 * np.sin(t / 20 + ph[4]), w / 2 + w / 4 * np.cos(t / 25)
        blob = np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * (min(h, w) / 10) ** 2))[..., None]
        out[t] = np.clip(img * (1 - blob) + blob * np.array([200.0, 60.0, 50.0]), 0, 255).astype(np.uint8)
    return out


def psnr(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """dB per frame of ``(N, H, W, 3)`` uint8 arrays (inf where equal)."""
    err = (actual.astype(np.float64) - expected.astype(np.float64)) ** 2
    mse = err.reshape(len(err), -1).mean(axis=1)
    with np.errstate(divide="ignore"):
        return 10 * np.log10(255.0 ** 2 / mse)
