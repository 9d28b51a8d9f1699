"""Deprecated: moved to :mod:`trajstore.interop.zarr` (this alias goes away in a later release)."""

from trajstore._deprecated import reexport

reexport(__name__, "trajstore.interop.zarr")
