"""The tokens of a selection expression (:mod:`~trajstore.replay_buffer.episode_query`): one scan of
one regular expression, linear in the length of the text."""

from __future__ import annotations

import re

from trajstore.errors import InvalidValueError

__all__ = ["MAX_NUMBER_CHARS", "tokenize"]

#: Longest number literal (characters) in an expression.
MAX_NUMBER_CHARS = 64

# One scan over the text: each match is optional blanks and one token; ``bad`` takes any other
# character, so the matches are contiguous. Possessive quantifiers: no backtracking.
_TOKEN = re.compile(r"""
    \s*+(?:
      (?P<num>-?\d++(?:\.\d*+)?+(?:[eE][-+]?\d++)?+)
    | (?P<str>"(?:[^"\\]++|\\.)*+"|'(?:[^'\\]++|\\.)*+')
    | (?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\))
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*+(?:\.[A-Za-z_][A-Za-z0-9_]*+)*+)
    | (?P<bad>.)
    )""", re.X | re.S)


def _quoted(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def tokenize(text: str) -> list[tuple[str, str, int]]:
    """The tokens of an expression, ``(kind, text, position)``, kind one of ``num``, ``str``, ``op``,
    ``name``, ``literal``: one pass of one regular expression over ``text``.

    Raises:
        InvalidValueError: a character that starts no token (names its position).
    """
    tokens = []
    for m in _TOKEN.finditer(text, 0, len(text.rstrip())):
        kind = m.lastgroup
        assert kind is not None
        value, start = m.group(kind), m.start(kind)
        if kind == "bad":
            raise InvalidValueError(f"episode selection {_quoted(text)}: unexpected character {value!r} at "
                                    f"position {start}")
        if kind == "name" and value in ("and", "or", "not", "true", "false", "null"):
            kind = "op" if value in ("and", "or", "not") else "literal"
        elif kind == "num" and len(value) > MAX_NUMBER_CHARS:
            raise InvalidValueError(f"episode selection {_quoted(text)}: the number at position {start} has "
                                    f"more than {MAX_NUMBER_CHARS} characters")
        tokens.append((kind, value, start))
    return tokens
