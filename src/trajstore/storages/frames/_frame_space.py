"""What camera-frame storages accept.

* RGB frames: a ``BoxSpace`` ``(H, W, 3)`` uint8 (image and video storages).
* Single-channel frames (depth, grayscale, IR): ``(H, W)`` or ``(H, W, 1)``, uint8 or uint16
  (the image storage, as PNG only).

A declared ``metadata["layout"]`` must be ``"HWC"`` (or ``"HW"`` for a 2-D frame), in any
case; an undeclared layout is taken as such. Channel-first (CHW) frames, float frames and
2- or 4-channel frames are refused: the metadata router sends them to the default storage.
"""

from __future__ import annotations

import numpy as np

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import BoxSpace, Space

RGB = "a BoxSpace of dtype uint8 and shape (H, W, 3) with H, W >= 1 and metadata layout 'HWC' or none"
SINGLE_CHANNEL = "(H, W) or (H, W, 1) of dtype uint8 or uint16"
SINGLE_CHANNEL_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))


def _layout_refusal(space: BoxSpace) -> str | None:
    """Why the declared layout is not channel-last, or ``None`` (case-insensitive: ``"hwc"`` is ``"HWC"``)."""
    layout = space.metadata.get("layout")
    if layout is None:
        return None
    allowed = ("HWC", "HW") if len(space.shape) == 2 else ("HWC",)
    return None if str(layout).upper() in allowed else f"layout {layout!r}"


def rgb_refusal(space: Space) -> str | None:
    """What makes ``space`` not an RGB frame (e.g. ``"dtype float32"``), or ``None`` if it is one."""
    if not isinstance(space, BoxSpace):
        return f"a {type(space).__name__}"
    if space.dtype != np.uint8:
        return f"dtype {space.dtype}"
    if len(space.shape) != 3 or space.shape[2] != 3 or min(space.shape) < 1:
        return f"shape {space.shape}"
    return _layout_refusal(space)


def is_single_channel(space: Space) -> bool:
    """True for a ``BoxSpace`` ``(H, W)`` or ``(H, W, 1)``, uint8 or uint16, H, W >= 1, channel-last layout."""
    return (isinstance(space, BoxSpace) and np.dtype(space.dtype) in SINGLE_CHANNEL_DTYPES
            and (len(space.shape) == 2 or (len(space.shape) == 3 and space.shape[2] == 1))
            and min(space.shape) >= 1 and _layout_refusal(space) is None)


def check_rgb_frames(space: Space, storage_name: str) -> None:
    """Raise :class:`UnsupportedSpaceError` naming what was expected and what ``space`` is."""
    given = rgb_refusal(space)
    if given is not None:
        raise UnsupportedSpaceError(f"{storage_name} stores RGB frames: expected {RGB}; got {given} in {space!r}")


def check_camera_frames(space: Space, storage_name: str) -> None:
    """Accept RGB or single-channel frames; else raise :class:`UnsupportedSpaceError` naming both forms."""
    given = rgb_refusal(space)
    if given is not None and not is_single_channel(space):
        raise UnsupportedSpaceError(f"{storage_name} stores camera frames: expected {RGB}, or (PNG only) "
                                    f"{SINGLE_CHANNEL}; got {given} in {space!r}")
