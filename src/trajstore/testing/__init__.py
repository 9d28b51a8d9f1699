"""Helpers for tests of trajstore and of code built on it, shipped in the package (like
``zarr.testing``) so that tests, benchmarks and users' own checks share them.

- :func:`moving_scene` and :func:`psnr`: synthetic camera frames and their PSNR, so camera
  storages are measured on the same scene the same way.
"""

from trajstore.testing._frames import moving_scene, psnr

__all__ = ["moving_scene", "psnr"]
