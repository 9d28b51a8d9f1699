"""Deprecated: moved to :mod:`trajstore.storages.frames.image` (this path goes in the next release)."""

import sys
import warnings

from trajstore.storages.frames import image as _moved

warnings.warn("trajstore.storages.image moved to trajstore.storages.frames.image; "
              "this import path goes in the next release", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
