"""Deprecated: moved to :mod:`trajstore.storages.frames._video_codec` (this path goes in the next release)."""

import sys
import warnings

from trajstore.storages.frames import _video_codec as _moved

warnings.warn("trajstore.storages._video_codec moved to trajstore.storages.frames._video_codec; "
              "this import path goes in the next release", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
