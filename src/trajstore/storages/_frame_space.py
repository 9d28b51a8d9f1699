"""Deprecated: moved to :mod:`trajstore.storages.frames._frame_space` (this path goes in the next release)."""

import sys
import warnings

from trajstore.storages.frames import _frame_space as _moved

warnings.warn("trajstore.storages._frame_space moved to trajstore.storages.frames._frame_space; "
              "this import path goes in the next release", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
