"""Old import paths kept for one release: a thin module that re-exports a moved module's public names
and warns ``DeprecationWarning`` when it is imported.

A moved module leaves behind::

    from trajstore._deprecated import reexport
    reexport(__name__, "trajstore.training.torch")

``renamed`` keeps an old name for a renamed one (``{"verify_buffer": "compare_to_reference"}``).
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import Mapping

#: The release that removes the old paths.
REMOVED_IN = "0.3"


def warn_moved(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that module ``old`` moved to ``new`` (``DeprecationWarning``, pointing at the importer)."""
    warnings.warn(f"{old} moved to {new}; import it from there ({old} goes away in trajstore {REMOVED_IN})",
                  DeprecationWarning, stacklevel=stacklevel)


def alias(old: str, new: str) -> None:
    """Make the module name ``old`` stand for the module ``new`` itself (``sys.modules``: the same
    object, so a patch through either name reaches the code); then warn as :func:`warn_moved`.
    For a moved module whose private names callers may still use (``trajstore.storages._hdf5_files``)."""
    sys.modules[old] = importlib.import_module(new)
    warn_moved(old, new, stacklevel=4)


def reexport(old: str, new: str, *, renamed: Mapping[str, str] | None = None) -> None:
    """Make the module ``old`` (already in ``sys.modules``: call it from that module) a thin alias of
    ``new``: every public name of ``new`` (no leading ``_``, not a module), and ``renamed`` old names
    for new ones, become attributes of ``old``; then warn as :func:`warn_moved`.

    Raises:
        ImportError: ``new`` cannot be imported (e.g. its optional dependency is missing).
    """
    target = importlib.import_module(new)
    namespace = sys.modules[old].__dict__
    names = [n for n, v in vars(target).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)]
    for name in names:
        namespace[name] = getattr(target, name)
    for old_name, new_name in (renamed or {}).items():
        namespace[old_name] = getattr(target, new_name)
    namespace["__all__"] = sorted({*getattr(target, "__all__", names), *(renamed or {})})
    warn_moved(old, new, stacklevel=4)
