"""Unknown keyword names answered with the closest known one: ``capacty`` -> "did you mean 'capacity'?".

One helper for every level that takes keywords by name (``ReplayBuffer.create`` and ``load_from``,
``StreamBuffer.create``, the storages' ``create``, the metadata router's per-leaf options), so the
messages read the same everywhere::

    ReplayBuffer.create got an unexpected keyword 'capacty' (did you mean 'capacity'?); it takes
    cache_path, capacity, multiprocessing, check_bounds, storage_cls_map, key_kwargs, nested_separator

The closest name is :func:`difflib.get_close_matches`' (standard library), case-insensitively.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from typing import Any, Callable, Iterable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: How alike a name must be to be suggested (``difflib`` ratio, 0..1); 0.6 is difflib's own default.
CUTOFF = 0.6


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (letter case ignored), or ``None`` when none is close.

    >>> did_you_mean("capacty", ["cache_path", "capacity"])
    'capacity'
    """
    names = list(dict.fromkeys(known))
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=CUTOFF)
    return lowered[close[0]] if close else None


def unexpected_keywords(unknown: Iterable[str], known: Iterable[str], *, passed_to: str) -> str:
    """``"<passed_to> got an unexpected keyword 'capacty' (did you mean 'capacity'?); it takes a, b"``:
    the message for ``unknown`` names (in the order given), each with its closest name in ``known``."""
    names = list(dict.fromkeys(known))
    bad = list(dict.fromkeys(unknown))
    parts = []
    for name in bad:
        close = did_you_mean(name, names)
        parts.append(f"{name!r}" + (f" (did you mean {close!r}?)" if close else ""))
    noun = "an unexpected keyword" if len(bad) == 1 else "unexpected keywords"
    takes = ", ".join(names) if names else "no keywords"
    return f"{passed_to} got {noun} {', '.join(parts)}; it takes {takes}"


def check_keywords(given: Iterable[str], known: Iterable[str], *, passed_to: str) -> None:
    """Raise if ``given`` names a keyword that is not in ``known``.

    Args:
        given: the keyword names a caller passed (a dict's keys).
        known: every name the callee takes, in the order to list them.
        passed_to: what was called, for the message (``"ReplayBuffer.create"``, ``"leaf 'cam': ImageStorage"``).

    Raises:
        TypeError: :func:`unexpected_keywords`' message, naming each unknown keyword and its closest known one.
    """
    names = list(dict.fromkeys(known))
    unknown = [g for g in given if g not in names]
    if unknown:
        raise TypeError(unexpected_keywords(unknown, names, passed_to=passed_to))


def keywords_of(func: Callable[..., Any]) -> list[str]:
    """The names ``func`` takes by keyword, in signature order (``self``/``cls`` and ``*args``/``**kw`` left out)."""
    params = inspect.signature(func).parameters.values()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in params if p.kind in kinds and p.name not in ("self", "cls")]


def suggests_keywords(func: F) -> F:
    """Decorate a function without ``**kwargs`` so an unknown keyword raises :func:`check_keywords`' message
    (``"ReplayBuffer.load_from got an unexpected keyword 'read_onyl' (did you mean 'read_only'?); ..."``)
    instead of Python's bare one. Put it under ``@classmethod``; the signature and docstring stay ``func``'s."""
    known = keywords_of(func)
    accepted = frozenset(known)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not accepted.issuperset(kwargs):
            check_keywords(kwargs, known, passed_to=func.__qualname__)
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
