"""How camera frames are stored, by name: ``"jpeg"``, ``"png"`` or ``"video"`` (the ``--camera`` values of
``trajstore record`` and ``trajstore import``), shared by the recorders and the importers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trajstore.replay_buffer import ReplayBuffer

#: How camera frames are stored: ``--camera`` values.
CAMERAS = ("jpeg", "png", "video")


def camera_routing(camera: str) -> dict[str, Any]:
    """Keyword arguments of :func:`~trajstore.storages.dict_storage_kwargs_from_space` for frames
    stored as ``"jpeg"`` (``ImageStorage``'s default JPEG), ``"png"`` (lossless) or ``"video"``
    (``VideoStorage``, H.264 at the leaf's ``fps``; needs the ``video`` extra).

    Raises:
        ValueError: another name.
    """
    if camera == "jpeg":
        return {}
    if camera == "png":
        return {"kind_kwargs": {"image": {"format": "PNG"}}}
    if camera == "video":
        from trajstore.storages.video import VideoStorage

        return {"kind_storage_cls": {"image": VideoStorage}}
    raise ValueError(f"camera must be one of {CAMERAS}, got {camera!r}")


def camera_of(buffer: ReplayBuffer, key: str) -> str | None:
    """How ``buffer`` stores the leaf ``key`` (e.g. ``"observation/pixels"``): one of :data:`CAMERAS`,
    or None when it is not a camera storage."""
    sub = buffer.storage.parts().get(key)
    name = type(sub).__name__
    if name == "VideoStorage":
        return "video"
    if name == "ImageStorage":
        return str(sub.get_config().get("format", "JPEG")).lower()
    return None
