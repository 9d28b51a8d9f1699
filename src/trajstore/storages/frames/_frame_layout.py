"""Where a camera frame's channel axis is: the layout a leaf declares and the one frames are encoded in.

A camera leaf declares its layout in ``metadata["layout"]`` (any case):

* ``"HWC"`` (or none): channel last, ``(H, W, C)``; frames are encoded as given.
* ``"CHW"``: channel first, ``(C, H, W)``, torch's layout; frames are transposed to ``(H, W, C)``
  on the way in (:meth:`FrameLayout.to_stored`) and back on the way out (:meth:`FrameLayout.to_user`),
  so a read returns exactly the array that was written (for a lossless format).
* a 2-axis leaf ``(H, W)`` has no channel axis: ``"HW"``, ``"HWC"`` or ``"CHW"`` all mean it as is.

A frame storage records a channel-first layout in its ``storage.json`` config (``"layout": "CHW"``);
a config without ``"layout"`` (every folder written before channel-first frames were taken) is
channel last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

HWC, CHW = "HWC", "CHW"
#: The config key a frame storage records a channel-first layout under.
CONFIG_KEY = "layout"


def layout_refusal(space: Any) -> str | None:
    """Why ``space``'s declared ``metadata["layout"]`` is not one frames can be stored in, or ``None``.

    Taken: none, ``"HWC"``, ``"CHW"`` (any case) for a 3-axis leaf; also ``"HW"`` for a 2-axis one.
    """
    layout = space.metadata.get("layout")
    if layout is None:
        return None
    allowed = (HWC, CHW, "HW") if len(space.shape) == 2 else (HWC, CHW)
    return None if str(layout).upper() in allowed else f"layout {layout!r}"


@dataclass(frozen=True)
class FrameLayout:
    """How the frames of one leaf map onto the channel-last frames that are encoded.

    Attributes:
        name: ``"HWC"`` (frames as given) or ``"CHW"`` (a 3-axis leaf ``(C, H, W)``, stored ``(H, W, C)``).
    """

    name: str = HWC

    @classmethod
    def of(cls, space: Any) -> "FrameLayout":
        """The layout ``space`` (a ``BoxSpace`` of 2 or 3 axes) declares; a 2-axis leaf is always ``"HWC"``.

        Raises:
            ValueError: a declared layout :func:`layout_refusal` refuses (naming it).
        """
        refusal = layout_refusal(space)
        if refusal is not None:
            raise ValueError(f"frames are stored in layout 'HWC' or 'CHW', got {refusal}")
        declared = str(space.metadata.get("layout") or HWC).upper()
        return cls(CHW if declared == CHW and len(space.shape) == 3 else HWC)

    @classmethod
    def of_camera(cls, leaf: Any) -> "FrameLayout":
        """The layout a 3-axis ``kind="image"`` leaf declares, for an export writing channel-last frames;
        ``"HWC"`` for any other leaf or a layout that is neither (written as it is). Never raises."""
        if (getattr(leaf, "metadata", None) or {}).get("kind") != "image" or len(getattr(leaf, "shape", ())) != 3:
            return cls(HWC)
        try:
            return cls.of(leaf)
        except ValueError:
            return cls(HWC)

    @classmethod
    def recorded(cls, config: Any) -> "FrameLayout":
        """The layout a stored config records (``None``: ``"HWC"``, as every folder before ``"CHW"`` existed).

        Raises:
            ValueError: a recorded value other than ``"HWC"`` or ``"CHW"``.
        """
        if config is None:
            return cls(HWC)
        if config not in (HWC, CHW):
            raise ValueError(f"{CONFIG_KEY} must be 'HWC' or 'CHW', got {config!r:.50}")
        return cls(config)

    @property
    def channel_first(self) -> bool:
        return self.name == CHW

    def config_value(self) -> str | None:
        """What a storage's config records: ``"CHW"``, or ``None`` (nothing recorded: channel last)."""
        return CHW if self.channel_first else None

    def stored_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The encoded frame's shape of a leaf of ``shape``: ``(C, H, W)`` -> ``(H, W, C)`` for ``"CHW"``."""
        shape = tuple(int(n) for n in shape)
        return (*shape[1:], shape[0]) if self.channel_first else shape

    def user_shape(self, stored: tuple[int, ...]) -> tuple[int, ...]:
        """Inverse of :meth:`stored_shape`."""
        stored = tuple(int(n) for n in stored)
        return (stored[-1], *stored[:-1]) if self.channel_first else stored

    def to_stored(self, frames: np.ndarray) -> np.ndarray:
        """A frame ``(C, H, W)`` or a batch ``(..., C, H, W)`` as C-contiguous ``(..., H, W, C)`` for ``"CHW"``;
        ``frames`` itself for ``"HWC"``."""
        if not self.channel_first:
            return frames
        return np.ascontiguousarray(np.moveaxis(frames, -3, -1))

    def to_user(self, frames: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`to_stored`: ``(..., H, W, C)`` as C-contiguous ``(..., C, H, W)`` for ``"CHW"``."""
        if not self.channel_first:
            return frames
        return np.ascontiguousarray(np.moveaxis(frames, -1, -3))


def recorded_layout(path: Any, storage_name: str, space: Any, value: Any) -> FrameLayout:
    """The layout a frame storage's ``storage.json`` records (``value``; ``None``: not recorded, ``"HWC"``),
    checked against the one its space declares.

    Raises:
        FormatError: a value other than ``"HWC"`` / ``"CHW"``, or one the space does not declare (naming ``path``).
    """
    from trajstore.errors import FormatError

    try:
        layout = FrameLayout.recorded(value)
        declared = FrameLayout.of(space)
    except ValueError as exc:
        raise FormatError(f"{path}: bad {storage_name} config in storage.json: {exc}") from None
    if layout != declared:
        raise FormatError(f"{path}: bad {storage_name} config in storage.json: frames recorded in layout "
                          f"{layout.name!r}, but the space declares {declared.name!r} ({space!r})")
    return layout
