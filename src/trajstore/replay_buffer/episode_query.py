"""Episode selections written as text (``trajstore copy --episodes ...``): ids or a small expression
over each episode's data. Parsed by hand into a predicate; nothing is ever ``eval``-ed.

Two forms:

* **ids** (``Episode.id``): ``"0,3,5-9"``, ranges inclusive.
* **an expression** over an episode's JSON data and attributes::

      success == true
      task == "push the T" and not interrupted
      (seed >= 10 or data.operator == 'ana') and steps > 20

  A comparison is ``name OP literal`` with OP one of ``== != < <= > >=``; a bare ``name`` is true
  when its value is truthy. Literals: ``true``, ``false``, ``null``, numbers, strings in single or
  double quotes (``\\"`` and ``\\\\`` escape). ``and``/``or``/``not`` (also ``&&``, ``||``, ``!``) and
  parentheses combine them, ``not`` binding tightest and ``or`` loosest. Names: ``id``, ``steps``,
  ``interrupted``, ``done`` and ``overwritten`` are the episode's own; any other name, or
  ``data.<key>`` always, is a key of its data. A key the episode's data lacks equals nothing
  (``==`` false, ``!=`` true) and orders against nothing; values of different kinds (a string and
  a number) are unequal and never ordered; ``true`` does not equal ``1``.

Bounds: parentheses and ``not`` nest at most :data:`MAX_NESTING` levels; ids are below ``2**63``
and ranges are kept as intervals (``0-1000000000000`` is checked against the held ids without
being expanded). Parsing is linear in the length of the text (one regular-expression scan).
A data key that no held episode has makes :meth:`EpisodeSelection.select` warn
(:class:`~trajstore.errors.SelectionWarning`, with the closest key held).

Evaluation: over a buffer's :class:`~trajstore.replay_buffer.episode_list.EpisodeList`, an expression
whose names are episode fields and top-level data keys runs as NumPy array operations over one column
per name (:mod:`~trajstore.replay_buffer.selection_columns`, same results); a nested key
(``info.camera``) runs the predicate once per episode.
"""

from __future__ import annotations

import bisect
import difflib
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from trajstore.errors import InvalidValueError, SelectionWarning
from trajstore.replay_buffer.data_columns import MISSING, EpisodeRow
from trajstore.replay_buffer.episode_list import BATCH, EpisodeList
from trajstore.replay_buffer.episodes import Episode
from trajstore.replay_buffer.selection_columns import select_mask
from trajstore.replay_buffer.selection_tokens import MAX_NUMBER_CHARS, tokenize

__all__ = ["EPISODE_FIELDS", "MAX_ID", "MAX_NESTING", "MAX_NUMBER_CHARS", "EpisodeSelection", "parse_selection",
           "tokenize"]

Predicate = Callable[[Episode], bool]

#: Names that refer to the episode itself rather than to a key of its data.
EPISODE_FIELDS = {
    "id": lambda e: e.id,
    "steps": len,
    "interrupted": lambda e: e.interrupted,
    "done": lambda e: e.done,
    "overwritten": lambda e: e.overwritten,
}
#: Deepest nesting of parentheses and ``not`` in an expression.
MAX_NESTING = 64
#: Ids are int64 episode numbers.
MAX_ID = 2 ** 63 - 1

_ID_CHARS = re.compile(r"[\d\s,\-]++")
_ID_PART = re.compile(r"(\d+)(?:\s*-\s*(\d+))?")
_MISSING = object()


