"""Deprecated: moved to :mod:`trajstore.storages.frames.video` (this path goes in the next release)."""

import sys
import warnings

from trajstore.storages.frames import video as _moved

warnings.warn("trajstore.storages.video moved to trajstore.storages.frames.video; "
              "this import path goes in the next release", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
