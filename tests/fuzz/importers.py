"""Hostile inputs to the LeRobot and zarr importers: the datasets, the edits made to their files, and
a runner that imports each edited dataset in a child process with bounded memory and time.

The edits are the damaged-file mutations of :mod:`tests.fuzz.damage` (truncations, bit flips) and
structured ones a hostile writer would make: a JSON value replaced by a huge number, a path out of the
folder, a wrong type, a deep nest (:class:`JsonEdit`); a key such as ``self`` or ``interrupted`` added
to an object; a parquet cell replaced the same way, or a column dropped (:class:`ParquetEdit`).

Every case must end in a clean import (that reads back) or a FormatError / InvalidValueError naming
the edited file (or its folder, or the dataset), with nothing left at the output path: never another
exception, a ``MemoryError`` (the child's address space is limited), a crash or a hang.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fuzz.damage import Mutation, plan_mutations
from tests.fuzz.runner import ROOT, Child, Result, _replace

LEROBOT_FIXTURE = ROOT / "tests" / "fixtures" / "lerobot_v3_sim"
#: The LeRobot files edited (the AV1 video is left alone: its decoder's robustness is not the importer's).
LEROBOT_FILES = ("meta/info.json", "meta/episodes/chunk-000/file-000.parquet", "data/chunk-000/file-000.parquet",
                 "meta/tasks.parquet")
#: Address space the child may map beyond what one import of the unchanged dataset mapped.
HEADROOM = 1 << 30

_DELETE = "<delete>"
_DEEP: Any = []
for _ in range(300):
    _DEEP = [_DEEP]
#: Values a hostile JSON file puts anywhere.
JSON_VALUES = (2**40, -1, 0, 10**30, 1.5, float("nan"), None, True, False, "", "no", "../../outside.png",
               "/etc/passwd", "data/{file_index:>1000000000}.parquet", [], [100000, 100000], [2**40], {},
               {"a": {"b": 1}}, _DEEP, _DELETE)
#: Keys a hostile JSON object gains.
JSON_KEYS = ("self", "interrupted", "final_observation", "flush", "__class__")
#: Values a hostile parquet cell holds.
CELL_VALUES = (2**40, -1, 2**63 - 1, None, float("nan"), float("inf"), "x", {"bytes": None, "path": "../../x.png"},
               {"bytes": None, "path": "/etc/passwd"}, {"bytes": b"not an image", "path": None}, [1e30] * 7)


def _nodes(value: Any, pointer: tuple = ()) -> list[tuple]:
    """Pointers (tuples of keys / indices) to every value inside ``value``, ``value`` itself first."""
    out = [pointer]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _nodes(v, (*pointer, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _nodes(v, (*pointer, i))
    return out


@dataclass(frozen=True)
class JsonEdit:
    """Set the value at ``pointer`` to ``value`` (or delete it), or add ``key`` to the object there."""

    path: str
    pointer: tuple
    value: Any = None
    key: str | None = None

    def apply(self, data: bytes) -> bytes:
        doc = json.loads(data)
        if self.key is not None:
            node = doc
            for p in self.pointer:
                node = node[p]
            node[self.key] = self.value
        elif not self.pointer:
            doc = self.value if self.value is not _DELETE else None
        else:
            node = doc
            for p in self.pointer[:-1]:
                node = node[p]
            if self.value == _DELETE:
                del node[self.pointer[-1]]
            else:
                node[self.pointer[-1]] = self.value
        return json.dumps(doc).encode()

    def __str__(self) -> str:
        shown = "deep nest" if self.value is _DEEP else repr(self.value)[:60]
        if self.key is not None:
            return f"{self.path}: key {self.key!r} = {shown} added at {list(self.pointer)}"
        return f"{self.path}: {list(self.pointer)} = {shown}"


@dataclass(frozen=True)
class ParquetEdit:
    """Set cell ``row`` of ``column`` to ``value`` (the column's type kept if the value fits it, else
    inferred from the values), or drop the column (``row`` None)."""

    path: str
    column: str
    row: int | None = None
    value: Any = None

    def apply(self, data: bytes) -> bytes:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(pa.BufferReader(data))
        i = table.column_names.index(self.column)
        if self.row is None:
            table = table.remove_column(i)
        else:
            values = table.column(i).to_pylist()
            values[self.row % len(values)] = self.value
            try:
                column = pa.array(values, table.schema.field(i).type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                try:
                    column = pa.array(values)
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                    return data  # no arrow type holds these values: the case stays the unchanged file
            table = table.set_column(i, pa.field(self.column, column.type), column)
        out = io.BytesIO()
        pq.write_table(table, out)
        return out.getvalue()

    def __str__(self) -> str:
        if self.row is None:
            return f"{self.path}: column {self.column!r} dropped"
        return f"{self.path}: {self.column!r}[{self.row}] = {repr(self.value)[:60]}"


def json_edits(folder: Path, rel: str, n: int, rng: random.Random) -> list[JsonEdit]:
    """``n`` seeded edits of the JSON file ``rel``: values replaced at random nodes, keys added to objects."""
    doc = json.loads((folder / rel).read_text())
    nodes = _nodes(doc)
    objects = [p for p in nodes if isinstance(_at(doc, p), dict)]
    out: list[JsonEdit] = []
    for _ in range(n):
        if objects and rng.random() < 0.2:
            out.append(JsonEdit(rel, rng.choice(objects), rng.choice(JSON_VALUES[:5]), key=rng.choice(JSON_KEYS)))
        else:
            out.append(JsonEdit(rel, rng.choice(nodes), rng.choice(JSON_VALUES)))
    return out


def _at(doc: Any, pointer: tuple) -> Any:
    for p in pointer:
        doc = doc[p]
    return doc


def parquet_edits(folder: Path, rel: str, n: int, rng: random.Random) -> list[ParquetEdit]:
    """Each column of ``rel`` dropped, and ``n`` seeded cell edits."""
    import pyarrow.parquet as pq

    table = pq.read_table(folder / rel)
    columns = table.column_names
    out = [ParquetEdit(rel, c) for c in columns]
    out += [ParquetEdit(rel, rng.choice(columns), rng.randrange(table.num_rows), rng.choice(CELL_VALUES))
            for _ in range(n)]
    return out


def plan_hostile(folder: Path, files: list[str], *, structured: int, flips: int, seed: int = 0) -> list:
    """Truncations and ``flips`` bit flips of each of ``files``, and ``structured`` JSON or parquet edits of each."""
    rng = random.Random(seed)
    out: list = [m for m in plan_mutations(folder, flips_per_file=flips, seed=seed) if m.path in files]
    for rel in files:
        if rel.endswith(".parquet"):
            out += parquet_edits(folder, rel, structured, rng)
        elif rel.endswith(("json", ".zattrs", ".zarray", ".zgroup")):
            out += json_edits(folder, rel, structured, rng)
    return out


def make_lerobot(folder: Path) -> Path:
    """A copy of the LeRobot-written fixture at ``folder``."""
    return Path(shutil.copytree(LEROBOT_FIXTURE, folder))


def make_zarr(folder: Path) -> Path:
    """A zarr group :func:`~trajstore.interop.zarr.export_zarr` wrote (JPEG 2000 frames, 3 episodes with
    data, one interrupted) at ``folder``."""
    from tests.integrations.zarr_helpers import make_buffer
    from trajstore.interop.zarr import export_zarr

    make_buffer(folder.with_name(folder.name + ".buffer"))
    export_zarr(folder.with_name(folder.name + ".buffer"), folder, progress=False)
    shutil.rmtree(folder.with_name(folder.name + ".buffer"))
    return folder


#: The zarr arrays whose files are edited: a camera (JPEG 2000 chunks), a bounded float leaf, the episode ends.
ZARR_ARRAYS = ("data/observation.pixels", "data/action", "meta/episode_ends")


def zarr_files(folder: Path, arrays: tuple[str, ...] = ZARR_ARRAYS) -> list[str]:
    """The group's own metadata files, and those of ``arrays`` with each one's first chunk; relative, sorted."""
    files = [str(p.relative_to(folder)) for p in folder.rglob(".z*") if p.name in (".zgroup", ".zattrs")
             and p.parent.name in ("", folder.name, "data", "meta")]
    for array in arrays:
        chunks = sorted(p.name for p in (folder / array).iterdir() if not p.name.startswith("."))
        files += [f"{array}/{name}" for name in (".zarray", ".zattrs", *chunks[:1]) if (folder / array / name).exists()]
    return sorted(set(files))


class ImportChild(Child):
    """A child running ``tests.fuzz._import_child`` (see there) instead of the buffer reader."""

    def __init__(self, fmt: str, src: Path, pristine: Path, headroom: int = HEADROOM):  # noqa: D107
        read_fd, write_fd = os.pipe()
        env = {**os.environ, "MALLOC_ARENA_MAX": "2",
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz._import_child", fmt, str(src), str(pristine),
                                      str(write_fd), str(headroom)],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     pass_fds=(write_fd,), cwd=ROOT, env=env, text=True)
        os.close(write_fd)
        self.results = os.fdopen(read_fd, "r")
        self._buf = ""


def run_imports(fmt: str, src: Path, pristine: Path, mutations: list, *, timeout: float = 60.0) -> list[Result]:
    """Apply each mutation to a file of ``src`` in turn, import ``src`` in the child, restore the file."""
    results: list[Result] = []
    child: ImportChild | None = None
    originals: dict[str, bytes] = {}
    try:
        for case, mutation in enumerate(mutations):
            path = src / mutation.path
            original = originals.setdefault(mutation.path, path.read_bytes())
            _replace(path, mutation.apply(original))
            try:
                if child is None:
                    child = ImportChild(fmt, src, pristine)
                got = child.run(case, timeout)
                if got is None:
                    alive = child.proc.poll() is None
                    status, stderr = child.stop()
                    child = None
                    results.append(Result(mutation, "hang" if alive else "crash", {"status": status, "stderr": stderr}))
                else:
                    results.append(Result(mutation, got["outcome"], got))
            finally:
                _replace(path, original)
    finally:
        if child is not None:
            child.stop()
    return results


def import_failures(src: Path, results: list[Result]) -> list[str]:
    """One line per result that is neither a clean import nor a FormatError / InvalidValueError naming the
    edited file, its folder or the dataset, with nothing left at the output path."""
    bad = []
    for r in results:
        d = r.detail
        if r.outcome == "ok":
            continue
        if r.outcome in ("crash", "hang"):
            bad.append(f"{r.mutation}: {r.outcome} (exit status {d['status']}): {d['stderr'][-300:]}")
            continue
        names = [r.mutation.path, str(Path(r.mutation.path).parent), str(src)]
        if not d["allowed"]:
            bad.append(f"{r.mutation}: {d['type']}: {d['message'][:300]} at {d['where']}")
        elif not any(n in d["message"] for n in names if n != "."):
            bad.append(f"{r.mutation}: {d['type']} does not name {names}: {d['message'][:300]}")
        if d.get("left_behind"):
            bad.append(f"{r.mutation}: a failed import left {d['left_behind']}")
    return bad


__all__ = ["JsonEdit", "Mutation", "ParquetEdit", "import_failures", "make_lerobot", "make_zarr", "plan_hostile",
           "run_imports", "zarr_files", "ZARR_ARRAYS"]
