"""Episode data (``end_episode(**data)``) as extra columns of a LeRobot export's ``meta/episodes`` parquet,
and back. LeRobot 0.4.4 loads these columns with the rest of ``meta/episodes`` (``ds.meta.episodes``) and
uses none of them.

Each data key ``k`` any exported episode has becomes the column ``episode_data/<k>`` (:data:`PREFIX`), one
cell per episode, null where the episode has no such key. Its encoding (kept in info.json's
``trajstore`` entry, see :mod:`~trajstore.interop.lerobot._trajstore_meta`):

- ``"bool"``, ``"int64"``, ``"float64"``, ``"string"``: a native column, when every episode that has the
  key holds a value of that one JSON type (``true``/``false``; an integer within int64; a number with a
  fraction or exponent, i.e. a Python float; a string);
- ``"json"``: otherwise (lists, objects, ``null``, mixed types, integers beyond int64): the value's JSON
  text (``json.dumps``, keys in their order), as a string column.

Decoding gives back the same Python values (``0`` stays ``0``, ``0.0`` stays ``0.0``, ``null`` stays
``None``; a missing key stays missing).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from trajstore.errors import FormatError

#: Column name prefix of episode data in ``meta/episodes``.
PREFIX = "episode_data/"
#: Encodings of a column, by the JSON type of its values.
NATIVE = {bool: "bool", int: "int64", float: "float64", str: "string"}
ENCODINGS = (*NATIVE.values(), "json")
INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True)
class DataColumn:
    """One data key's column: ``key`` (the data key), ``column`` (its name in ``meta/episodes``), ``encoding``."""

    key: str
    column: str
    encoding: str

    def to_json(self) -> dict[str, str]:
        return {"column": self.column, "encoding": self.encoding}


def _native(value: Any) -> str | None:
    encoding = NATIVE.get(type(value))
    if encoding == "int64" and not INT64[0] <= value <= INT64[1]:
        return None
    return encoding


def plan_columns(datas: Sequence[Mapping[str, Any]]) -> list[DataColumn]:
    """The columns of the episodes' data ``datas`` (one dict per exported episode), keys in first-seen order."""
    encodings: dict[str, str | None] = {}
    for data in datas:
        for key, value in data.items():
            enc = _native(value)
            if key not in encodings:
                encodings[key] = enc
            elif encodings[key] != enc:
                encodings[key] = None
    return [DataColumn(k, PREFIX + k, enc or "json") for k, enc in encodings.items()]


def arrays(columns: Sequence[DataColumn], datas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{column name: pyarrow array}`` of one cell per episode."""
    import pyarrow as pa

    types = {"bool": pa.bool_(), "int64": pa.int64(), "float64": pa.float64(), "string": pa.string(),
             "json": pa.string()}
    out = {}
    for c in columns:
        cells = [d.get(c.key, _MISSING) for d in datas]
        if c.encoding == "json":
            cells = [None if v is _MISSING else json.dumps(v, allow_nan=False) for v in cells]
        else:
            cells = [None if v is _MISSING else v for v in cells]
        out[c.column] = pa.array(cells, type=types[c.encoding])
    return out


_MISSING = object()


def decode(columns: Sequence[DataColumn], table: Mapping[str, list[Any]], rows: Sequence[int],
           where: str) -> list[dict[str, Any]]:
    """The data of episodes ``rows`` (row numbers of ``table``, ``{column: cells}``) as dicts.

    ``table`` may have a ``"file"`` list (the file of each row), then errors name the row's file.

    Raises:
        FormatError: a column is missing, or a cell is not of its encoding (not valid JSON text, nested
            deeper or with longer numbers than :func:`trajstore._json.loads_bounded` reads, a float
            where an int64 is declared...), or a value the buffer cannot keep as episode data (nested
            deeper than :data:`trajstore._json.MAX_STORED_DEPTH`, an integer over 128 bits): names
            ``where`` (or the row's file), the column and the row.
    """
    from trajstore._json import check_storable
    from trajstore.errors import InvalidValueError

    out: list[dict[str, Any]] = [{} for _ in rows]
    files = table.get("file")
    for c in columns:
        cells = table.get(c.column)
        if cells is None:
            raise FormatError(f"{where}: no column {c.column!r} (info.json's trajstore entry lists it)")
        for d, r in zip(out, rows):
            value = cells[r]
            if value is None:
                continue
            at = f"{files[r]}" if files is not None else where
            value = _decoded(value, c, at, r)
            try:
                d[c.key] = check_storable(value, c.key)
            except InvalidValueError as exc:
                raise FormatError(f"{at}: column {c.column!r} row {r}: not episode data the buffer can keep "
                                  f"({exc})") from None
    return out


def _decoded(value: Any, c: DataColumn, where: str, row: int) -> Any:
    if c.encoding == "json":
        from trajstore._json import loads_bounded

        if not isinstance(value, str):
            raise FormatError(f"{where}: column {c.column!r} row {row} is not JSON text")
        decoded = loads_bounded(value, source=f"{where}: column {c.column!r} row {row}")
        if _has_constant(decoded):
            raise FormatError(f"{where}: column {c.column!r} row {row} is not JSON text (NaN or Infinity)")
        return decoded
    want = {"bool": bool, "int64": int, "float64": float, "string": str}[c.encoding]
    if type(value) is not want or (want is float and not math.isfinite(value)):
        raise FormatError(f"{where}: column {c.column!r} row {row} holds {value!r:.60}, not a {c.encoding} value")
    return value


def _has_constant(value: Any) -> bool:
    """NaN or infinity anywhere in a decoded value (``json.loads`` reads ``NaN``, ``Infinity``, ``1e999``);
    iterative, the value being at most :data:`trajstore._json.MAX_DEPTH` deep."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return True
        if isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
    return False
