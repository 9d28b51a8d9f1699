"""Deprecated: moved to :mod:`trajstore.ops.verify` (this alias goes away in a later release)."""

from trajstore._deprecated import reexport

reexport(__name__, "trajstore.ops.verify")
