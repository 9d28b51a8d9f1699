"""Deprecated: moved to :mod:`trajstore.recording.vector` (this alias goes away in a later release)."""

from trajstore._deprecated import reexport

reexport(__name__, "trajstore.recording.vector")
