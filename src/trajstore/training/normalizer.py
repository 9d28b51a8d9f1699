"""``Normalizer``: scale nested dicts of torch tensors with a buffer's statistics (``rb.stats()``).

Exported as :class:`trajstore.training.torch.Normalizer` (needs the ``torch`` extra).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from trajstore.replay_buffer.leaf_stats import LeafStats

MODES = ("mean_std", "min_max")


class Normalizer:
    """Normalise (and undo it) the leaves named in ``stats`` of a nested dict of tensors.

    ``mode="mean_std"``: ``(x - mean) / max(std, eps)``; ``mode="min_max"``:
    ``2 (x - min) / max(max - min, eps) - 1``, which maps ``[min, max]`` to ``[-1, 1]``. A leaf whose
    std (or range) is below ``eps`` (a constant leaf) is only shifted, never divided by ~0.

    Shapes: a leaf's statistics of shape ``S`` apply to tensors of shape ``(..., *S)`` (any leading
    batch or window axes) through their ``broadcast_shape``: an image leaf's per-channel statistics
    ``(C,)`` apply along its channel axis (the last for ``HWC`` frames ``(..., H, W, C)``, the first
    leaf axis for ``CHW``), scalar statistics (a depth map, a large leaf summarised whole) to every
    value. Integer tensors (``uint8`` frames) come out as
    float32; float tensors keep their dtype. Leaves not named in ``stats``, and names absent from the
    batch, pass through unchanged; the input is never modified.

    Args:
        stats: ``rb.stats()`` (name joined by ``"/"`` -> :class:`LeafStats`).
        mode: ``"mean_std"`` or ``"min_max"``.
        eps: smallest std or range divided by.

    Raises:
        ValueError: an unknown ``mode``, or ``eps <= 0``.
    """

    def __init__(self, stats: Mapping[str, LeafStats], mode: str = "mean_std", eps: float = 1e-8):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self.mode, self.eps = mode, float(eps)
        self._params: dict[tuple[str, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        for name, s in stats.items():
            if mode == "mean_std":
                shift, spread = s.mean, s.std
            else:  # 2 (x - min) / range - 1 = (x - (min + max) / 2) / (range / 2)
                shift, spread = (s.min + s.max) / 2, s.max - s.min
            tiny = np.isnan(spread) | (spread < eps)  # a constant (or empty) leaf: shift only
            scale = np.where(tiny, 1.0, spread if mode == "mean_std" else spread / 2)
            shift = np.nan_to_num(shift)
            shape = tuple(s.broadcast_shape)
            shift, scale = np.reshape(shift, shape), np.reshape(scale, shape)
            self._params[tuple(name.split("/"))] = (torch.as_tensor(shift, dtype=torch.float64),
                                                    torch.as_tensor(scale, dtype=torch.float64))

    def normalize(self, batch: Any) -> Any:
        """The batch with every named leaf normalised (see the class docstring)."""
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
        x = node if node.is_floating_point() else node.to(torch.float32)
        shift, scale = (p.to(device=x.device, dtype=x.dtype) for p in params)
        return x * scale + shift if inverse else (x - shift) / scale
