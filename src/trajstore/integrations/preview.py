"""Deprecated: moved to :mod:`trajstore.ops.preview` (this alias goes away in a later release)."""

from trajstore._deprecated import reexport

reexport(__name__, "trajstore.ops.preview")
