"""One recording to import: a rosbag2 folder (``metadata.yaml`` + sqlite3 ``.db3`` or ``.mcap`` files), or a
single ``.mcap`` / ``.db3`` file, opened with ``rosbags`` (pure Python; no ROS install).

Messages come out in log-time order as ``(topic, log time ns, CDR bytes)``. What ``rosbags`` refuses
because the recording was cut short (an MCAP file without its summary and footer, a folder without
``metadata.yaml``) is read up to where it stops (:mod:`~trajstore.interop.rosbag._mcap_records`), and
:attr:`BagSource.problem` says why; :meth:`BagSource.lost` compares what was read with what the bag
declared, :meth:`BagSource.read_all` says whether nothing was lost (a file cut after its last message).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from trajstore.errors import FormatError
from trajstore.interop.rosbag import _mcap_records

#: Largest ``metadata.yaml`` read (bytes): a bag of 1000 topics has one of ~1 MB.
MAX_METADATA_BYTES = 16 << 20
SUFFIXES = (".mcap", ".db3")


class RosbagWarning(UserWarning):
    """Something of a bag was not imported: a topic of an unsupported type, messages lost to a cut-short
    recording, a topic whose header stamps are unset (log times used), storage files of a bag folder that its
    ``metadata.yaml`` does not list."""


@dataclass
class BagSource:
    """An open recording. ``topics``: topic -> ROS type name; ``declared``: topic -> message count the bag's
    metadata (or MCAP summary) gives, when it gives one; ``problem``: why only a prefix could be read;
    ``whole_data``: the part cut off held no message (an MCAP file cut in its summary section); ``mixed``:
    topic -> its ROS type names, for a topic recorded with several types (one connection each)."""

    path: Path
    topics: dict[str, str]
    declared: dict[str, int]
    start_ns: int | None
    problem: str | None = None
    whole_data: bool = False
    read_counts: dict[str, int] = field(default_factory=dict)
    mixed: dict[str, list[str]] = field(default_factory=dict)
    _reader: Any = None
    _typestore: Any = None
    _prefix_files: list[Path] = field(default_factory=list)
    _channels: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)

    def deserialize(self, raw: bytes, msgtype: str, where: str) -> Any:
        """The message object of CDR bytes ``raw``. Raises FormatError naming ``where`` if they do not parse."""
        try:
            return self._typestore.deserialize_cdr(raw, msgtype)
        except Exception as exc:  # rosbags SerdeError, struct.error, IndexError on short data
            raise FormatError(f"{where}: cannot deserialize a {msgtype}: {type(exc).__name__}: {exc}") from None

    def messages(self, topics: set[str] | None = None, *, count: bool = True) -> Iterator[tuple[str, int, bytes]]:
        """``(topic, log time ns, raw)`` of every readable message of ``topics`` (default all), in log-time order
        (file order for a recording read past rosbags). A read error in the middle ends the iteration and is
        kept in :attr:`problem` (the messages before it are the readable prefix)."""
        wanted = set(self.topics) if topics is None else set(topics)
        if count:
            self.read_counts = {t: 0 for t in wanted}
        if self._reader is not None:
            conns = [c for c in self._reader.connections if c.topic in wanted]
            if not conns:
                return
            try:
                for conn, t, raw in self._reader.messages(connections=conns):
                    if count:
                        self.read_counts[conn.topic] += 1
                    yield conn.topic, int(t), raw
            except (FormatError, GeneratorExit):
                raise
            except Exception as exc:  # rosbags ReaderError, apsw/sqlite errors, zstd errors on damaged data
                if count:
                    self.problem = f"reading stopped at a damaged part: {type(exc).__name__}: {exc}"
            return
        for i, path in enumerate(self._prefix_files):
            gen = _mcap_records.scan(path, messages=True)
            for cid, t, raw in gen:
                topic = self._channels.get((i, cid), (None, None))[0]
                if topic in wanted:
                    if count:
                        self.read_counts[topic] += 1
                    yield topic, int(t), raw

    def lost(self) -> dict[str, int | None]:
        """Topic -> messages declared but not read by the last full :meth:`messages` (None: the bag declared no
        count, and reading stopped early), for topics that lost any."""
        out: dict[str, int | None] = {}
        for topic, n in self.read_counts.items():
            if topic in self.declared:
                if self.declared[topic] > n:
                    out[topic] = self.declared[topic] - n
            elif self.problem is not None and not self.whole_data:
                out[topic] = None
        return out

    def read_all(self) -> bool:
        """Whether the last full :meth:`messages` read every message of its topics: nothing went wrong, or
        what was cut off held no message, or the bag declares a count for each of them and none is missing."""
        if self.problem is None or self.whole_data:
            return not self.lost()
        return bool(self.read_counts) and all(t in self.declared for t in self.read_counts) and not self.lost()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def open_bag(path: str | Path) -> BagSource:
    """Open one recording (see the module docstring). Close it when done.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        FormatError: not a rosbag2 folder or ``.mcap``/``.db3`` file (names it and what was expected), a
            ``metadata.yaml`` above :data:`MAX_METADATA_BYTES`, a chunk declaring more than its record holds or
            the import's bounds, a file rosbags cannot open and that is not a cut-short MCAP file.
        ImportError: rosbags is not installed: ``pip install 'trajstore[ros]'``.
    """
    try:
        from rosbags.highlevel import AnyReader
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("importing ROS bags needs rosbags: pip install 'trajstore[ros]'") from exc
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such bag (a rosbag2 folder, or a .mcap or .db3 file)")
    files, meta = _storage_files(path)
    scans = {f.name: _scan_mcap(f) for f in files if f.suffix == ".mcap"}
    incomplete = [name for name, found in scans.items() if not found.complete]
    in_summary = [name for name in incomplete if scans[name].data_end]  # cut after their last message
    cut = [f for f in files if f.name in incomplete]
    unfinished = meta is None and path.is_dir()  # ros2 bag writes metadata.yaml last
    if unfinished and len(files) > 1:
        if any(f.suffix == ".db3" for f in files):
            raise FormatError(f"{path}: no metadata.yaml and several storage files; import the files one by one")
        cut = cut or files  # several MCAP files and no metadata: read them record by record, in name order
    if not cut:
        if unfinished:
            warnings.warn(RosbagWarning(f"{path}: the bag folder has no metadata.yaml (its recorder did not "
                                        f"finish); read from {files[0].name}"), stacklevel=3)
        reader = AnyReader([files[0] if unfinished else path], default_typestore=_default_typestore())
        try:
            reader.open()
        except Exception as exc:  # AnyReaderError, ReaderError, YAML errors
            raise FormatError(f"{path}: not a readable ROS 2 bag: {type(exc).__name__}: {exc}") from None
        topics = {c.topic: c.msgtype for c in reader.connections}
        declared = _declared(meta) if meta is not None else {}
        if meta is None:
            for c in reader.connections:
                declared[c.topic] = declared.get(c.topic, 0) + int(c.msgcount)
        start = int(reader.start_time) if reader.message_count else None
        return BagSource(path, topics, declared, start, None, _reader=reader, _typestore=reader.typestore,
                         mixed=_mixed((c.topic, c.msgtype) for c in reader.connections))
    before = [name for name in incomplete if name not in in_summary]
    problem = "; ".join(
        ([f"{', '.join(before)} {'ends' if len(before) == 1 else 'end'} without its MCAP summary (the recording "
          "was cut short)"] if before else [])
        + ([f"{', '.join(in_summary)} {'is' if len(in_summary) == 1 else 'are'} cut short in the MCAP summary "
            "section, after the last message"] if in_summary else [])
        + (["the bag folder has no metadata.yaml"] if unfinished else []))
    if any(f.suffix == ".db3" for f in files):
        raise FormatError(f"{path}: {problem}, and it mixes .db3 and .mcap files; import its files one by one")
    source = _prefix_source(path, files, meta, problem or "")
    source.whole_data = all(scans[f.name].complete or scans[f.name].data_end for f in files)
    return source


def _storage_files(path: Path) -> tuple[list[Path], dict | None]:
    """The storage files of a recording and its parsed ``metadata.yaml`` (None when there is none)."""
    if path.is_file():
        if path.suffix not in SUFFIXES:
            raise FormatError(f"{path}: not a ROS 2 bag (expected a rosbag2 folder, or a file ending in .mcap or .db3)")
        return [path], None
    meta_file = path / "metadata.yaml"
    if meta_file.is_file():
        meta = _metadata(meta_file)
        names = meta.get("relative_file_paths") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise FormatError(f"{meta_file}: relative_file_paths is not a list of file names")
        files = [path / Path(n).name for n in names]  # only names: never a path out of the folder
        if missing := [str(f) for f in files if not f.is_file()]:
            raise FormatError(f"{meta_file}: lists storage files that are not in the folder: {missing}")
        listed = {f.name for f in files}
        if unlisted := sorted(f.name for f in path.iterdir() if f.suffix in SUFFIXES and f.name not in listed):
            warnings.warn(RosbagWarning(
                f"{path}: {', '.join(unlisted)} {'is' if len(unlisted) == 1 else 'are'} in the bag folder but not "
                f"listed in its metadata.yaml, and not imported (to import one, pass the file itself: "
                f"{path / unlisted[0]})"), stacklevel=4)
        return files, meta
    files = sorted(f for f in path.iterdir() if f.suffix in SUFFIXES and f.is_file())
    if not files:
        raise FormatError(f"{path}: not a ROS 2 bag folder (no metadata.yaml, no .mcap or .db3 file)")
    return files, None


def _metadata(meta_file: Path) -> dict:
    from ruamel.yaml import YAML

    size = meta_file.stat().st_size
    if size > MAX_METADATA_BYTES:
        raise FormatError(f"{meta_file}: {size} bytes; a rosbag2 metadata.yaml of at most {MAX_METADATA_BYTES} "
                          "bytes is read")
    try:
        doc = YAML(typ="safe").load(meta_file.read_text(encoding="utf-8"))
        info = doc["rosbag2_bagfile_information"]
        if not isinstance(info, dict):
            raise TypeError("not a mapping")
        return info
    except Exception as exc:  # YAMLError, KeyError, TypeError, UnicodeDecodeError
        raise FormatError(f"{meta_file}: not a rosbag2 metadata.yaml: {type(exc).__name__}: {exc}") from None


def _declared(meta: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for entry in meta.get("topics_with_message_count") or []:
            name = str(entry["topic_metadata"]["name"])
            out[name] = out.get(name, 0) + int(entry["message_count"])
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"metadata.yaml: topics_with_message_count is malformed: {exc}") from None
    return out


def _scan_mcap(path: Path) -> _mcap_records.Scan:
    """What a scan of an MCAP file finds (whether it ends with its footer, whether its data section is
    whole); checks every declared size on the way (FormatError)."""
    gen = _mcap_records.scan(path)
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def _default_typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.LATEST)


def _prefix_source(path: Path, files: list[Path], meta: dict | None, problem: str) -> BagSource:
    """A recording read past rosbags: its MCAP files record by record."""
    channels: dict[tuple[int, int], tuple[str, str]] = {}
    schemas: dict[str, str] = {}
    start: int | None = None
    for i, f in enumerate(files):
        gen = _mcap_records.scan(f, messages=True)
        while True:  # schemas and channels come before their messages (rosbags puts them in the first chunk)
            try:
                _cid, t, _raw = next(gen)
            except StopIteration as stop:
                found = stop.value
                break
            start = t if start is None else min(start, t)
        for cid, ch in found.channels.items():
            schema = found.schemas.get(ch.schema_id)
            if schema is None:
                continue
            channels[(i, cid)] = (ch.topic, schema.name)
            if schema.encoding == "ros2msg" and schema.data:
                schemas[schema.name] = schema.data
    store = _typestore(tuple(sorted(schemas.items())), frozenset(msgtype for _, msgtype in channels.values()))
    topics = {topic: msgtype for topic, msgtype in channels.values()}
    declared = _declared(meta) if meta is not None else {}
    for entry in (meta or {}).get("topics_with_message_count") or []:  # topics cut off before their channel
        topics.setdefault(str(entry["topic_metadata"]["name"]), str(entry["topic_metadata"]["type"]))
    return BagSource(path, topics, declared, start, problem, _typestore=store, _prefix_files=list(files),
                     _channels=channels, mixed=_mixed(channels.values()))


def _mixed(connections: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Topic -> its type names (sorted), for the topics of ``(topic, type)`` connections with several types."""
    types: dict[str, set[str]] = {}
    for topic, msgtype in connections:
        types.setdefault(topic, set()).add(msgtype)
    return {topic: sorted(ts) for topic, ts in types.items() if len(ts) > 1}


@functools.lru_cache(maxsize=8)
def _typestore(schemas: tuple[tuple[str, str], ...], need: frozenset[str]) -> Any:
    """The typestore of a recording read past rosbags, from its ``(type name, ros2msg text)`` schemas: their
    definitions (each holds its dependencies) when they give every type of ``need``, as rosbags' AnyReader
    does, else the default store's with theirs over them. Kept for the next cut-short bag of the recorder."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    types: dict[str, Any] = {}
    for name, text in schemas:
        try:
            types.update(get_types_from_msg(text, name))
        except Exception:  # a definition rosbags cannot parse: the default store may know the type
            pass
    if not types:
        return get_typestore(Stores.LATEST)
    store = get_typestore(Stores.EMPTY)
    store.register(types if need <= types.keys() else {**get_typestore(Stores.LATEST).fielddefs, **types})
    return store
