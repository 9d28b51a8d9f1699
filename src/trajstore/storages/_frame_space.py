"""Deprecated: moved to :mod:`trajstore.storages.frames._frame_space` (this alias goes away in a later release)."""

from trajstore._deprecated import alias

alias(__name__, "trajstore.storages.frames._frame_space")
