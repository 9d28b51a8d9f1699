"""What camera-frame storages accept.

* RGB frames: a ``BoxSpace`` ``(H, W, 3)`` uint8, or ``(3, H, W)`` declared ``metadata["layout"] = "CHW"``
  (image and video storages).
* Single-channel frames (depth, grayscale, IR): ``(H, W)``, ``(H, W, 1)`` or ``(1, H, W)`` declared
  ``"CHW"``, uint8 or uint16 (the image storage, as PNG only).

A declared ``metadata["layout"]`` must be ``"HWC"`` or ``"CHW"`` (or ``"HW"`` for a 2-D frame), in any
case; an undeclared layout is ``"HWC"``. Channel-first frames are transposed to channel last to be
encoded and back when read (:mod:`~trajstore.storages.frames._frame_layout`). Float frames, 2- or
4-channel frames and other layouts are refused: the metadata router sends them to the default storage.
"""

from __future__ import annotations

import numpy as np

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import BoxSpace, Space
from trajstore.storages.frames._frame_layout import FrameLayout, layout_refusal

RGB = ("a BoxSpace of dtype uint8 and shape (H, W, 3) with H, W >= 1 and metadata layout 'HWC' or none, "
       "or (3, H, W) with layout 'CHW'")
SINGLE_CHANNEL = "(H, W), (H, W, 1) or (1, H, W) with layout 'CHW', of dtype uint8 or uint16"
SINGLE_CHANNEL_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))


def stored_frame_shape(space: BoxSpace) -> tuple[int, ...] | None:
    """The channel-last shape ``space``'s frames are encoded in, or ``None`` if its layout is refused."""
    if layout_refusal(space) is not None or len(space.shape) not in (2, 3):
        return None
    return FrameLayout.of(space).stored_shape(space.shape)


def _shape_refusal(space: BoxSpace) -> str:
    layout = space.metadata.get("layout")
    return f"shape {space.shape}" if layout is None else f"layout {layout!r} with shape {space.shape}"


def rgb_refusal(space: Space) -> str | None:
    """What makes ``space`` not an RGB frame (e.g. ``"dtype float32"``), or ``None`` if it is one."""
    if not isinstance(space, BoxSpace):
        return f"a {type(space).__name__}"
    if space.dtype != np.uint8:
        return f"dtype {space.dtype}"
    shape = space.shape
    refusal = layout_refusal(space)
    if refusal is not None:  # the shape first when it is not an RGB frame either way
        return refusal if len(shape) == 3 and shape[2] == 3 and min(shape) >= 1 else f"shape {shape}"
    stored = stored_frame_shape(space)
    if stored is None or len(stored) != 3 or stored[2] != 3 or min(stored) < 1:
        return _shape_refusal(space)
    return None


def is_single_channel(space: Space) -> bool:
    """True for a ``BoxSpace`` ``(H, W)``, ``(H, W, 1)`` or ``(1, H, W)`` declared ``"CHW"``, uint8 or uint16,
    H, W >= 1."""
    if not isinstance(space, BoxSpace) or np.dtype(space.dtype) not in SINGLE_CHANNEL_DTYPES:
        return False
    stored = stored_frame_shape(space)
    return (stored is not None and (len(stored) == 2 or stored[2] == 1) and min(stored) >= 1)


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
