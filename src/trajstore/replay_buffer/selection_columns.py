"""A selection expression (:mod:`~trajstore.replay_buffer.episode_query`) evaluated as NumPy array
operations over columns, one per name it reads, instead of once per episode in Python.

The parser gives a *plan* beside its predicate (a tree of tuples):

* ``("cmp", name, op, literal)``: ``name OP literal``, OP one of ``== != < <= > >=``;
* ``("truthy", name)``: a bare name;
* ``("and", (plan, ...))``, ``("or", (plan, ...))``, ``("not", plan)``.

A name is an episode field (``id``, ``steps``, ``done``, ``interrupted``, ``overwritten``) or a
top-level data key. Each column is a :class:`Column`: a kind per episode (:data:`MISSING_KIND`,
:data:`NULL`, :data:`BOOL`, :data:`NUMBER`, :data:`STR`, :data:`OTHER` for lists and dicts) and the
values. Comparisons of numbers and strings run on the values of that kind only, as an object array
(Python's own comparison, in C: ints beyond 2**53, int against float, NaN and code-point string
order come out as the per-episode evaluation gives them) or as an int64/bool array for the episode
fields. Same results as the per-episode predicate, including a missing key (``==`` false, ``!=``
true, never ordered), values of different kinds (unequal, never ordered) and ``true != 1``.

:func:`data_column` returns ``None`` for a value of a type JSON does not give (a ``str`` subclass,
a NumPy scalar kept in memory before a commit): the caller then runs the per-episode predicate.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Column", "data_column", "evaluate", "field_column", "literal_kind", "select_mask",
           "MISSING_KIND", "NULL", "BOOL", "NUMBER", "STR", "OTHER"]

#: Kind codes (uint8) of a column's values.
MISSING_KIND, NULL, BOOL, NUMBER, STR, OTHER = range(6)
_KIND_OF_TYPE = {type(None): NULL, bool: BOOL, int: NUMBER, float: NUMBER, str: STR, list: OTHER, dict: OTHER}
_ORDER: dict[str, Callable[[Any, Any], Any]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt,
                                                 ">=": operator.ge, "==": operator.eq}
_EXACT_FLOAT = 2 ** 53  # int64 values up to this compare exactly against a float


class Column:
    """The values of one name over ``n`` episodes: ``kinds`` (uint8 ``(n,)``, or one int for all) and
    ``values`` (``(n,)``: object, or int64/bool for an episode field)."""

    __slots__ = ("kinds", "values")

    def __init__(self, kinds: np.ndarray | int, values: np.ndarray):
        self.kinds, self.values = kinds, values

    def of_kind(self, kind: int) -> np.ndarray | None:
        """Bool ``(n,)`` mask of the values of ``kind``; ``None`` when all are."""
        if isinstance(self.kinds, int):
            return None if self.kinds == kind else np.zeros(len(self.values), bool)
        return self.kinds == kind

    def missing(self) -> np.ndarray:
        """Bool ``(n,)``: the episodes whose data lack the key."""
        if isinstance(self.kinds, int):
            return np.full(len(self.values), self.kinds == MISSING_KIND)
        return self.kinds == MISSING_KIND


def field_column(values: np.ndarray) -> Column:
    """An episode field's column: int64 (``id``, ``steps``: numbers) or bool (``done``, ...)."""
    return Column(BOOL if values.dtype == np.bool_ else NUMBER, values)


def data_column(values: Sequence[Any], missing: Any) -> Column | None:
    """The column of a data key from its values (``missing`` where the data lacks the key); ``None``
    when a value's type is not one JSON gives (``None``, bool, int, float, str, list, dict)."""
    n = len(values)
    types = np.fromiter(map(type, values), object, n)
    kinds = np.zeros(n, np.uint8)
    known = types == object  # type(missing) is object: no JSON value has it
    if known.any() and not all(values[k] is missing for k in np.flatnonzero(known).tolist()):
        return None
    if not known.all():
        for t, kind in _KIND_OF_TYPE.items():
            hit = types == t
            kinds[hit] = kind
            known |= hit
        if not known.all():
            return None
    return Column(kinds, np.fromiter(values, object, n))


def select_mask(plan: tuple, fields: dict[str, np.ndarray], data: dict[str, Sequence[Any]],
                missing: Any) -> np.ndarray | None:
    """Bool ``(n,)``: the episodes ``plan`` selects, from the episode ``fields`` (``(n,)`` arrays by
    name, as :meth:`~trajstore.replay_buffer.episode_list.EpisodeList.columns`) and the ``data``
    values by key (``missing`` where lacking). ``None``: a value of a type JSON does not give."""
    n = len(fields["id"])
    columns = {name: field_column(values) for name, values in fields.items()}
    for key, values in data.items():
        column = data_column(values, missing)
        if column is None:
            return None
        columns["data." + key] = column
    return evaluate(plan, columns, n)


def literal_kind(value: Any) -> int:
    """The kind code of a literal of an expression (``None``, bool, int, float or str)."""
    return _KIND_OF_TYPE[type(value)]


def evaluate(plan: tuple, columns: dict[str, Column], n: int) -> np.ndarray:
    """Bool ``(n,)``: the episodes the ``plan`` selects, given a :class:`Column` per name it reads."""
    op = plan[0]
    if op == "and" or op == "or":
        out = evaluate(plan[1][0], columns, n)
        for part in plan[1][1:]:
            out = (out & evaluate(part, columns, n)) if op == "and" else (out | evaluate(part, columns, n))
        return out
    if op == "not":
        return ~evaluate(plan[1], columns, n)
    col = columns[plan[1]]
    if op == "truthy":
        if col.values.dtype != object:
            return col.values.astype(bool)
        out = np.zeros(n, bool)
        present = ~col.missing()
        out[present] = col.values[present].astype(bool)
        return out
    assert op == "cmp"
    compare, lit = plan[2], plan[3]
    equal = _compare(col, "==" if compare in ("==", "!=") else compare, lit, n)
    return ~equal if compare == "!=" else equal


def _compare(col: Column, compare: str, lit: Any, n: int) -> np.ndarray:
    kind = literal_kind(lit)
    if compare != "==" and kind not in (NUMBER, STR):
        return np.zeros(n, bool)  # null and bools are never ordered
    same = col.of_kind(kind)
    if same is not None and not same.any():
        return np.zeros(n, bool)
    values = col.values if same is None else col.values[same]
    if kind == NULL:
        hit = np.ones(len(values), bool)
    else:
        if values.dtype != object and values.dtype != np.bool_ and not _exact(values, lit):
            values = values.astype(object)
        hit = np.asarray(_ORDER[compare](values, lit), bool)
    if same is None:
        return hit
    out = np.zeros(n, bool)
    out[same] = hit
    return out


def _exact(values: np.ndarray, lit: Any) -> bool:
    """An int64 ``values`` compared with ``lit`` in NumPy gives Python's answer (no float rounding)."""
    if isinstance(lit, int):
        return True  # NumPy compares int64 with any Python int exactly
    return not len(values) or int(np.abs(values).max()) <= _EXACT_FLOAT
