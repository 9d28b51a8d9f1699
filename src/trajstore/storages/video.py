"""Deprecated: moved to :mod:`trajstore.storages.frames.video` (this alias goes away in a later release)."""

from trajstore._deprecated import alias

alias(__name__, "trajstore.storages.frames.video")
