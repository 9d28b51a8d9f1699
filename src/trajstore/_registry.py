"""Registries that map a stable type name to a class.

Files on disk name types (``"hdf5"``, ``"box"``) and are read back through a
registry. Nothing read from a file is ever imported or unpickled: an unknown
name raises :class:`~trajstore.errors.UnknownTypeError` listing the known ones.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from trajstore.errors import UnknownTypeError

T = TypeVar("T", bound=type)


class Registry(Generic[T]):
    """A name -> class table for one family of types (spaces, storages)."""

    def __init__(self, family: str):
        self.family = family
        self._classes: dict[str, T] = {}
        self._lazy: dict[str, Callable[[], None]] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator: register ``cls`` under ``name`` and set ``cls.type_name``."""

        def decorate(cls: T) -> T:
            existing = self._classes.get(name)
            if existing is not None and existing is not cls:
                raise ValueError(
                    f"{self.family} type name {name!r} is already registered to {existing.__qualname__}"
                )
            cls.type_name = name
            self._classes[name] = cls
            return cls

        return decorate

    def register_lazy(self, name: str, importer: Callable[[], None]) -> None:
        """Declare ``name`` as provided by an optional module that ``importer`` imports on demand."""
        self._lazy[name] = importer

    def get(self, name: str) -> T:
        """Return the class registered as ``name``.

        Raises:
            UnknownTypeError: ``name`` is not registered; the message lists the known names.
        """
        if name not in self._classes and name in self._lazy:
            self._lazy[name]()
        try:
            return self._classes[name]
        except KeyError:
            known = ", ".join(sorted(set(self._classes) | set(self._lazy)))
            raise UnknownTypeError(
                f"unknown {self.family} type {name!r}; known types: {known}"
            ) from None

    def names(self) -> list[str]:
        return sorted(set(self._classes) | set(self._lazy))
