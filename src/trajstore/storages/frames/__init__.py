"""Camera frames: :class:`ImageStorage` (JPEG/PNG chunk files) and :class:`VideoStorage` (H.264 segments).

Both keep a slot index (:mod:`~trajstore.storages.frames._slot_index`) that points each slot at a
frame in a *payload file* (an image chunk, a video segment); how those files are named, found,
checked at open and read (local disk, or an explicit payload source for a folder whose payload stays
in object storage) is one layer shared by the two (:mod:`~trajstore.storages.frames._payload_files`).
:class:`FrameLayout` maps a channel-first (``layout="CHW"``) leaf onto the channel-last frames both encode.
"""

from trajstore.storages.frames._frame_layout import FrameLayout
from trajstore.storages.frames.image import ImageStorage
from trajstore.storages.frames.video import VideoStorage  # PyAV is imported on first use only

__all__ = ["FrameLayout", "ImageStorage", "VideoStorage"]
