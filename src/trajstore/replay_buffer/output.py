"""What the samplers return: NumPy (the default) or torch tensors (``as_torch=True``), checked once.

Every sampling method of :class:`~trajstore.replay_buffer.training_api.TrainingAPI` (``sample``,
``sample_windows``, ``windows_at``, ``sample_transitions``) takes ``as_torch=False, device=None,
pin_memory=False``:

- ``as_torch=True``: every numeric leaf of the result (the batch, the indices, ``is_pad``) is a
  ``torch.Tensor`` of the same dtype and shape. Leaves are built for it (C-contiguous, writable, one
  array per leaf), so on the CPU they are ``torch.from_numpy`` of the arrays read, without a copy.
- ``device``: ``None`` or ``"cpu"``: the CPU; another (``"cuda:0"``, a ``torch.device``) moves the tensors.
- ``pin_memory=True``: page-locked CPU tensors (needs an accelerator build of torch with a device).
- Text leaves (``<U`` arrays) become lists of ``str``: ``[B]`` for a batch, nested ``[B][T]`` for
  windows (torch has no string tensor). Big-endian arrays are converted to native byte order (one copy).
- ``device`` or ``pin_memory`` without ``as_torch=True`` is refused (nothing is read), and so are bad
  values and targets this machine lacks (``"cuda"`` without CUDA, ``pin_memory=True`` without an
  accelerator: :func:`trajstore.backends.check_torch_target`): the options are checked before the read.

``rb[idx]`` stays NumPy (an index has no options): ``trajstore.to_torch(rb[idx], device=...)`` converts it.
torch is imported only when ``as_torch=True``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def _same(x: Any) -> Any:
    return x


def output(as_torch: Any, device: Any, pin_memory: Any) -> Callable[[Any], Any]:
    """The conversion a sampler applies to its result (identity for NumPy), the options checked now.

    Raises:
        TypeError: ``as_torch`` or ``pin_memory`` not a bool; ``device`` or ``pin_memory=True`` without
            ``as_torch=True``; ``device`` of a wrong type.
        ValueError: a ``device`` string torch does not parse; a device this machine does not have
            (``"cuda"`` without CUDA); ``pin_memory=True`` without an accelerator (before anything is read).
        ImportError: ``as_torch=True`` without torch installed.
    """
    if not isinstance(as_torch, (bool, np.bool_)):
        raise TypeError(f"as_torch must be True or False, got {as_torch!r}")
    if not as_torch:
        passed = ([f"device={device!r}"] if device is not None else []) + \
                 ([f"pin_memory={pin_memory!r}"] if pin_memory is not False else [])
        if passed:
            raise TypeError(f"{' and '.join(passed)} go{'es' if len(passed) == 1 else ''} with as_torch=True "
                            "(the result is NumPy otherwise)")
        return _same
    from trajstore.backends import _convert, check_torch_target

    target, pin = check_torch_target(device, pin_memory), bool(pin_memory)
    return lambda result: _convert(result, target, pin)
