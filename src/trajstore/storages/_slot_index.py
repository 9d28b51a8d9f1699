"""Deprecated: moved to :mod:`trajstore.storages.frames._slot_index` (this path goes in the next release)."""

import sys
import warnings

from trajstore.storages.frames import _slot_index as _moved

warnings.warn("trajstore.storages._slot_index moved to trajstore.storages.frames._slot_index; "
              "this import path goes in the next release", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
