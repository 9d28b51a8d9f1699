"""Exceptions shared by every layer of trajstore.

Each one subclasses the built-in exception a user would already catch
(``ValueError``, ``KeyError``, ``FileExistsError``, ...), so ``except ValueError``
keeps working.
"""

from __future__ import annotations


class TrajstoreError(Exception):
    """Base class of every exception raised on purpose by trajstore."""


class InvalidValueError(TrajstoreError, ValueError):
    """A value does not fit its space (shape, dtype, bounds, keys).

    The message names the leaf by its nested path, e.g. ``observation/pixels``.
    """


class UnsupportedSpaceError(TrajstoreError, TypeError):
    """A storage was given a space it cannot store (e.g. a float image to ``ImageStorage``)."""


class ReadOnlyError(TrajstoreError, PermissionError):
    """A write was attempted on a storage or buffer opened read-only."""


class StorageExistsError(TrajstoreError, FileExistsError):
    """``create`` was pointed at a path that already holds data."""


class FormatError(TrajstoreError, ValueError):
    """A file on disk is missing, corrupt, or of an unknown type or format version."""


class UnknownTypeError(FormatError, KeyError):
    """A registered type name read from a file is not known; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class LockedError(TrajstoreError, BlockingIOError):
    """Another process holds the writer lock of a buffer folder."""


class AlreadyOpenError(LockedError):
    """This process already has the folder open in a way that excludes the new open (a writer of a
    folder that this process is reading, or the other way round, where the file library allows one
    mode per file and process). Close the other object first; the folder is not damaged."""


class RemoteStoreError(TrajstoreError, OSError):
    """A request to object storage failed: the endpoint is unreachable, the bucket is missing, the
    credentials were refused, or the storage options do not fit the URL's file system.

    The message names the URL and the store's own error.
    """


class PushConflictError(RemoteStoreError):
    """Another push to the same URL holds its push lock (the message names that push's host, process id
    and when its lock expires), took the lock over from this push, or replaced the manifest while this
    push ran. Nothing this push would delete was deleted and the URL's snapshot is the other push's (or
    the previous one): push again when the other push has ended.
    """


class StaleReadError(TrajstoreError, IndexError):
    """A reader asked for steps whose slots the writer reused while they were read (a ring
    overwriting its oldest steps, or a discarded episode's slots written again).

    The reader has refreshed its view by the time this is raised: index again (those steps are
    gone). Samplers and the torch dataset redraw on their own.
    """


class UnknownLeafError(InvalidValueError, KeyError):
    """A name (``"observation/pixels"``) that is no leaf or subtree of the space; the message lists
    the keys where the lookup failed. A ``KeyError`` and a ``ValueError`` both, so either ``except`` works."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class RetriesExhaustedError(TrajstoreError, RuntimeError):
    """A reader gave up: the writer reused the slots being read on every one of the attempts the
    buffer's one retry policy allows (see ``trajstore.replay_buffer.view.MAX_READ_ATTEMPTS``)."""


class RoutingWarning(UserWarning):
    """The metadata router did something the caller may not expect: a leaf whose kind maps to a
    storage that cannot take it went to the default storage, or ``key_kwargs`` were ignored.

    The message names the leaf, where it went and why.
    """


class AlignmentWarning(UserWarning):
    """An aligned view of a stream buffer leaves episodes out (a stream without a sample in them, or
    no time every stream covers); the message names the episodes and why."""


class SelectionWarning(UserWarning):
    """An episode selection names a data key that no held episode has (a typo selects nothing
    silently otherwise); the message names the key and the closest key held."""
