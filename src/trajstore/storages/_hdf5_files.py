"""Deprecated: moved to :mod:`trajstore.storages.hdf5._files`; this re-export goes in the next release."""

import warnings

from trajstore.storages.hdf5 import _files as _moved

warnings.warn("trajstore.storages._hdf5_files moved to trajstore.storages.hdf5._files", DeprecationWarning, stacklevel=2)
globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
