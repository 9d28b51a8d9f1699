"""Deprecated: moved to :mod:`trajstore.storages.hdf5._recovery`; this re-export goes in the next release."""

import warnings

from trajstore.storages.hdf5 import _recovery as _moved

warnings.warn("trajstore.storages._hdf5_recovery moved to trajstore.storages.hdf5._recovery", DeprecationWarning, stacklevel=2)
globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
