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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from trajstore.replay_buffer.episodes import Episode

Predicate = Callable[[Episode], bool]

#: Names that refer to the episode itself rather than to a key of its data.
EPISODE_FIELDS = {
    "id": lambda e: e.id,
    "steps": len,
    "interrupted": lambda e: e.interrupted,
    "done": lambda e: e.done,
    "overwritten": lambda e: e.overwritten,
}

_IDS = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*,?\s*$")
_TOKEN = re.compile(r"""
    \s*(?:
      (?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)
    | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\))
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    )""", re.X)
_MISSING = object()


@dataclass(frozen=True)
class EpisodeSelection:
    """A parsed selection: explicit ``ids`` (sorted, unique) or a ``predicate`` over episodes."""

    text: str
    ids: tuple[int, ...] | None = None
    predicate: Predicate | None = None

    def select(self, episodes: list[Episode]) -> list[int]:
        """Ids of the ``episodes`` selected, oldest first.

        Raises:
            ValueError: an id of :attr:`ids` is not among ``episodes`` (names the first few).
        """
        if self.ids is not None:
            held = {e.id for e in episodes}
            missing = [i for i in self.ids if i not in held]
            if missing:
                span = f"{min(held)}..{max(held)}" if held else "none"
                raise ValueError(f"episodes {missing[:5]} are not held (held ids: {span})")
            return list(self.ids)
        assert self.predicate is not None
        return [e.id for e in episodes if self.predicate(e)]


def parse_selection(text: str) -> EpisodeSelection:
    """Parse ``text`` (see the module docstring).

    Raises:
        ValueError: a malformed selection; the message quotes it and says where and what was expected.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty episode selection: give ids like '0,3,5-9' or an expression like 'success == true'")
    if _IDS.match(text):
        return EpisodeSelection(text, ids=_parse_ids(text))
    return EpisodeSelection(text, predicate=_Parser(text).parse())


def _parse_ids(text: str) -> tuple[int, ...]:
    ids: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "-" in part:
            a, b = (int(x) for x in part.split("-"))
            if b < a:
                raise ValueError(f"episode selection {text!r}: range {part!r} runs backwards")
            ids.update(range(a, b + 1))
        else:
            ids.add(int(part))
    return tuple(sorted(ids))


class _Parser:
    """Recursive descent over the tokens: or_expr -> and_expr -> not_expr -> atom."""

    def __init__(self, text: str):
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, position)
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                at = len(text) - len(text[pos:].lstrip())
                self._error(at, f"unexpected character {text[at]!r}")
            kind = m.lastgroup
            assert kind is not None
            value, start = m.group(kind), m.start(kind)
            if kind == "name" and value in ("and", "or", "not", "true", "false", "null"):
                kind = "op" if value in ("and", "or", "not") else "literal"
            self.tokens.append((kind, value, start))
            pos = m.end()
        self.i = 0

    def _error(self, pos: int, found: str, expected: str = "") -> None:
        where = f" at position {pos}" if pos < len(self.text) else " at the end"
        hint = f", expected {expected}" if expected else ""
        raise ValueError(f"episode selection {self.text!r}: {found}{where}{hint}")

    def _peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, *values: str) -> bool:
        tok = self._peek()
        if tok is not None and tok[0] == "op" and tok[1] in values:
            self.i += 1
            return True
        return False

    def parse(self) -> Predicate:
        pred = self._or()
        tok = self._peek()
        if tok is not None:
            self._error(tok[2], f"unexpected {tok[1]!r}", "'and', 'or' or the end")
        return pred

    def _or(self) -> Predicate:
        parts = [self._and()]
        while self._take("or", "||"):
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else (lambda e: any(p(e) for p in parts))

    def _and(self) -> Predicate:
        parts = [self._not()]
        while self._take("and", "&&"):
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else (lambda e: all(p(e) for p in parts))

    def _not(self) -> Predicate:
        if self._take("not", "!"):
            inner = self._not()
            return lambda e: not inner(e)
        return self._atom()

    def _atom(self) -> Predicate:
        tok = self._peek()
        if tok is None:
            self._error(len(self.text), "nothing more", "a name or '('")
        assert tok is not None
        if self._take("("):
            inner = self._or()
            if not self._take(")"):
                nxt = self._peek()
                self._error(nxt[2] if nxt else len(self.text), f"{nxt[1]!r}" if nxt else "nothing more",
                            "')'")
            return inner
        if tok[0] != "name":
            self._error(tok[2], f"{tok[1]!r}", "a name (a key of the episode data, or id/steps/interrupted/...)")
        self.i += 1
        getter = _getter(tok[1])
        op_tok = self._peek()
        if op_tok is None or op_tok[0] != "op" or op_tok[1] not in _COMPARE:
            return lambda e: _truthy(getter(e))
        self.i += 1
        lit = self._peek()
        if lit is None or lit[0] not in ("num", "str", "literal"):
            self._error(lit[2] if lit else len(self.text), f"{lit[1]!r}" if lit else "nothing more",
                        "a value (a number, a quoted string, true, false or null)")
        assert lit is not None
        self.i += 1
        value, compare = _literal(lit), _COMPARE[op_tok[1]]
        return lambda e: compare(getter(e), value)


def _getter(name: str) -> Callable[[Episode], Any]:
    if name.startswith("data."):
        keys = name.split(".")[1:]
    elif name in EPISODE_FIELDS:
        return EPISODE_FIELDS[name]
    else:
        keys = name.split(".")

    def get(e: Episode) -> Any:
        value: Any = e._data or {}  # read-only use: no copy per episode
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return _MISSING
            value = value[key]
        return value

    return get


def _literal(tok: tuple[str, str, int]) -> Any:
    kind, text, _ = tok
    if kind == "literal":
        return {"true": True, "false": False, "null": None}[text]
    if kind == "num":
        return float(text) if any(c in text for c in ".eE") else int(text)
    return re.sub(r"\\(.)", r"\1", text[1:-1])


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
