"""Deprecated: moved to :mod:`trajstore.storages.frames._image_codec` (this path goes in the next release)."""

import sys
import warnings

from trajstore.storages.frames import _image_codec as _moved

warnings.warn("trajstore.storages._image_codec moved to trajstore.storages.frames._image_codec; "
              "this import path goes in the next release", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
