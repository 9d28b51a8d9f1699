"""Helpers for tests of trajstore and of code built on it, shipped in the package (like
``zarr.testing``) so that tests, benchmarks and users' own checks share them.

- :func:`moving_scene` and :func:`psnr`: synthetic camera frames and their PSNR, so camera
  storages are measured on the same scene the same way.
- :mod:`trajstore.testing.storage`: :class:`~trajstore.testing.storage.StorageTests`, the
  ``SpaceStorage`` conformance suite that every storage's test module subclasses, yours too.
- :mod:`trajstore.testing.buffer`: :class:`~trajstore.testing.buffer.BufferTests`, the
  ``ReplayBuffer`` conformance suite: the same tests for every layout (JPEG, PNG, video, memmap,
  HDF5; ring and unbounded), through the buffer's public API, against the ring model.
- :mod:`trajstore.testing.ring_model`: :class:`~trajstore.testing.ring_model.RingModel`, a plain
  list model of the ring and its episodes, with operation sequences to run on a buffer and on it.
- :mod:`trajstore.testing.strategies`: hypothesis strategies (spaces with leaves of each kind,
  their values, capacities, operation sequences).
- :mod:`trajstore.testing.values`: leaf-wise helpers (flatten, stack, compare) of the suites.

The suites need pytest and the strategies hypothesis (``pip install trajstore[testing]``), so
each is imported on its own (``from trajstore.testing.storage import StorageTests``); importing
:mod:`trajstore.testing`, :mod:`~trajstore.testing.storage` or :mod:`~trajstore.testing.ring_model`
does not import hypothesis, and :mod:`trajstore.testing` does not import pytest.
"""

from trajstore.testing._frames import moving_scene, psnr

__all__ = ["moving_scene", "psnr"]
