"""``Normalizer``: scale nested dicts of torch tensors with a buffer's statistics (``rb.stats()``).

Exported as :class:`trajstore.training.torch.Normalizer` (needs the ``torch`` extra).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import torch

from trajstore.replay_buffer.leaf_stats import LeafStats

MODES = ("mean_std", "min_max")
#: ``images=`` values: camera leaves (``image_keys``) left as they are, or normalised per channel.
IMAGE_MODES = ("skip", "per_channel")


class Normalizer:
    """Normalise (and undo it) the leaves named in ``stats`` of a nested dict of tensors.

    ``mode="mean_std"``: ``(x - mean) / max(std, eps)``; ``mode="min_max"``:
    ``2 (x - min) / max(max - min, eps) - 1``, which maps ``[min, max]`` to ``[-1, 1]``. A leaf whose
    std (or range) is below ``eps`` (a constant leaf) is only shifted, never divided by ~0.

    Shapes: a leaf's statistics of shape ``S`` apply to tensors of shape ``(..., *S)`` (any leading
    batch or window axes) through their ``broadcast_shape``: an image leaf's per-channel statistics
    ``(C,)`` apply along its channel axis (the last for ``HWC`` frames ``(..., H, W, C)``, the first
    leaf axis for ``CHW``), scalar statistics (a depth map, a large leaf summarised whole) to every
    value. Camera leaves named in ``image_keys`` follow the dataset's ``image_layout`` and
    ``image_dtype`` (``ReplayBufferDataset.normalizer`` passes them): with ``"CHW"`` their per-channel
    statistics apply along the ``C`` of ``(..., C, H, W)``; with ``"float32"`` the frames are taken as
    ``value / 255`` and the statistics (in pixel units, as ``rb.stats()`` gives them) are divided by 255,
    so a frame normalises to the same values in every layout and dtype. Integer tensors (``uint8`` frames) come out as
    float32; float tensors keep their dtype. Leaves not named in ``stats``, and names absent from the
    batch, pass through unchanged; the input is never modified.

    Args:
        stats: ``rb.stats()`` (name joined by ``"/"`` -> :class:`LeafStats`).
        mode: ``"mean_std"`` or ``"min_max"``.
        eps: smallest std or range divided by (in the statistics' units: pixel values for frames).
        image_keys: camera leaves (names joined by ``"/"``, ``dataset.image_keys``); default none.
        images: what happens to the ``image_keys`` leaves: ``"skip"`` (default) passes them through
            unchanged (their statistics are not used: frames usually go to a vision encoder as
            ``[0, 1]`` floats), ``"per_channel"`` normalises them with their per-channel statistics
            (``rb.stats()`` gives an image leaf ``(C,)`` statistics over steps and pixels along the
            ``C`` of its layout; one channel, scalar statistics). Leaves not in ``image_keys`` are
            normalised whatever ``images`` says.
        image_layout: ``"HWC"`` (default) or ``"CHW"``: the layout of the ``image_keys`` frames normalised.
        image_dtype: ``"uint8"`` (default; ``uint8`` pixel values) or ``"float32"`` (floating frames in
            ``[0, 1]``, as ``image_dtype="float32"`` or :func:`images_to_float` give them). :meth:`normalize`
            checks it: a camera leaf's tensor must be ``torch.uint8`` for ``"uint8"`` and floating for
            ``"float32"``.

    Raises:
        ValueError: an unknown ``mode``, ``eps <= 0``, a bad ``image_layout``, ``image_dtype`` or ``images``.
        TypeError: on :meth:`normalize`, a camera leaf (``image_keys``) whose tensor dtype does not match
            ``image_dtype`` (float frames in ``[0, 1]`` given to a ``"uint8"`` normalizer, or ``uint8``
            frames to a ``"float32"`` one): the statistics would be off by a factor of 255.
        ValueError: on :meth:`normalize`, a named leaf whose shape its statistics do not broadcast to (e.g. CHW
            frames given to a normalizer built for HWC).
    """

    def __init__(self, stats: Mapping[str, LeafStats], mode: str = "mean_std", eps: float = 1e-8, *,
                 image_keys: Iterable[str] = (), image_layout: str = "HWC", image_dtype: str = "uint8",
                 images: str = "skip"):
        from trajstore.training.images import check_image_options

        self.image_layout, self.image_dtype = check_image_options(image_layout, image_dtype)
        if images not in IMAGE_MODES:
            raise ValueError(f"images must be one of {IMAGE_MODES}, got {images!r}")
        self.images = images
        self.image_keys = list(image_keys)
        images = set(self.image_keys)
        self._images = {tuple(k.split("/")) for k in self.image_keys}
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self.mode, self.eps = mode, float(eps)
        self._params: dict[tuple[str, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        for name, s in stats.items():
            if name in images and self.images == "skip":
                continue  # passed through: not in _params
            if mode == "mean_std":
                shift, spread = s.mean, s.std
            else:  # 2 (x - min) / range - 1 = (x - (min + max) / 2) / (range / 2)
                shift, spread = (s.min + s.max) / 2, s.max - s.min
            tiny = np.isnan(spread) | (spread < eps)  # a constant (or empty) leaf: shift only
            scale = np.where(tiny, 1.0, spread if mode == "mean_std" else spread / 2)
            shift = np.nan_to_num(shift)
            shape = tuple(s.broadcast_shape)
            shift, scale = np.reshape(shift, shape), np.reshape(scale, shape)
            if name in images:
                shift, scale = _frame_params(shift, scale, s.reduction, self.image_layout, self.image_dtype)
            self._params[tuple(name.split("/"))] = (torch.as_tensor(shift, dtype=torch.float64),
                                                    torch.as_tensor(scale, dtype=torch.float64))

    def normalize(self, batch: Any) -> Any:
        """The batch with every named leaf normalised (see the class docstring).

        Raises:
            TypeError: a camera leaf whose dtype does not match ``image_dtype`` (see the class docstring).
            ValueError: a named leaf whose shape its statistics do not broadcast to.
        """
        return self._apply(batch, (), inverse=False)

    def unnormalize(self, batch: Any) -> Any:
        """Inverse of :meth:`normalize` (float results; frames are not rounded back to integers)."""
        return self._apply(batch, (), inverse=True)

    def _apply(self, node: Any, path: tuple[str, ...], inverse: bool) -> Any:
        if isinstance(node, Mapping):
            return {k: self._apply(v, (*path, k), inverse) for k, v in node.items()}
        params = self._params.get(path)
        if params is None or not isinstance(node, torch.Tensor):
            return node
        if not inverse and path in self._images:
            self._check_frames(node, path)
        x = node if node.is_floating_point() else node.to(torch.float32)
        shift, scale = (p.to(device=x.device, dtype=x.dtype) for p in params)
        try:
            return x * scale + shift if inverse else (x - shift) / scale
        except RuntimeError as exc:
            raise ValueError(f"leaf {'/'.join(path)!r}: statistics of shape {tuple(shift.shape)} do not apply to a "
                             f"tensor of shape {tuple(x.shape)} (frames in another layout than image_layout="
                             f"{self.image_layout!r}?): {exc}") from None

    def _check_frames(self, frames: torch.Tensor, path: tuple[str, ...]) -> None:
        """TypeError when camera leaf ``path``'s dtype is not the ``image_dtype`` this normalizer was built for."""
        got_float = frames.is_floating_point()
        if got_float == (self.image_dtype == "float32") and (got_float or frames.dtype == torch.uint8):
            return
        name = "/".join(path)
        if got_float:
            fix = ("build the normalizer with image_dtype='float32' (dataset.normalizer(image_dtype='float32')) "
                   "for frames converted by images_to_float, or normalize the uint8 frames")
        elif frames.dtype == torch.uint8:
            fix = ("convert the frames first (images_to_float(batch, dataset.image_keys)) or build the "
                   "normalizer with image_dtype='uint8'")
        else:
            fix = "give uint8 frames (or floating frames in [0, 1] to an image_dtype='float32' normalizer)"
        raise TypeError(f"camera leaf {name!r}: got a {frames.dtype} tensor, but this normalizer was built for "
                        f"image_dtype={self.image_dtype!r} frames "
                        f"({'torch.uint8' if self.image_dtype == 'uint8' else 'floating, in [0, 1]'}); {fix}")


def _frame_params(shift: np.ndarray, scale: np.ndarray, reduction: str, layout: str,
                  dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """A camera leaf's ``(shift, scale)``: per channel ``(C,)`` for ``"HWC"`` frames, ``(C, 1, 1)`` for
    ``"CHW"``; whole ``()`` for either; divided by 255 for ``"float32"`` frames.

    Raises:
        ValueError: per-element statistics with ``"CHW"`` (their stored layout is not known here).
    """
    if reduction == "per_channel":
        c = shift.size
        shape = (c, 1, 1) if layout == "CHW" else (c,)
        shift, scale = shift.reshape(shape), scale.reshape(shape)
    elif reduction != "whole" and layout == "CHW":
        raise ValueError(f"statistics of shape {shift.shape} per element of a camera leaf: only per-channel or "
                         "whole statistics follow image_layout='CHW'; leave the leaf out of image_keys")
    if dtype == "float32":
        shift, scale = shift / 255.0, scale / 255.0
    return shift, scale
