"""Helpers for tests of trajstore and of code built on it, shipped in the package (like
``zarr.testing``) so that tests, benchmarks and users' own checks share them.

- :func:`moving_scene` and :func:`psnr`: synthetic camera frames and their PSNR, so camera
  storages are measured on the same scene the same way.
- :mod:`trajstore.testing.storage`: :class:`~trajstore.testing.storage.StorageTests`, the
  ``SpaceStorage`` conformance suite that every storage's test module subclasses, yours too.
  It needs pytest, so it is imported on its own
  (``from trajstore.testing.storage import StorageTests``); importing :mod:`trajstore.testing`
  does not import pytest.
"""

from trajstore.testing._frames import moving_scene, psnr

__all__ = ["moving_scene", "psnr"]
