"""What camera-frame storages (image, video) accept: RGB frames, (H, W, 3) uint8, HWC."""

from __future__ import annotations

import numpy as np

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import BoxSpace, Space

EXPECTED = "a BoxSpace of dtype uint8 and shape (H, W, 3) with H, W >= 1 and metadata layout 'HWC' or none"


def check_rgb_frames(space: Space, storage_name: str) -> None:
    """Raise :class:`UnsupportedSpaceError` naming what was expected and what ``space`` is.

    CHW images, float images, and 1- or 4-channel images are refused: the router sends them
    to the default tensor storage.
    """
    if not isinstance(space, BoxSpace):
        given = f"a {type(space).__name__}"
    elif space.dtype != np.uint8:
        given = f"dtype {space.dtype}"
    elif len(space.shape) != 3 or space.shape[2] != 3 or min(space.shape) < 1:
        given = f"shape {space.shape}"
    elif space.metadata.get("layout", "HWC") != "HWC":
        given = f"layout {space.metadata['layout']!r}"
    else:
        return
    raise UnsupportedSpaceError(f"{storage_name} stores RGB frames: expected {EXPECTED}; got {given} in {space!r}")
