"""Spaces and deterministic sample values shared by the stream buffer tests."""

import numpy as np

from trajstore.spaces import BoxSpace, DictSpace

H, W = 24, 32


def spaces():
    return {
        "wrist": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image", "layout": "HWC", "fps": 30}),
        "joints": BoxSpace(-1000, 1000, (7,), np.float32),
        "ft": DictSpace({"force": BoxSpace(-1e6, 1e6, (3,), np.float32),
                         "torque": BoxSpace(-1e6, 1e6, (3,), np.float64)}),
    }


def frame(i):
    """A frame that JPEG keeps exactly enough (flat colour) and PNG exactly: its value names ``i``."""
    return np.full((H, W, 3), (i * 7) % 256, np.uint8)


def joints(i):
    return (np.arange(7, dtype=np.float32) + np.float32(i)) / np.float32(8)


def ft(i):
    return {"force": np.array([i, -i, 0.5 * i], np.float32), "torque": np.array([i, i + 1, i + 2], np.float64) / 3}


VALUE = {"wrist": frame, "joints": joints, "ft": ft}


def batch(name, idx):
    """The values of samples ``idx`` of stream ``name`` as a batch."""
    vals = [VALUE[name](int(i)) for i in idx]
    if name == "ft":
        return {k: np.stack([v[k] for v in vals]) for k in ("force", "torque")}
    return np.stack(vals)
