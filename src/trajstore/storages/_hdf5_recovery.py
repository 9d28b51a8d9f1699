"""Deprecated: moved to :mod:`trajstore.storages.hdf5._recovery` (this alias goes away in a later release)."""

from trajstore._deprecated import alias

alias(__name__, "trajstore.storages.hdf5._recovery")
