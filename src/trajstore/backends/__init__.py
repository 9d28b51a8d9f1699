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


def to_torch(x: Any) -> Any:
    """Torch tensors (sharing memory with NumPy where possible) for every numeric leaf of ``x``.

    Text leaves (NumPy ``<U`` arrays or ``str``) stay as lists of ``str`` / ``str``: torch has no string tensor.
    """
    import torch

    if isinstance(x, dict):
        return {k: to_torch(v) for k, v in x.items()}
    if isinstance(x, str):
        return str(x)
    arr = np.asarray(x)
    if arr.dtype.kind == "U":
        return arr.tolist()
    if not (arr.flags.writeable and arr.flags.c_contiguous):
        # torch warns on read-only buffers (memory maps); np.ascontiguousarray would turn () into (1,)
        arr = arr.copy(order="C")
    return torch.from_numpy(arr)
