"""What a LeRobot dataset declares, checked against bounds and against its files before anything is
allocated: the path templates of ``meta/info.json``, the per-frame size of each feature, and each
episode's ``length`` against the rows of its data file.

A hostile or damaged ``info.json`` or ``meta/episodes`` file could otherwise ask for a gigantic
allocation (a ``{file_index:>1000000000}`` template width, a feature shape ``[100000, 100000]``, an
episode ``length`` of ``2**40``); each of these is a :class:`~trajstore.errors.FormatError` naming the
file instead.
"""

from __future__ import annotations

import math
import re
import string
from pathlib import Path
from typing import Any, Iterable

from trajstore.errors import FormatError

#: Most values one frame of one feature may hold (about 67 M: a 4K RGB frame is 25 M). The spaces
#: and blocks of the import are allocated at this size, so a declared shape is checked against it first.
MAX_FRAME_VALUES = 1 << 26
#: Widest field a path template may ask for (``{file_index:03d}`` asks for 3).
MAX_TEMPLATE_WIDTH = 32
#: Most rows a data file may declare per byte it holds. Each LeRobot frame has its own ``index`` and
#: ``timestamp``, a few bytes however the file is encoded; a footer declaring more rows than this is
#: damaged or crafted to make the reader allocate them.
MAX_ROWS_PER_BYTE = 16


def check_template(template: str, fields: Iterable[str], info_path: Path, name: str) -> None:
    """Refuse a path template of ``info.json`` (``data_path``, ``video_path``) that names other fields
    than ``fields`` (attribute or index access included), nests fields, or asks for a width or precision
    above :data:`MAX_TEMPLATE_WIDTH`.

    Raises:
        FormatError: names ``info_path``, ``name`` and what is wrong.
    """
    allowed = set(fields)
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise FormatError(f"{info_path}: {name} {template!r} is not a path template: {exc}") from None
    for _, field, spec, _conversion in parts:
        if field is None:
            continue
        if field not in allowed:
            raise FormatError(f"{info_path}: {name} {template!r} names the field {{{field}}}; a LeRobot path "
                              f"template fills only {sorted(allowed)}")
        if spec and ("{" in spec or any(int(n) > MAX_TEMPLATE_WIDTH for n in re.findall(r"\d+", spec))):
            raise FormatError(f"{info_path}: {name} {template!r} asks for the format {spec!r}; widths and "
                              f"precisions up to {MAX_TEMPLATE_WIDTH} are accepted")


def check_frame_values(shape: tuple[int, ...], where: str) -> None:
    """Refuse a per-frame shape of more than :data:`MAX_FRAME_VALUES` values (``where`` names the feature)."""
    values = math.prod(shape)
    if values > MAX_FRAME_VALUES:
        raise FormatError(f"{where}: shape {list(shape)} is {values} values per frame; at most "
                          f"{MAX_FRAME_VALUES} are imported")


def _leaves(arrow_type: Any) -> int:
    """Parquet leaf columns one arrow field of this type is stored as."""
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return sum(_leaves(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_map(arrow_type):
        return _leaves(arrow_type.key_type) + _leaves(arrow_type.item_type)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        return _leaves(arrow_type.value_type)
    return 1


class DataFileSizes:
    """Rows of each data parquet file and values of its numeric columns, from the file's footer only."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[int, dict[str, int]]] = {}

    def of(self, path: Path) -> tuple[int, dict[str, int]]:
        """``(rows, {column: values stored})`` of ``path``; a column stored as several leaves (a struct) is
        left out.

        Raises:
            FormatError: the footer cannot be read, or declares more than :data:`MAX_ROWS_PER_BYTE` rows per
                byte of the file (names the file).
        """
        if path not in self._known:
            import pyarrow.parquet as pq

            try:
                meta = pq.ParquetFile(path).metadata
                schema = meta.schema.to_arrow_schema()
                values: dict[str, int] = {}
                leaf = 0
                for field in schema:
                    n = _leaves(field.type)
                    if n == 1:
                        values[field.name] = sum(meta.row_group(g).column(leaf).num_values
                                                 for g in range(meta.num_row_groups))
                    leaf += n
                size = path.stat().st_size
                if meta.num_rows > MAX_ROWS_PER_BYTE * size:
                    raise FormatError(f"LeRobot data: {path} declares {meta.num_rows} rows in {size} bytes; at most "
                                      f"{MAX_ROWS_PER_BYTE} rows per byte are read")
                self._known[path] = (int(meta.num_rows), values)
            except FormatError:
                raise
            except Exception as exc:  # ArrowInvalid, OSError: a damaged footer
                raise FormatError(f"LeRobot data: cannot read {path}: {type(exc).__name__}: {exc}") from None
        return self._known[path]


def check_sizes(entries: Iterable[Any], numeric: Iterable[Any], sizes: DataFileSizes | None = None) -> None:
    """Check the selected episodes (:class:`~trajstore.interop.lerobot._source.EpisodeEntry`) against
    their data files: each file holds at least the summed ``length`` of its episodes in rows, and each
    numeric feature's column holds at least ``rows * prod(shape)`` values.

    Raises:
        FormatError: names the data file, and the episode or the feature's column.
    """
    sizes = sizes or DataFileSizes()
    numeric = list(numeric)
    claimed: dict[Path, int] = {}
    for entry in entries:
        rows, values = sizes.of(entry.data_file)
        if entry.data_file not in claimed:
            for f in numeric:
                need = rows * math.prod(f.shape)
                if f.key not in values:
                    raise FormatError(f"LeRobot data: {entry.data_file} has no column {f.key!r} of one value per "
                                      f"element (info.json lists it with shape {list(f.shape)})")
                if values[f.key] < need:
                    raise FormatError(f"LeRobot data: {entry.data_file} holds {values[f.key]} values of column "
                                      f"{f.key!r}, fewer than its {rows} rows of shape {list(f.shape)} need ({need})")
        claimed[entry.data_file] = claimed.get(entry.data_file, 0) + entry.length
        if claimed[entry.data_file] > rows:
            raise FormatError(f"LeRobot episode {entry.index}: {entry.listed_in or 'meta/episodes'} gives it length "
                              f"{entry.length}, but its "
                              f"data file {entry.data_file} has {rows} rows for the episodes it holds "
                              f"({claimed[entry.data_file]} frames claimed)")
