"""Bounded JSON: every JSON document trajstore reads goes through :func:`loads_bounded`, every value a
caller gives it to keep as JSON (episode data) through :func:`check_storable`.

Why: ``json.loads`` recurses once per nesting level, so a file nested 100,000 deep raises
``RecursionError`` (a traceback, not a damaged-file error), and Python refuses to turn integers of
more than 4,300 digits into text and back: a value that ``json.dumps`` refuses at the next commit
makes every later commit fail. Reading, the text is checked first with a linear scan that runs in C
(regular expressions, ``bytes.translate``, a NumPy running sum): strings are skipped (escapes
included), brackets counted. Writing, values are checked before anything changes.

Bounds (module constants):

* :data:`MAX_DEPTH` levels of nesting read (256; trajstore's own files stay far below it),
* :data:`MAX_NUMBER_DIGITS` digits in one number read (400),
* :data:`MAX_STORED_DEPTH` levels of nesting in a stored value (64),
* integers of at most :data:`MAX_INT_BITS` bits stored (128: a ``SeedSequence`` entropy or a UUID
  fits; store a larger number as a string).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from trajstore.errors import FormatError, InvalidValueError

MAX_DEPTH = 256
MAX_NUMBER_DIGITS = 400
MAX_STORED_DEPTH = 64
MAX_INT_BITS = 128

# A string from its opening quote to its closing one, or to the end of the text when it has none
# (then the text is not JSON anyway). Possessive: every byte is looked at once, whatever the input.
_STRING = re.compile(rb'"[^"\\]*+(?:\\.?[^"\\]*+)*+"?', re.S)
_DIGIT_RUN = b"0" * (MAX_NUMBER_DIGITS + 1)
_DIGITS_AS_ZERO = bytes(ord("0") if ord("0") <= b <= ord("9") else ord(" ") for b in range(256))
_NOT_QUOTE_OR_BRACKET = bytes(b for b in range(256) if b not in b'"[]{}')
_CHUNK = 1 << 22


def text_problem(data: bytes | str, max_depth: int = MAX_DEPTH) -> str | None:
    """What keeps ``data`` (JSON text) from being read safely, or ``None``: nesting deeper than
    ``max_depth`` levels, or a number of more than :data:`MAX_NUMBER_DIGITS` digits.

    Linear in ``len(data)``, and runs in C (``bytes`` methods, NumPy); brackets and digits inside
    strings do not count. It does not check that ``data`` is JSON otherwise.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if _DIGIT_RUN in raw.translate(_DIGITS_AS_ZERO) and _DIGIT_RUN in _STRING.sub(b'""', raw).translate(
            _DIGITS_AS_ZERO):
        return f"a number of more than {MAX_NUMBER_DIGITS} digits"
    if raw.count(b"[") + raw.count(b"{") <= max_depth:  # fewer brackets than that: no deeper nesting
        return None
    if b"\\" in raw:  # escapes: pairs of backslashes first (they pair from the left), then escaped quotes
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    level = _deepest(raw.translate(None, _NOT_QUOTE_OR_BRACKET))
    return f"nested deeper than {max_depth} levels (at least {level})" if level > max_depth else None


def _deepest(text: bytes) -> int:
    """The deepest nesting of brackets outside strings in a text of quotes and brackets only (no
    escapes): a running sum over the brackets after an even number of quotes, in chunks."""
    top = level = quotes = 0
    for at in range(0, len(text), _CHUNK):
        codes = np.frombuffer(text, np.uint8, min(_CHUNK, len(text) - at), at)
        is_quote = codes == ord('"')
        outside = ((quotes + np.cumsum(is_quote)) & 1) == 0
        opens = outside & ((codes == ord("[")) | (codes == ord("{")))
        closes = outside & ((codes == ord("]")) | (codes == ord("}")))
        running = level + np.cumsum(opens.astype(np.int64) - closes)
        top = max(top, int(running.max()))
        level, quotes = int(running[-1]), quotes + int(is_quote.sum())
    return top


def loads_bounded(data: bytes | str, *, source: str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(data)`` for a document of ``source`` (a file name or URL, named in errors), after
    checking its nesting and number sizes (:func:`text_problem`); linear in ``len(data)``.

    Raises:
        FormatError: ``"<source> is not valid JSON (<why>)"``: not JSON, not UTF-8, nested deeper than
            ``max_depth`` levels, or a number longer than :data:`MAX_NUMBER_DIGITS` digits.
    """
    problem = text_problem(data, max_depth)
    if problem is None:
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, int digits limit
            problem = f"{type(exc).__name__}: {exc}" if not isinstance(exc, json.JSONDecodeError) else str(exc)
    raise FormatError(f"{source} is not valid JSON ({problem})")


def dumps_checked(value: Any, *, what: str, **options: Any) -> str:
    """``json.dumps(value, allow_nan=False, **options)``, refused unless :func:`loads_bounded` reads it
    back: nothing that trajstore writes is unreadable to it.

    Raises:
        InvalidValueError: NaN or infinity, an integer Python cannot write, a value that is not
            JSON, or nesting deeper than :data:`MAX_DEPTH` (names ``what``).
    """
    try:
        text = json.dumps(value, allow_nan=False, **options)
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidValueError(f"{what}: cannot be written as JSON ({type(exc).__name__}: {exc})") from None
    problem = text_problem(text)
    if problem is not None:
        raise InvalidValueError(f"{what}: cannot be written as JSON: {problem}")
    return text


def check_storable(value: Any, key: str, *, what: str = "episode data") -> Any:
    """A JSON-only copy of ``value`` that reads back as it is: what may be stored under ``key``.

    Accepted: ``None``, ``bool``, ``int`` of at most :data:`MAX_INT_BITS` bits, finite ``float``,
    ``str``, lists and tuples of them (a tuple reads back as a list), dicts with ``str`` keys, nested
    up to :data:`MAX_STORED_DEPTH` levels. NumPy scalars (``np.bool_``, integers, floats, ``np.str_``)
    become the Python value.

    Raises:
        InvalidValueError: naming ``what`` and the key path (``'info/cameras/1'``): a value that is not
            JSON (an array, an object, NaN or infinity, a dict with a non-``str`` key), too large an
            integer, too deep.
    """
    return _copy(value, key, 0, what)


def _copy(value: Any, where: str, depth: int, what: str) -> Any:
    if depth > MAX_STORED_DEPTH:
        raise InvalidValueError(f"{what} {where!r} is nested deeper than {MAX_STORED_DEPTH} levels")
    if isinstance(value, np.generic) and isinstance(value, (np.bool_, np.integer, np.floating, np.str_)):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise InvalidValueError(f"{what} {where!r} is an integer of {value.bit_length()} bits; at most "
                                    f"{MAX_INT_BITS} bits are stored (store a larger number as a str)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(f"{what} {where!r} is {value}: JSON has no NaN or infinity; "
                                    "store None or a string instead")
        return value
    if isinstance(value, (list, tuple)):
        return [_copy(v, f"{where}/{i}", depth + 1, what) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise InvalidValueError(f"{what} {where!r} has the key {key!r}: JSON object keys are str")
            out[key] = _copy(v, f"{where}/{key}", depth + 1, what)
        return out
    hint = "; convert it with .tolist()" if isinstance(value, np.ndarray) else ""
    raise InvalidValueError(f"{what} {where!r} is a {type(value).__name__}, which is not JSON "
                            f"(use None, bool, int, float, str, lists and dicts of them){hint}")
