"""Serve a buffer to training: :class:`ReplayBufferDataset` (a torch ``Dataset`` of steps or windows,
:mod:`~trajstore.training.torch`), :class:`Normalizer` (:mod:`~trajstore.training.normalizer`),
:func:`images_to_float` (uint8 camera frames to float32 in [0, 1] on the main side, :mod:`~trajstore.training.images`) and
:func:`read_trajstore` (a Ray Data datasource, :mod:`~trajstore.training.ray`).

Each uses only the buffer's public API: a window request (``rb.window_request``) is checked once per
dataset and reused for every batch. torch and ray are imported on first use of their names.
"""

from typing import Any

__all__ = ["ReplayBufferDataset", "Normalizer", "images_to_float", "read_trajstore", "TrajstoreDatasource"]

_HOMES = {"ReplayBufferDataset": "torch", "Normalizer": "normalizer", "images_to_float": "images", "read_trajstore": "ray",
          "TrajstoreDatasource": "ray"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
