"""Deprecated: moved to :mod:`trajstore.training.torch` (this alias goes away in a later release)."""

from trajstore._deprecated import reexport

reexport(__name__, "trajstore.training.torch")
