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
    """``device`` checked and parsed once: ``None`` or a ``torch.device``, usable on this machine.

    The device's type must be available: ``torch.cuda.is_available()`` (and the index below
    ``torch.cuda.device_count()``) for ``"cuda"``, ``torch.backends.mps.is_available()`` for ``"mps"``;
    any other non-CPU type is tried once with ``torch.empty(0, device=device)``. The answer is cached
    per device, so the check costs nothing after the first call. ``pin_memory=True`` needs an
    accelerator (``torch.accelerator.is_available()``, or CUDA / MPS on older torch).

    Raises:
        ImportError: torch is not installed (names the ``torch`` extra).
        TypeError: ``device`` is not ``None``, a str or a ``torch.device``; ``pin_memory`` is not a bool.
        ValueError: ``device`` is a str torch does not parse (``"gpu"``); a device this machine does not
            have (``"cuda"`` on a CPU-only torch); ``pin_memory=True`` without an accelerator. The
            message names the option and the devices available.
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is an optional dependency
        raise ImportError("torch output needs torch: pip install 'trajstore[torch]'") from exc
    if not isinstance(pin_memory, (bool, np.bool_)):
        raise TypeError(f"pin_memory must be True or False, got {pin_memory!r}")
    if isinstance(device, str):
        try:
            parsed = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(f"device {device!r} is not a torch device ({exc})") from None
    elif device is None or isinstance(device, torch.device):
        parsed = device
    else:
        raise TypeError(f"device must be None, a str ('cpu', 'cuda:0') or a torch.device, got {type(device).__name__}")
    if parsed is not None and parsed.type != "cpu":
        problem = _DEVICE_PROBLEMS.get(str(parsed), "")
        if problem == "":
            problem = _DEVICE_PROBLEMS[str(parsed)] = _device_problem(torch, parsed)
        if problem is not None:
            raise ValueError(f"device={device!r}: {problem}; available here: {_available(torch)}")
    if pin_memory and not _has_accelerator(torch):
        raise ValueError(f"pin_memory=True needs an accelerator (CUDA, MPS, ...) and this torch "
                         f"({torch.__version__}) sees none; available here: {_available(torch)} "
                         "(leave pin_memory=False on this machine)")
    return parsed


#: ``{str(device): None (usable) or why not}``: each device is probed once per process.
_DEVICE_PROBLEMS: dict[str, str | None] = {}


def _device_problem(torch: Any, device: Any) -> str | None:
    """Why ``device`` (a non-CPU ``torch.device``) cannot hold tensors here, or ``None``."""
    if device.type == "cuda":
        if not torch.cuda.is_available():
            built = "not compiled with CUDA" if torch.version.cuda is None else "no CUDA device found"
            return f"torch.cuda.is_available() is False ({built}, torch {torch.__version__})"
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            return f"CUDA device {device.index} does not exist ({count} CUDA device(s))"
        return None
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            return "torch.backends.mps.is_available() is False"
        return None
    try:
        torch.empty(0, device=device)
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError, AssertionError, ... per backend
        return f"torch cannot place a tensor there ({type(exc).__name__}: {exc})"
    return None


def _has_accelerator(torch: Any) -> bool:
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        return bool(acc.is_available())
    mps = getattr(torch.backends, "mps", None)  # pragma: no cover - torch < 2.6
    return bool(torch.cuda.is_available() or (mps is not None and mps.is_available()))


def _available(torch: Any) -> str:
    """``"cpu"`` plus the accelerator torch sees (``"cpu, cuda (2 devices)"``)."""
    out = ["'cpu'"]
    if torch.cuda.is_available():
        out.append(f"'cuda' ({torch.cuda.device_count()} device(s))")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("'mps'")
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "current_accelerator") and acc.is_available():
        kind = acc.current_accelerator().type
        if kind not in ("cuda", "mps"):
            out.append(repr(kind))
    return ", ".join(out) if len(out) > 1 else "'cpu' only (no accelerator)"


def to_torch(x: Any, device: Any = None, pin_memory: bool = False) -> Any:
    """Torch tensors for every numeric leaf of ``x`` (a dict, tuple or list tree of arrays), nested alike.

    - Zero-copy where NumPy allows: a C-contiguous, writable array becomes ``torch.from_numpy(arr)``,
      which shares its memory (dtype and shape kept; a 0-d array gives a 0-d tensor). A read-only or
      strided array (a memory map, a view) is copied once first (torch refuses read-only buffers).
    - ``device``: ``None`` (default) or ``"cpu"`` keeps the tensors on the CPU (no copy); another
      device (``"cuda:0"``, a ``torch.device``) moves them (one copy, ``non_blocking`` when pinned).
    - ``pin_memory=True`` copies CPU tensors into page-locked memory first (for fast host-to-GPU
      copies); it needs a CUDA (or other accelerator) build of torch with a device present.
    - Big-endian (or other non-native byte order) arrays are converted to native order (one copy):
      torch only holds native-order data.
    - Text leaves (NumPy ``<U`` arrays or ``str``) become lists of ``str`` / ``str``: torch has no
      string tensor. ``None`` leaves (leaves a request did not read) stay ``None``; Python ints,
      floats and bools stay as they are.

    Raises:
        ImportError, TypeError, ValueError: as :func:`check_torch_target`.
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
        if not arr.dtype.isnative:  # big-endian ">f4": torch refuses it; one copy in native order
            arr = arr.astype(arr.dtype.newbyteorder("="), order="C")
        elif not (arr.flags.writeable and arr.flags.c_contiguous):
            # torch warns on read-only buffers (memory maps); np.ascontiguousarray would turn () into (1,)
            arr = arr.copy(order="C")
        t = torch.from_numpy(arr)
    if pin and t.device.type == "cpu":
        t = t.pin_memory()
    if device is not None and t.device != device:
        t = t.to(device, non_blocking=pin)
    return t
