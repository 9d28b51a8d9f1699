"""Camera frames for torch training: which leaves are frames, their layout and dtype in a dataset's
items, and :func:`images_to_float` (uint8 frames to float32 in ``[0, 1]`` on the main process or device).

A *camera leaf* is a ``uint8`` leaf whose metadata ``kind`` is one of :data:`CAMERA_KINDS` with either

- a 3-axis shape and a stored layout ``"HWC"`` (declared in any case, or undeclared: the layout
  :class:`~trajstore.storages.frames.image.ImageStorage` takes) or ``"CHW"``; or
- a 2-axis shape ``(H, W)`` (grayscale; layout ``"HW"`` or undeclared), taken as one channel
  ``(H, W, 1)``: ``image_layout="CHW"`` gives ``(1, H, W)``, ``"HWC"`` keeps ``(H, W)`` as stored;
  ``image_dtype="float32"`` applies in both.

Other leaves (``kind="depth"`` maps, uint16 or float frames, other layouts) are never converted.

The recommended DataLoader pattern sends ``uint8`` frames between processes (a quarter of the bytes of
float32) and converts after the batch arrives::

    ds = ReplayBufferDataset(path, image_layout="CHW")            # workers return uint8 (.., C, H, W)
    for batch in DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True):
        batch = images_to_float(batch, ds.image_keys, device="cuda")  # float32 in [0, 1] on the device
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from trajstore.spaces import tree

__all__ = ["CAMERA_KINDS", "IMAGE_LAYOUTS", "IMAGE_DTYPES", "camera_leaves", "unconverted_cameras",
           "check_image_options", "convert_frames", "frame_conversion", "images_to_float"]

#: Metadata ``kind`` values of camera leaves (a ``"depth"`` leaf is not one: its values are not colours).
CAMERA_KINDS = ("image", "camera", "rgb")
#: ``image_layout`` values: frames as ``(..., H, W, C)`` (as stored, the default) or ``(..., C, H, W)``.
IMAGE_LAYOUTS = ("HWC", "CHW")
#: ``image_dtype`` values: ``uint8`` pixel values (the default) or float32 ``value / 255`` in ``[0, 1]``.
IMAGE_DTYPES = ("uint8", "float32")


def check_image_options(image_layout: Any, image_dtype: Any) -> tuple[str, str]:
    """``(image_layout, image_dtype)`` checked.

    Raises:
        ValueError: a layout not in :data:`IMAGE_LAYOUTS` or a dtype not in :data:`IMAGE_DTYPES`.
    """
    if image_layout not in IMAGE_LAYOUTS:
        raise ValueError(f"image_layout must be one of {IMAGE_LAYOUTS}, got {image_layout!r}")
    if isinstance(image_dtype, np.dtype) or isinstance(image_dtype, type):
        image_dtype = np.dtype(image_dtype).name
    if image_dtype not in IMAGE_DTYPES:
        raise ValueError(f"image_dtype must be one of {IMAGE_DTYPES}, got {image_dtype!r}")
    return image_layout, image_dtype


def camera_leaves(space: Any) -> dict[tuple[str, ...], str]:
    """``{path: stored layout ("HWC", "CHW" or "HW")}`` of every camera leaf of ``space`` (see the module
    docstring; ``"HW"``: a grayscale ``(H, W)`` leaf)."""
    out: dict[tuple[str, ...], str] = {}
    for path, leaf in tree.leaves(space):
        meta = getattr(leaf, "metadata", None) or {}
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if meta.get("kind") not in CAMERA_KINDS or shape is None or len(shape) not in (2, 3) or dtype != np.uint8:
            continue
        layout = meta.get("layout")
        layout = ("HWC" if len(shape) == 3 else "HW") if layout is None else str(layout).upper()
        if layout in (IMAGE_LAYOUTS if len(shape) == 3 else ("HW",)):
            out[path] = layout
    return out


def unconverted_cameras(space: Any) -> dict[str, str]:
    """``{name joined by "/": why}`` of the leaves whose ``kind`` is in :data:`CAMERA_KINDS` but that are
    not camera leaves (``image_layout`` / ``image_dtype`` leave them as stored: uint16, 4 axes, ...)."""
    frames = camera_leaves(space)
    out: dict[str, str] = {}
    for path, leaf in tree.leaves(space):
        meta = getattr(leaf, "metadata", None) or {}
        if meta.get("kind") in CAMERA_KINDS and path not in frames:
            shape, dtype = tuple(getattr(leaf, "shape", ()) or ()), getattr(leaf, "dtype", None)
            out["/".join(path)] = f"shape {shape}, dtype {dtype}, layout {meta.get('layout')!r}"
    return out


def convert_frames(frames: np.ndarray, stored: str, image_layout: str, image_dtype: str) -> np.ndarray:
    """A batch of frames ``(..., *stored)`` uint8 as ``(..., *image_layout)`` of ``image_dtype``, C-contiguous.

    ``stored="HW"`` (grayscale ``(..., H, W)``): ``"CHW"`` gives ``(..., 1, H, W)``, ``"HWC"`` keeps
    ``(..., H, W)``. float32 values are ``frame / 255`` (exactly ``torch`` ``x.float() / 255``).
    ``frames`` itself is returned when nothing changes.
    """
    if stored == "HW":
        if image_layout == "CHW":
            frames = frames[..., None, :, :]  # a new axis of length 1: still C-contiguous, no copy
    elif stored != image_layout:
        n = frames.ndim
        perm = (n - 1, n - 3, n - 2) if image_layout == "CHW" else (n - 2, n - 1, n - 3)
        frames = np.ascontiguousarray(frames.transpose(*range(n - 3), *perm))
    if image_dtype == "float32":
        frames = frames.astype(np.float32)
        frames /= np.float32(255)
    return frames


def frame_conversion(space: Any, image_layout: Any = None, image_dtype: Any = "uint8"
                     ) -> Callable[[Any], Any] | None:
    """A function converting the camera leaves (:func:`camera_leaves`) of a batch of ``space`` values (a
    nested dict of NumPy arrays with any leading axes: ``(B, ...)``, windows ``(B, T, ...)``) to
    ``image_layout`` and ``image_dtype`` (see :func:`convert_frames`; the dict is updated in place and
    returned), or ``None`` when nothing would change. ``image_layout=None`` keeps each leaf's own layout
    (as stored: what ``rb[i]`` returns). Checked here, before anything is read.

    Raises:
        ValueError: a bad ``image_layout`` or ``image_dtype`` (see :func:`check_image_options`).
    """
    layout, dtype = check_image_options("HWC" if image_layout is None else image_layout, image_dtype)
    stored = camera_leaves(space)
    targets = {p: (("HWC" if s == "HW" else s) if image_layout is None else layout) for p, s in stored.items()}
    frames = {p: s for p, s in stored.items()
              if dtype != "uint8" or (s != targets[p] and not (s == "HW" and targets[p] == "HWC"))}
    if not frames:
        return None

    def convert(batch: Any) -> Any:
        for path, s in frames.items():
            batch = replace_leaf(batch, path, lambda a, s=s, t=targets[path]: convert_frames(a, s, t, dtype))
        return batch

    return convert


def replace_leaf(batch: Any, path: tuple[str, ...], fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    """``batch`` with ``batch[path] = fn(batch[path])`` (a nested dict, in place; ``()``: the batch itself);
    a path not in the batch (or ``None`` there: a leaf not read) is skipped."""
    if not path:
        return fn(np.asarray(batch))
    node = batch
    for k in path[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
    if isinstance(node, dict) and node.get(path[-1]) is not None:
        node[path[-1]] = fn(np.asarray(node[path[-1]]))
    return batch


def images_to_float(batch: Any, keys: Iterable[str] | None = None, *, device: Any = None,
                    non_blocking: bool = True) -> Any:
    """``batch`` (a nested dict of tensors, e.g. from a DataLoader) with its uint8 frames as float32 ``/ 255``.

    Every tensor moves to ``device`` first when it is given (``tensor.to(device, non_blocking=...)``:
    the uint8 bytes cross the bus, the division runs on the device), then the frames are converted;
    layout and shapes are kept. Other values (``str``, lists) pass through; the input is not modified.

    Args:
        batch: nested dict of tensors.
        keys: the frame leaves, names joined by ``"/"`` (``dataset.image_keys``); ``None``: every
            ``uint8`` tensor of 4 or more axes (a batch of frames ``(B, C, H, W)`` / ``(B, T, C, H, W)``;
            a batch of grayscale ``(B, H, W)`` frames in HWC has 3: name it in ``keys``).
        device: where the batch goes (``"cuda"``, a ``torch.device``); ``None`` keeps it where it is.
        non_blocking: passed to ``tensor.to`` (asynchronous copies from pinned memory).

    Raises:
        KeyError: a name in ``keys`` that is not in the batch.
        TypeError: a named leaf that is not a ``uint8`` tensor (a NumPy array included: pass torch
            tensors, e.g. ``trajstore.to_torch(batch)`` first); with ``keys=None``, a NumPy ``uint8``
            array of 4 or more axes, or a batch holding NumPy arrays and no tensor (nothing would be
            converted).
    """
    import torch

    wanted = None if keys is None else {tuple(k.split("/")) for k in keys}
    seen = {"tensor": False, "numpy": None}

    def walk(node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, (*path, k)) for k, v in node.items()}
        if isinstance(node, np.ndarray) and node.dtype.kind != "U":
            frame = node.dtype == np.uint8 and node.ndim >= 4 if wanted is None else path in wanted
            if frame:
                raise TypeError(f"leaf {'/'.join(path)!r}: images_to_float takes torch tensors, got a NumPy "
                                f"{node.dtype} array of shape {node.shape}; convert the batch first "
                                "(trajstore.to_torch(batch), or sample with as_torch=True)")
            seen["numpy"] = seen["numpy"] or "/".join(path)
        if not isinstance(node, torch.Tensor):
            return node
        seen["tensor"] = True
        if device is not None:
            node = node.to(device, non_blocking=non_blocking)
        frame = node.dtype == torch.uint8 and node.ndim >= 4 if wanted is None else path in wanted
        if not frame:
            return node
        if node.dtype != torch.uint8:
            raise TypeError(f"leaf {'/'.join(path)!r}: images_to_float expects uint8 frames, got {node.dtype}")
        return node.to(torch.float32).div_(255)

    out = walk(batch, ())
    if wanted is None and seen["numpy"] is not None and not seen["tensor"]:
        raise TypeError(f"images_to_float takes a batch of torch tensors, got NumPy arrays (leaf "
                        f"{seen['numpy']!r}) and no tensor: nothing would be converted; convert the batch first "
                        "(trajstore.to_torch(batch), or sample with as_torch=True)")
    if wanted is not None:
        for path in wanted:
            node = out
            for k in path:
                if not isinstance(node, dict) or k not in node:
                    raise KeyError(f"images_to_float: no leaf {'/'.join(path)!r} in the batch")
                node = node[k]
    return out
