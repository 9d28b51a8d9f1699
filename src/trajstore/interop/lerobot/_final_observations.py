"""Final observations (``end_episode(final_observation=...)``, the observation after an episode's last
step) in a side file of a LeRobot export, :data:`FINALS_PATH`, and back. LeRobot 0.4.4 reads only
``meta/info.json``, ``meta/stats.json``, ``meta/tasks.parquet``, ``meta/episodes/*/*.parquet``,
``data/`` and ``videos/``: it never opens this file.

The file is a parquet table, one row (and one row group) per exported episode that has a final
observation: ``episode_index`` (int64, LeRobot's), then one column per exported feature whose leaf is
under ``observation`` (named by the feature key), typed as in the data parquet (a scalar a plain
column, a vector ``fixed_size_list``, text a string) except that cameras are always PNG bytes
(``struct<bytes: binary, path: string>``, exact), whatever the export's ``camera``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from trajstore.errors import FormatError
from trajstore.spaces.tree import get

#: Where the side file is, relative to the dataset folder.
FINALS_PATH = "meta/trajstore/final_observations.parquet"
#: The step space key whose value a final observation is.
OBSERVATION = "observation"
#: Slack on a row group's uncompressed size over the raw size of its values (PNG of noise, parquet pages).
SIZE_SLACK = 2
SIZE_SLACK_BYTES = 1 << 20


def observation_features(features: Sequence[Any]) -> list[Any]:
    """The features whose leaf path starts with ``"observation"`` (a final observation's leaves)."""
    return [f for f in features if f.path and f.path[0] == OBSERVATION]


def _as_stored(feature: Any) -> Any:
    return dataclasses.replace(feature, dtype="image") if feature.is_camera else feature


def write_final_observations(root: Path, episodes: Sequence[tuple[int, Any]], read: Callable[[Any], Any],
                             features: Sequence[Any]) -> bool:
    """Write :data:`FINALS_PATH` under ``root`` for ``episodes``: ``(LeRobot episode_index, handle)`` pairs, in
    order, where ``read(handle)`` gives the final observation (a value of the observation subspace, no batch
    axis; read one at a time).

    ``features`` are the export's (:class:`~trajstore.interop.lerobot._export_features.Feature`). Writes
    nothing and returns False when there is no pair or no observation feature.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajstore.interop.lerobot._export_episode import png_bytes
    from trajstore.interop.lerobot._export_parquet import column_type, data_column

    obs = [_as_stored(f) for f in observation_features(features)]
    if not episodes or not obs:
        return False
    path = root / FINALS_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([pa.field("episode_index", pa.int64())] + [pa.field(f.key, column_type(f)) for f in obs])
    with pq.ParquetWriter(path, schema) as writer:
        for index, handle in episodes:
            value = read(handle)
            arrays = [pa.array([index], pa.int64())]
            for f in obs:
                leaf = np.asarray(get(value, f.path[1:]))
                if f.dtype == "image":
                    leaf = f.frames(leaf)  # (H, W, 3): a CHW leaf transposed
                    arrays.append(data_column(f, [{"bytes": png_bytes(leaf), "path": f"final-{index:06d}.png"}]))
                elif f.dtype == "string":
                    arrays.append(data_column(f, [str(leaf.reshape(()))]))
                else:
                    arrays.append(data_column(f, leaf.reshape(1, -1) if f.shape != (1,) else leaf.reshape(1)))
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
    return True


class FinalObservations:
    """Reads :data:`FINALS_PATH` of a dataset one row group at a time.

    Args:
        path: the file (checked to be inside the dataset folder by the caller).
        features: the import's :class:`~trajstore.interop.lerobot._source.Feature` objects of the
            observation leaves (their ``key`` names the column, ``path[1:]`` the place in the value).

    Raises:
        FormatError: the file cannot be read, lacks ``episode_index`` or a feature's column, names an
            episode twice, or a row group is not one row or is bigger than its values can be (names the file).
    """

    def __init__(self, path: Path, features: Sequence[Any]) -> None:
        import pyarrow.parquet as pq

        self.path, self.features = path, list(features)
        try:
            self._file = pq.ParquetFile(path)
            meta = self._file.metadata
            names = self._file.schema_arrow.names
            index = self._file.read(columns=["episode_index"]).column(0).to_pylist() \
                if "episode_index" in names else None
        except Exception as exc:  # ArrowInvalid, OSError
            raise FormatError(f"{path}: cannot read the final observations: {type(exc).__name__}: {exc}") from None
        missing = [f.key for f in self.features if f.key not in names]
        if index is None or missing:
            raise FormatError(f"{path}: no column {'episode_index' if index is None else ', '.join(missing)}")
        if not all(isinstance(i, int) for i in index) or len(set(index)) != len(index):
            raise FormatError(f"{path}: episode_index must hold distinct integers")
        raw = sum(math.prod(f.shape) * (1 if f.is_camera else 8) for f in self.features)
        bound = SIZE_SLACK * raw + SIZE_SLACK_BYTES
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows != 1 or group.total_byte_size > bound:
                raise FormatError(f"{path}: row group {g} holds {group.num_rows} rows, {group.total_byte_size} "
                                  f"bytes; a final observation is one row of at most {bound} bytes")
        self._group_of = {int(i): g for g, i in enumerate(index)}

    def get(self, episode_index: int, root: Path) -> Any:
        """The final observation of LeRobot episode ``episode_index`` (nested like ``rb[i]["observation"]``),
        or None when the file has none for it.

        Raises:
            FormatError: a value of another size than its feature, an undecodable PNG (names the file).
        """
        from trajstore.interop.lerobot._frames import array_values, decode_image

        g = self._group_of.get(int(episode_index))
        if g is None:
            return None
        where = f"{self.path} (episode {episode_index})"
        try:
            table = self._file.read_row_group(g, columns=[f.key for f in self.features])
        except Exception as exc:
            raise FormatError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from None
        out: dict[str, Any] = {}
        value: Any = out
        for f in self.features:
            if f.is_camera:
                leaf = f.to_leaf(decode_image(table.column(f.key)[0].as_py(), f, root, where))
            else:
                leaf = array_values(table, f, where)[0]
            if len(f.path) == 1:  # the observation is a leaf itself
                value = leaf
                continue
            node = out
            for part in f.path[1:-1]:
                node = node.setdefault(part, {})
            node[f.path[-1]] = leaf
        return value