def _quoted(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


@dataclass(frozen=True)
class EpisodeSelection:
    """A parsed selection: id ``ranges`` (sorted, disjoint, inclusive ``(first, last)`` pairs) or a
    ``predicate`` over episodes, the data ``keys`` (dotted paths) the predicate reads, and its ``plan`` for
    evaluation over columns (:mod:`~trajstore.replay_buffer.selection_columns`; ``None``: per episode only)."""

    text: str
    ranges: tuple[tuple[int, int], ...] | None = None
    predicate: Predicate | None = None
    keys: tuple[str, ...] = ()
    plan: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def quoted(self) -> str:
        """:attr:`text` quoted for a message, cut to its first 60 characters when longer."""
        return _quoted(self.text)

    def select(self, episodes: list[Episode]) -> list[int]:
        """Ids of the ``episodes`` selected, oldest first (``episodes`` in id order, as a buffer lists
        them). Warns (:class:`~trajstore.errors.SelectionWarning`) for each data key that no one of
        ``episodes`` has, naming the closest one they have.

        Raises:
            InvalidValueError: an id of :attr:`ranges` is not among ``episodes`` (names the first few).
        """
        if self.ranges is not None:
            return self._select_ranges(episodes)
        assert self.predicate is not None
        if isinstance(episodes, EpisodeList) and not any("." in k for k in self.keys):
            return self._select_columns(episodes)
        for problem in self.missing_keys(episodes):
            warnings.warn(SelectionWarning(f"episode selection {_quoted(self.text)}: {problem}"), stacklevel=2)
        return [e.id for e in episodes if self.predicate(e)]

    def _select_columns(self, episodes: EpisodeList) -> list[int]:
        """:meth:`select` of a buffer's lazy episode list: the data keys are read as columns (the log's lines
        scanned once per key, not parsed one by one) and the expression is evaluated over them as arrays
        (:mod:`~trajstore.replay_buffer.selection_columns`), or the predicate runs on light rows."""
        assert self.predicate is not None
        values = {key: episodes.data_values(key) for key in self.keys}
        sample = None
        for key, column in values.items():
            if column and all(v is MISSING for v in column):
                sample = episodes[:BATCH] if sample is None else sample  # the hint looks at the first ones
                warnings.warn(SelectionWarning(f"episode selection {_quoted(self.text)}: "
                                               f"{_missing_text(key, sample)}"), stacklevel=3)
        cols = episodes.columns()
        chosen = None if self.plan is None else select_mask(self.plan, cols, values, MISSING)
        if chosen is not None:
            return cols["id"][chosen].tolist()
        present = [[(key, v) for v in column] for key, column in values.items()]
        rows = map(EpisodeRow, cols["id"].tolist(), cols["steps"].tolist(), cols["done"].tolist(),
                   cols["interrupted"].tolist(), cols["overwritten"].tolist(),
                   ({k: v for k, v in kv if v is not MISSING} for kv in zip(*present)) if present
                   else iter(lambda: None, 0))
        return [r.id for r in rows if self.predicate(r)]

    def _select_ranges(self, episodes: list[Episode]) -> list[int]:
        held = episodes.ids.tolist() if isinstance(episodes, EpisodeList) else sorted(e.id for e in episodes)
        missing, absent = self.absent_ids(held)
        if absent:
            span = f"{held[0]}..{held[-1]}" if held else "none"
            more = f" and {absent - len(missing)} more" if absent > len(missing) else ""
            raise InvalidValueError(f"episodes {missing}{more} are not held (held ids: {span})")
        out: list[int] = []
        for first, last in self.ranges or ():
            out.extend(held[bisect.bisect_left(held, first):bisect.bisect_right(held, last)])
        return out

    def absent_ids(self, held: list[int], limit: int = 5) -> tuple[list[int], int]:
        """For an id selection: the first ``limit`` of its ids not in ``held`` (sorted ids) and how many
        are absent in all; ranges are not expanded (at most ``len(held) + limit`` steps)."""
        missing: list[int] = []
        absent = 0
        for first, last in self.ranges or ():
            lo, hi = bisect.bisect_left(held, first), bisect.bisect_right(held, last)
            gap = (last - first + 1) - (hi - lo)
            absent += gap
            want, at = first, lo
            while gap and want <= last and len(missing) < limit:
                if at < hi and held[at] == want:
                    at += 1
                else:
                    missing.append(want)
                want += 1
        return missing, absent

    def missing_keys(self, episodes: list[Episode]) -> list[str]:
        """For each data key of the expression that no one of ``episodes`` has: ``"no held episode has
        the data key 'sucess' (did you mean 'success'?)"``; empty for ids, or when ``episodes`` is empty."""
        if not self.keys or not episodes:
            return []
        return [_missing_text(key, episodes) for key in self.keys
                if not any(_lookup(e, key.split(".")) is not _MISSING for e in episodes)]


def _missing_text(key: str, episodes: Iterable[Episode]) -> str:
    """``"no held episode has the data key 'sucess' (did you mean 'success'?)"``, the hint from ``episodes``."""
    depth = len(key.split("."))
    held = sorted({k for e in episodes for k in _paths(e, depth)})
    close = difflib.get_close_matches(key, held, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else (f" (keys held: {', '.join(held[:8])})"
                                                           if held else " (no episode has data)")
    return f"no held episode has the data key {key!r}{hint}"


def parse_selection(text: str) -> EpisodeSelection:
    """Parse ``text`` (see the module docstring). Linear in ``len(text)``.

    Raises:
        InvalidValueError: a malformed selection; the message quotes it (cut when long) and says where
            and what was expected; a range that runs backwards, an id of ``2**63`` or more, nesting
            deeper than :data:`MAX_NESTING`.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidValueError("empty episode selection: give ids like '0,3,5-9' or an expression like "
                                "'success == true'")
    if _ID_CHARS.fullmatch(text) and any(c.isdigit() for c in text):
        return EpisodeSelection(text, ranges=_parse_ranges(text))
    parser = _Parser(text)
    predicate, plan = parser.parse()
    return EpisodeSelection(text, predicate=predicate, keys=tuple(dict.fromkeys(parser.keys)), plan=plan)


def _parse_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """Sorted, merged inclusive intervals of an id list; linear in ``len(text)`` (plus sorting)."""
    parts: list[tuple[int, int]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _ID_PART.fullmatch(part)
        if m is None:
            raise InvalidValueError(f"episode selection {_quoted(text)}: {_quoted(part)} is not an id or a "
                                    "range 'A-B'")
        if any(len(g) > 19 or int(g) > MAX_ID for g in m.groups() if g is not None):
            raise InvalidValueError(f"episode selection {_quoted(text)}: {_quoted(part)}: episode ids are below "
                                    f"2**63")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if b < a:
            raise InvalidValueError(f"episode selection {_quoted(text)}: range {part!r} runs backwards")
        parts.append((a, b))
    if not parts:
        raise InvalidValueError(f"episode selection {_quoted(text)}: no ids")
    parts.sort()
    merged = [parts[0]]
    for a, b in parts[1:]:
        if a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return tuple(merged)


class _Parser:
    """Recursive descent over the tokens: or_expr -> and_expr -> not_expr -> atom, at most
    :data:`MAX_NESTING` levels of parentheses and ``not`` deep."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.keys: list[str] = []

    def _error(self, pos: int, found: str, expected: str = "") -> None:
        where = f" at position {pos}" if pos < len(self.text) else " at the end"
        hint = f", expected {expected}" if expected else ""
        raise InvalidValueError(f"episode selection {_quoted(self.text)}: {found}{where}{hint}")

    def _peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, *values: str) -> bool:
        tok = self._peek()
        if tok is not None and tok[0] == "op" and tok[1] in values:
            self.i += 1
            return True
        return False

    def _deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            tok = self.tokens[self.i - 1]
            raise InvalidValueError(f"episode selection {_quoted(self.text)}: parentheses and 'not' nest deeper "
                                    f"than {MAX_NESTING} levels (at position {tok[2]})")

    def parse(self) -> tuple[Predicate, tuple | None]:
        """The predicate and its plan (:mod:`~trajstore.replay_buffer.selection_columns`; ``None``: a
        nested data key, evaluated per episode only)."""
        pred, plan = self._or()
        tok = self._peek()
        if tok is not None:
            self._error(tok[2], f"unexpected {_quoted(tok[1])}", "'and', 'or' or the end")
        return pred, plan

    def _or(self) -> tuple[Predicate, tuple | None]:
        parts = [self._and()]
        while self._take("or", "||"):
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else _join("or", any, parts)

    def _and(self) -> tuple[Predicate, tuple | None]:
        parts = [self._not()]
        while self._take("and", "&&"):
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else _join("and", all, parts)

    def _not(self) -> tuple[Predicate, tuple | None]:
        if self._take("not", "!"):
            self._deeper()
            inner, plan = self._not()
            self.depth -= 1
            return (lambda e: not inner(e)), (None if plan is None else ("not", plan))
        return self._atom()

    def _atom(self) -> tuple[Predicate, tuple | None]:
        tok = self._peek()
        if tok is None:
            self._error(len(self.text), "nothing more", "a name or '('")
        assert tok is not None
        if self._take("("):
            self._deeper()
            inner = self._or()
            self.depth -= 1
            if not self._take(")"):
                nxt = self._peek()
                self._error(nxt[2] if nxt else len(self.text), _quoted(nxt[1]) if nxt else "nothing more",
                            "')'")
            return inner
        if tok[0] != "name":
            self._error(tok[2], _quoted(tok[1]), "a name (a key of the episode data, or id/steps/interrupted/...)")
        self.i += 1
        getter = _getter(tok[1])
        name = tok[1] if tok[1] in EPISODE_FIELDS else tok[1].removeprefix("data.")
        if tok[1] not in EPISODE_FIELDS:
            self.keys.append(name)
        column = None if "." in name else (name if tok[1] in EPISODE_FIELDS else "data." + name)
        op_tok = self._peek()
        if op_tok is None or op_tok[0] != "op" or op_tok[1] not in _COMPARE:
            return (lambda e: _truthy(getter(e))), (None if column is None else ("truthy", column))
        self.i += 1
        lit = self._peek()
        if lit is None or lit[0] not in ("num", "str", "literal"):
            self._error(lit[2] if lit else len(self.text), _quoted(lit[1]) if lit else "nothing more",
                        "a value (a number, a quoted string, true, false or null)")
        assert lit is not None
        self.i += 1
        value, compare = _literal(lit), _COMPARE[op_tok[1]]
        return (lambda e: compare(getter(e), value)), (None if column is None else ("cmp", column, op_tok[1], value))


def _join(op: str, fold: Callable, parts: list[tuple[Predicate, tuple | None]]) -> tuple[Predicate, tuple | None]:
    """``and``/``or`` of ``parts`` (predicate, plan) pairs."""
    preds, plans = [p for p, _ in parts], tuple(q for _, q in parts)
    return (lambda e: fold(p(e) for p in preds)), (None if None in plans else (op, plans))


def _lookup(e: Episode, keys: list[str]) -> Any:
    value: Any = e._data or {}  # read-only use: no copy per episode
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def _paths(e: Episode, depth: int) -> Iterable[str]:
    """Dotted key paths of ``e``'s data ``depth`` keys long (the candidates for a close match)."""
    level: list[tuple[str, Any]] = [("", e._data or {})]
    for _ in range(depth):
        level = [(f"{p}.{k}" if p else k, v) for p, d in level if isinstance(d, dict) for k, v in d.items()]
    return (p for p, _ in level)


def _getter(name: str) -> Callable[[Episode], Any]:
    if name.startswith("data."):
        keys = name.split(".")[1:]
    elif name in EPISODE_FIELDS:
        return EPISODE_FIELDS[name]
    else:
        keys = name.split(".")
    return lambda e: _lookup(e, keys)


def _literal(tok: tuple[str, str, int]) -> Any:
    kind, text, _ = tok
    if kind == "literal":
        return {"true": True, "false": False, "null": None}[text]
    if kind == "num":
        return float(text) if any(c in text for c in ".eE") else int(text)
    return re.sub(r"\\(.)", r"\1", text[1:-1], flags=re.S)


def _kind(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return type(value).__name__
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _same_kind(a: Any, b: Any) -> bool:
    return a is not _MISSING and _kind(a) == _kind(b)


def _truthy(value: Any) -> bool:
    return value is not _MISSING and bool(value)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: _same_kind(a, b) and a == b,
    "!=": lambda a, b: not (_same_kind(a, b) and a == b),
    "<": lambda a, b: _same_kind(a, b) and _kind(a) in ("number", "str") and a < b,
    "<=": lambda a, b: _same_kind(a, b) and _kind(a) in ("number", "str") and a <= b,
    ">": lambda a, b: _same_kind(a, b) and _kind(a) in ("number", "str") and a > b,
    ">=": lambda a, b: _same_kind(a, b) and _kind(a) in ("number", "str") and a >= b,
}
