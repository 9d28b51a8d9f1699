"""Deprecated: moved to :mod:`trajstore.recording.pusht_recording` (this alias goes away in a later release)."""

from trajstore._deprecated import reexport

reexport(__name__, "trajstore.recording.pusht_recording", renamed={"verify_buffer": "compare_to_reference"})
