"""Deprecated: the edges moved to :mod:`trajstore.recording` (gymnasium recording),
:mod:`trajstore.training` (torch datasets, normaliser, Ray), :mod:`trajstore.interop` (LeRobot,
zarr) and :mod:`trajstore.ops` (copy, merge, verify, info, preview). The modules here re-export
their new homes for one release and warn ``DeprecationWarning`` on import.
"""

from trajstore._deprecated import warn_moved

warn_moved(__name__, "trajstore.recording, trajstore.training, trajstore.interop and trajstore.ops")
