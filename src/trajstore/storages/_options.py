"""Declared storage options: each storage states its options once (name, default, check).

One function, :func:`config_from`, turns what a user passed (at create) or what a folder's
``storage.json`` holds (at reopen) into the storage's JSON-only config, raising before
anything touches the disk. An option marked ``from_metadata`` may be filled in by the
metadata router from the leaf's metadata key of the same name (``fps`` for video).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from trajstore._suggest import check_keywords


@dataclass(frozen=True)
class Option:
    """One keyword option of a storage.

    Attributes:
        name: the keyword.
        default: used when the option is not given (passed through ``check`` too).
        check: returns the JSON-ready value, or raises ``ValueError`` saying what is expected.
        doc: one line for error messages and docs.
        from_metadata: the router passes the leaf's ``metadata[name]`` when the user did not.
    """

    name: str
    default: Any
    check: Callable[[Any], Any]
    doc: str = ""
    from_metadata: bool = False


def config_from(owner: str, options: Sequence[Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """``{name: checked value}`` for every declared option, from ``given`` (missing ones take defaults).

    Raises:
        TypeError: ``given`` names an option that is not declared (the message suggests the closest declared
            one and lists them all: ``"ImageStorage got an unexpected keyword 'qualty' (did you mean
            'quality'?); ..."``).
        ValueError: an option's check failed (the message names ``owner`` and the option).
    """
    check_keywords(given, [o.name for o in options], passed_to=owner)
    config: dict[str, Any] = {}
    for option in options:
        value = given.get(option.name, option.default)
        try:
            config[option.name] = option.check(value)
        except ValueError as exc:
            raise ValueError(f"{owner} option {option.name}: {exc}") from None
    return config


# -- checks shared by several storages -------------------------------------------------------
def positive_int(value: Any) -> int:
    """An int >= 1 (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"expected an int >= 1, got {value!r}")
    return int(value)


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``None`` or what ``check`` accepts."""
    return lambda value: None if value is None else check(value)


def one_of(*choices: Any, normalize: Callable[[Any], Any] = lambda v: v) -> Callable[[Any], Any]:
    """One of ``choices`` after ``normalize`` (e.g. ``str.upper`` for case-insensitive names)."""
    def check(value: Any) -> Any:
        try:
            norm = normalize(value)
        except (TypeError, AttributeError, ValueError):
            norm = value
        if norm not in choices:
            raise ValueError(f"expected one of {list(choices)}, got {value!r}")
        return norm
    return check


def int_in(lo: int, hi: int) -> Callable[[Any], int]:
    """An int in ``[lo, hi]``."""
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
            raise ValueError(f"expected an int in [{lo}, {hi}], got {value!r}")
        return int(value)
    return check


def positive_number(value: Any) -> float | int:
    """A finite number > 0 (an int stays an int)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"expected a finite number > 0, got {value!r}")
    return value.item() if isinstance(value, np.generic) else value
