"""Array conversion at the edges: NumPy inside trajstore, torch / jax for the user.

Torch and jax are imported only when a function that needs them is called.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(x: Any) -> Any:
    """NumPy view (zero-copy where the source allows) of a torch tensor, jax array or array-like;
    dicts are converted leaf by leaf; ``str`` is kept."""
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    if isinstance(x, (np.ndarray, np.generic, str)):
        return x
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def check_torch_target(device: Any = None, pin_memory: bool = False) -> Any:
    """``device`` checked and parsed once: ``None`` or a ``torch.device``.

    Raises:
        ImportError: torch is not installed (names the ``torch`` extra).
        TypeError: ``device`` is not ``None``, a str or a ``torch.device``; ``pin_memory`` is not a bool.
        ValueError: ``device`` is a str torch does not parse (``"gpu"``).
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is an optional dependency
        raise ImportError("torch output needs torch: pip install 'trajstore[torch]'") from exc
    if not isinstance(pin_memory, (bool, np.bool_)):
        raise TypeError(f"pin_memory must be True or False, got {pin_memory!r}")
    if device is None or isinstance(device, torch.device):
        return device
    if isinstance(device, str):
        try:
            return torch.device(device)
        except RuntimeError as exc:
            raise ValueError(f"device {device!r} is not a torch device ({exc})") from None
    raise TypeError(f"device must be None, a str ('cpu', 'cuda:0') or a torch.device, got {type(device).__name__}")


def to_torch(x: Any, device: Any = None, pin_memory: bool = False) -> Any:
    """Torch tensors for every numeric leaf of ``x`` (a dict, tuple or list tree of arrays), nested alike.

    - Zero-copy where NumPy allows: a C-contiguous, writable array becomes ``torch.from_numpy(arr)``,
      which shares its memory (dtype and shape kept; a 0-d array gives a 0-d tensor). A read-only or
      strided array (a memory map, a view) is copied once first (torch refuses read-only buffers).
    - ``device``: ``None`` (default) or ``"cpu"`` keeps the tensors on the CPU (no copy); another
      device (``"cuda:0"``, a ``torch.device``) moves them (one copy, ``non_blocking`` when pinned).
    - ``pin_memory=True`` copies CPU tensors into page-locked memory first (for fast host-to-GPU
      copies); it needs a CUDA (or other accelerator) build of torch with a device present.
    - Text leaves (NumPy ``<U`` arrays or ``str``) become lists of ``str`` / ``str``: torch has no
      string tensor. ``None`` leaves (leaves a request did not read) stay ``None``; Python ints,
      floats and bools stay as they are.

    Raises:
        ImportError, TypeError, ValueError: as :func:`check_torch_target`.
        RuntimeError: ``pin_memory=True`` without an accelerator (torch's own error).
    """
    return _convert(x, check_torch_target(device, pin_memory), bool(pin_memory))


def _convert(x: Any, device: Any, pin: bool) -> Any:
    import torch

    if isinstance(x, dict):
        return {k: _convert(v, device, pin) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_convert(v, device, pin) for v in x)
    if isinstance(x, list):
        return [_convert(v, device, pin) for v in x]
    if x is None or isinstance(x, str) or (isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)):
        return x
    if isinstance(x, torch.Tensor):
        t = x
    else:
        arr = np.asarray(x)
        if arr.dtype.kind == "U":
            return arr.tolist()
        if not (arr.flags.writeable and arr.flags.c_contiguous):
            # torch warns on read-only buffers (memory maps); np.ascontiguousarray would turn () into (1,)
            arr = arr.copy(order="C")
        t = torch.from_numpy(arr)
    if pin and t.device.type == "cpu":
        t = t.pin_memory()
    if device is not None and t.device != device:
        t = t.to(device, non_blocking=pin)
    return t
