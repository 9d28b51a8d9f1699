"""Parquet tables of a LeRobot v3.0 export, typed as lerobot 0.4.4 writes them (read from its own files
with pyarrow; see ``shared/fixtures/lerobot_v3_sim``):

- ``data/chunk-XXX/file-YYY.parquet``: one column per non-video feature, then ``timestamp`` (float32),
  ``frame_index``, ``episode_index``, ``index``, ``task_index`` (int64); a vector is
  ``fixed_size_list<element: T>[n]``, a scalar a plain ``T`` column, an image ``struct<bytes: binary,
  path: string>`` holding a PNG; schema metadata ``huggingface`` names the ``datasets`` feature types;
  one row group per episode.
- ``meta/episodes/chunk-000/file-000.parquet``: one row per episode (:func:`episodes_table`).
- ``meta/tasks.parquet``: ``task_index`` (int64) with the task text as a pandas index
  (``__index_level_0__``, large_string, plus the ``pandas`` schema metadata ``pd.read_parquet`` uses).

Snappy compression, pyarrow's default, as in LeRobot's files.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from trajstore.interop.lerobot._export_features import Feature
from trajstore.interop.lerobot._export_stats import STAT_NAMES, Stats

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def _nested_list(inner: pa.DataType, depth: int) -> pa.DataType:
    for _ in range(depth):
        inner = pa.list_(pa.field("element", inner))
    return inner


def column_type(feature: Feature) -> pa.DataType:
    """Arrow type of a data column (not for video features, which have none)."""
    if feature.dtype == "image":
        return IMAGE_TYPE
    if feature.dtype == "string":
        return pa.string()
    value = pa.from_numpy_dtype(np.dtype(feature.dtype))
    if feature.shape == (1,):
        return value
    return pa.list_(pa.field("element", value), feature.shape[0])


def _hf_type(feature: Feature) -> dict[str, Any]:
    if feature.dtype == "image":
        return {"_type": "Image"}
    value = {"dtype": feature.dtype, "_type": "Value"}
    if feature.shape == (1,):
        return value
    return {"feature": value, "length": feature.shape[0], "_type": "List"}


def data_schema(features: Sequence[Feature]) -> pa.Schema:
    """Schema of the data files: the non-video ``features`` (index columns included), in order."""
    stored = [f for f in features if f.dtype != "video"]
    hf = {"info": {"features": {f.key: _hf_type(f) for f in stored}}}
    return pa.schema([pa.field(f.key, column_type(f)) for f in stored],
                     metadata={"huggingface": json.dumps(hf)})


def data_column(feature: Feature, values: Any) -> pa.Array:
    """One episode's column: ``values`` is ``(N,)`` / ``(N, n)`` numbers, ``N`` strings, or for an image
    feature a list of ``{"bytes": png, "path": name}``."""
    typ = column_type(feature)
    if feature.dtype in ("image", "string"):
        return pa.array(list(values), type=typ)
    arr = np.ascontiguousarray(values, dtype=np.dtype(feature.dtype))
    if feature.shape == (1,):
        return pa.array(arr.reshape(-1), type=typ)
    return pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1), type=typ.value_type), type=typ)


def _stat_type(feature: Feature, stat: str) -> pa.DataType:
    if stat == "count":
        return _nested_list(pa.int64(), 1)
    if feature.is_camera:
        return _nested_list(pa.float64(), 3)
    if stat in ("min", "max") and np.dtype(feature.dtype).kind in "iu":
        return _nested_list(pa.int64(), 1)
    return _nested_list(pa.float64(), 1)


def episodes_table(rows: Sequence[dict[str, Any]], features: Sequence[Feature], video_keys: Sequence[str],
                   stats: Sequence[dict[str, Stats]]) -> pa.Table:
    """``meta/episodes`` rows: ``rows[e]`` holds ``episode_index``, ``tasks`` (list of str), ``length``,
    ``data/chunk_index``, ``data/file_index``, ``dataset_from_index``, ``dataset_to_index``, per video
    key ``videos/<key>/chunk_index``, ``file_index``, ``from_timestamp``, ``to_timestamp`` (s); ``stats[e]``
    maps each feature key with statistics to its :mod:`~._export_stats` figures."""
    int64, tasks = pa.int64(), _nested_list(pa.string(), 1)
    fields = [("episode_index", int64), ("tasks", tasks), ("length", int64), ("data/chunk_index", int64),
              ("data/file_index", int64), ("dataset_from_index", int64), ("dataset_to_index", int64)]
    for key in video_keys:
        fields += [(f"videos/{key}/chunk_index", int64), (f"videos/{key}/file_index", int64),
                   (f"videos/{key}/from_timestamp", pa.float64()), (f"videos/{key}/to_timestamp", pa.float64())]
    columns = {name: pa.array([r[name] for r in rows], type=typ) for name, typ in fields}
    for f in features:
        if not f.has_stats:
            continue
        for stat in STAT_NAMES:
            columns[f"stats/{f.key}/{stat}"] = pa.array([s[f.key][stat].tolist() for s in stats],
                                                        type=_stat_type(f, stat))
    zeros = pa.array(np.zeros(len(rows), np.int64))  # one metadata file: chunk 0, file 0
    columns["meta/episodes/chunk_index"] = columns["meta/episodes/file_index"] = zeros
    return pa.table(columns)


def tasks_table(tasks: Sequence[str]) -> pa.Table:
    """``meta/tasks.parquet``: task ``k`` of ``tasks`` has ``task_index`` k."""
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "str",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                     "numpy_type": "int64", "metadata": None},
                    {"name": None, "field_name": "__index_level_0__", "pandas_type": "object", "numpy_type": "str",
                     "metadata": None}],
        "attributes": {}, "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "3.1.1",
    }
    schema = pa.schema([("task_index", pa.int64()), ("__index_level_0__", pa.large_string())],
                       metadata={"pandas": json.dumps(pandas_meta)})
    return pa.table({"task_index": pa.array(np.arange(len(tasks), dtype=np.int64)),
                     "__index_level_0__": pa.array(list(tasks), type=pa.large_string())}, schema=schema)
