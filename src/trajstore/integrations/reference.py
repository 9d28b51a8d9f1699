"""Deprecated: moved to :mod:`trajstore.recording.reference` (this alias goes away in a later release)."""

from trajstore._deprecated import reexport

reexport(__name__, "trajstore.recording.reference", renamed={"verify_buffer": "compare_to_reference"})
