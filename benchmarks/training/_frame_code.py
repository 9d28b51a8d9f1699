"""The frame code of the training-loader benchmark (NumPy only): every frame tells its global step and camera.

The top 3/8 of a frame is a grid of ``CODE_ROWS x CODE_COLS`` flat cells, each one of two colours: a
parity bit, 20 bits of the global step, 3 bits of the camera's position in ``meta["cameras"]``. A flat
margin separates the grid from the texture of the bottom half (``_data.py``), so that no coding block
holds both (AV1 at crf 30 otherwise copies a flipped cell from the previous frame). The checker reads
the mean colour of each cell's inner half at a few points and takes the nearer colour; JPEG and
video coding keep it well inside ``MAX_CELL_ERROR``. State and action code the global step ``t``
exactly in float32: ``state[t, d] = t + d / 32``, ``action[t, d] = -(t + d / 32)``.
"""

from __future__ import annotations

import numpy as np

CODE_ROWS, CODE_COLS = 4, 6
STEP_BITS, CAMERA_BITS = 20, 3
ONE = np.array([224, 176, 48], np.float32)   # a cell whose bit is 1 (RGB)
ZERO = np.array([40, 88, 200], np.float32)   # a cell whose bit is 0
MAX_CELL_ERROR = 64.0  # largest |channel mean - colour| a decoded cell may show


def code_bits(step: int, camera: int) -> np.ndarray:
    """The ``CODE_ROWS * CODE_COLS`` bits (uint8) painted into frame ``step`` of camera number ``camera``."""
    if not 0 <= step < 1 << STEP_BITS or not 0 <= camera < 1 << CAMERA_BITS:
        raise ValueError(f"step {step} or camera {camera} outside the frame code")
    bits = [(step >> i) & 1 for i in range(STEP_BITS)] + [(camera >> i) & 1 for i in range(CAMERA_BITS)]
    return np.array([sum(bits) & 1] + bits, np.uint8)


def cell_size(h: int, w: int) -> tuple[int, int]:
    """``(height, width)`` in pixels of one code cell of an ``h x w`` frame: the grid fills the top 3/8 of
    the frame, a flat margin separates it from the texture (the bottom half), so that no coding block
    holds both a cell and texture."""
    ch, cw = (h * 3 // 8) // CODE_ROWS, w // CODE_COLS
    if ch < 4 or cw < 4:
        raise ValueError(f"a {h}x{w} frame is too small for the {CODE_ROWS}x{CODE_COLS} frame code")
    return ch, cw


def paint_code(frame: np.ndarray, step: int, camera: int) -> None:
    """Paint the code of (``step``, ``camera``) and the margin into the top half of ``frame`` ((H, W, 3) uint8), in place."""
    h, w = frame.shape[:2]
    ch, cw = cell_size(h, w)
    frame[: h // 2] = ZERO.astype(np.uint8)
    bits = code_bits(step, camera).reshape(CODE_ROWS, CODE_COLS)
    for r in range(CODE_ROWS):
        for c in range(CODE_COLS):
            frame[r * ch:(r + 1) * ch, c * cw:(c + 1) * cw] = (ONE if bits[r, c] else ZERO).astype(np.uint8)


def decode_frames(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(step, camera, ok)``, each of shape ``frames.shape[:-3]``, of ``frames``: ``(..., H, W, 3)`` uint8
    RGB (HWC), or float ``(..., 3, H, W)`` in [0, 1] (CHW, LeRobot's output); any strides: only a sparse
    grid of pixels is read, no frame is copied or converted.

    ``ok`` is False for a frame whose cells are not near either colour or whose parity is wrong
    (garbage, a CHW or BGR frame, a blend of two frames).
    """
    frames = np.asarray(frames)
    chw = frames.dtype.kind == "f"
    lead, (h, w) = frames.shape[:-3], frames.shape[-2:] if chw else frames.shape[-3:-1]
    ch, cw = cell_size(h, w)
    ny, nx = min(8, ch // 2), min(8, cw // 2)  # sample points per cell, inside its inner half
    ys = (np.arange(CODE_ROWS)[:, None] * ch + np.linspace(ch // 4, ch - ch // 4 - 1, ny).round().astype(int))
    xs = (np.arange(CODE_COLS)[:, None] * cw + np.linspace(cw // 4, cw - cw // 4 - 1, nx).round().astype(int))
    if chw:  # float (..., 3, H, W) in [0, 1]
        pts = np.moveaxis(frames[..., ys.reshape(-1)[:, None], xs.reshape(-1)[None, :]], -3, -1) * 255
    else:
        pts = frames[..., ys.reshape(-1)[:, None], xs.reshape(-1)[None, :], :]
    pts = pts.reshape(*lead, CODE_ROWS, ny, CODE_COLS, nx, 3)
    mean = pts.mean(axis=(-4, -2), dtype=np.float32).reshape(*lead, CODE_ROWS * CODE_COLS, 3)
    d1, d0 = np.abs(mean - ONE).max(-1), np.abs(mean - ZERO).max(-1)
    bits = (d1 < d0).astype(np.int64)
    ok = (np.minimum(d1, d0) < MAX_CELL_ERROR).all(-1) & (bits[..., 1:].sum(-1) % 2 == bits[..., 0])
    weights = 1 << np.arange(STEP_BITS + CAMERA_BITS, dtype=np.int64)
    step = bits[..., 1:1 + STEP_BITS] @ weights[:STEP_BITS]
    camera = bits[..., 1 + STEP_BITS:] @ weights[:CAMERA_BITS]
    return step, camera, ok


def state_values(steps: np.ndarray, dim: int) -> np.ndarray:
    """``state[t, d] = t + d / 32`` (float32, exact for t < 2**19): ``(N, dim)``."""
    return (np.asarray(steps, np.float64)[:, None] + np.arange(dim) / 32).astype(np.float32)


def action_values(steps: np.ndarray, dim: int) -> np.ndarray:
    """``action[t, d] = -(t + d / 32)``: ``(N, dim)`` float32."""
    return -state_values(steps, dim)
