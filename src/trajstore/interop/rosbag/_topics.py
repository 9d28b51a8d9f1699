"""Which topics of the bags become which streams, with which space, and the bags' messages as blocks of
stream samples ``(t_ns (N,) int64, values with leading N)``.

A stream's space comes from the first message of its topic (in the first bag that has one), its
``fps`` metadata from the topic's first timestamps there (:func:`measured_fps`, :data:`PROBE_MESSAGES`).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from trajstore.errors import FormatError
from trajstore.interop.rosbag._messages import KINDS, MessageKind, header_stamp_ns
from trajstore.interop.rosbag._source import BagSource, RosbagWarning, open_bag
from trajstore.spaces import Space

#: Messages of a topic read up front to measure its rate: at most this many, and none past
#: :data:`PROBE_SECONDS` after the first (the rate's error is about the timing jitter over that span).
PROBE_MESSAGES = 1024
PROBE_SECONDS = 5.0
#: Samples of one stream handed to the buffer at a time: at most :data:`BLOCK_SAMPLES`, and a block ends
#: once it holds :data:`BLOCK_BYTES` (19 frames of 480 x 640 x 3). The buffer's write-behind queue holds at
#: most 256 MB per stream on top (``trajstore.replay_buffer.staging.MAX_PENDING_BYTES``).
BLOCK_SAMPLES = 256
BLOCK_BYTES = 16 << 20
STAMPS = ("header", "log")
RESERVED = ("timestamp", "is_pad")


@dataclass(frozen=True)
class TopicPlan:
    """How one topic is imported: into stream ``name`` of space ``space``; ``use_header``: its samples are
    timed by ``header.stamp`` (else by log time)."""

    topic: str
    msgtype: str
    name: str
    space: Space
    use_header: bool
    kind: MessageKind


def stream_name(topic: str) -> str:
    """A stream name for a topic: ``"/camera/image_raw"`` -> ``"camera.image_raw"`` (``/`` -> ``.``, other
    characters than letters, digits, ``_ - .`` -> ``_``; ``timestamp``/``is_pad`` get a trailing ``_``)."""
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", topic.strip("/").replace("/", ".")) or "topic"
    if name in (".", ".."):  # not a folder name; "/.." -> "__"
        name = "_" * len(name)
    return name + "_" if name in RESERVED else name


def name_clash_message(clashes: Mapping[str, Sequence[str]]) -> str:
    """The error for topics that would share a stream: ``{stream name: [topic, ...]}`` -> which topics
    clash and how to name them apart, in Python (``topics=``) and on the command line (``--topic``)."""
    what = "; ".join(f"topics {', '.join(ts)} would all be the stream {name!r}" for name, ts in clashes.items())
    rename = [t for ts in clashes.values() for t in ts[1:]]
    python = ", ".join(f"{t!r}: 'NAME'" for t in rename)
    cli = " ".join(f"--topic {t}=NAME" for t in rename)
    return f"several topics become one stream: {what}. Name them apart: topics={{{python}}} (command line: {cli})"


def measured_fps(t_ns: np.ndarray) -> float | None:
    """The nominal rate of samples at ``t_ns`` in Hz, or None with fewer than two distinct times.

    The median period gives a first guess ``p``; a gap counts as ``floor(gap / p + 0.2)`` periods (at least
    one: a dropped sample makes a gap of about two; timing jitter under 80% of a period is not a drop), and
    the rate is the periods counted over the time spanned, rounded to 0.01 Hz and snapped to the nearest
    integer within 1%. Jitter averages out over the span.
    """
    t = np.asarray(t_ns, dtype=np.int64)
    d = np.diff(t)
    d = d[d > 0]
    if not d.size:
        return None
    periods = np.maximum(np.floor(d / float(np.median(d)) + 0.2), 1).sum()
    fps = 1e9 * float(periods) / float(d.sum())
    near = round(fps)
    if near and abs(fps - near) <= 0.01 * near:
        return float(near)
    return round(fps, 2)


def as_topic_map(topics: Mapping[str, str | None] | Iterable[str] | None) -> dict[str, str | None] | None:
    """``topics`` of the import as ``{topic: stream name or None}`` (a list of topics: default names)."""
    if topics is None:
        return None
    if isinstance(topics, Mapping):
        return dict(topics)
    if isinstance(topics, str):
        raise TypeError("topics must be a mapping {topic: stream name} or a list of topics, not a string")
    return {t: None for t in topics}


def choose_topics(sources: Sequence[BagSource], topics: Mapping[str, str | None] | None,
                  only: bool) -> dict[str, tuple[str, str]]:
    """``{topic: (ROS type, stream name)}`` to import, in the order the bags list them.

    Raises:
        ValueError: a listed topic no bag has, two topics given one stream name, ``only`` without ``topics``,
            an invalid stream name.
        FormatError: a topic with different types in different bags or in one bag (two connections), a listed
            topic of a type not imported.
    """
    from trajstore.streams.folder import check_name

    topics = dict(topics or {})
    if only and not topics:
        raise ValueError("only=True imports the listed topics, but no topic is listed")
    found: dict[str, str] = {}
    for src in sources:
        for topic, msgtype in src.topics.items():
            if found.setdefault(topic, msgtype) != msgtype:
                raise FormatError(f"topic {topic!r} is a {found[topic]} in one bag and a {msgtype} in {src.path}")
    for src in sources:
        for topic, types in src.mixed.items():
            if not (only and topic not in topics):
                raise FormatError(
                    f"{src.path}: topic {topic!r} has {len(types)} message types ({', '.join(types)}); a stream "
                    "has one type and the importer cannot choose a type of a topic. Leave the topic out (only=True "
                    "with the other topics listed; command line: --only --topic TOPIC ...), or split the bag "
                    f"first, e.g. rosbags-convert --src BAG --dst NEW_BAG --exclude-msgtype {types[-1]}")
    if not found:
        why = "; ".join(s.problem for s in sources if s.problem)  # cut before its first channel
        raise FormatError(f"no topic in {', '.join(str(s.path) for s in sources)}" + (f" ({why})" if why else ""))
    if missing := [t for t in topics if t not in found]:
        raise ValueError(f"topics {missing} are in none of the bags; they have {sorted(found)}")
    chosen: dict[str, tuple[str, str]] = {}
    skipped = []
    for topic, msgtype in found.items():
        if only and topic not in topics:
            continue
        if msgtype not in KINDS:
            if topic in topics:
                raise FormatError(f"topic {topic!r} is a {msgtype}, which is not imported; imported types: "
                                  f"{sorted(KINDS)}")
            skipped.append(f"{topic} ({msgtype})")
            continue
        name = topics.get(topic) or stream_name(topic)
        try:
            check_name(name)
        except ValueError as exc:
            raise type(exc)(f"topic {topic}: {exc}; name its stream with topics={{{topic!r}: 'NAME'}} (command "
                            f"line: --topic {topic}=NAME)") from None
        chosen[topic] = (msgtype, name)
    clashes: dict[str, list[str]] = {}
    for topic, (_, name) in chosen.items():
        clashes.setdefault(name, []).append(topic)
    if clashes := {name: ts for name, ts in sorted(clashes.items()) if len(ts) > 1}:
        raise ValueError(name_clash_message(clashes))
    if skipped:
        warnings.warn(RosbagWarning(f"topics of types not imported are left out: {', '.join(skipped)}"), stacklevel=3)
    if not chosen:
        raise FormatError("no topic of the bags is of a type imported (imported types: " f"{sorted(KINDS)})")
    return chosen


def plan_topics(sources: Sequence[BagSource], chosen: Mapping[str, tuple[str, str]], stamp: str) -> list[TopicPlan]:
    """One :class:`TopicPlan` per chosen topic with messages in some bag (a topic without any is left out
    with a :class:`RosbagWarning`): its space from its first message, the measured ``fps`` of cameras.

    Raises:
        FormatError: the first message cannot be deserialized or converted (names bag, topic, reason).
    """
    if stamp not in STAMPS:
        raise ValueError(f"stamp must be one of {STAMPS}, got {stamp!r}")
    plans = []
    for topic, (msgtype, name) in chosen.items():
        kind = KINDS[msgtype]
        for src in sources:
            if topic not in src.topics:
                continue
            first, headers, logs = None, [], []
            for _, log_ns, raw in _first(src.messages({topic}, count=False), PROBE_MESSAGES):
                if logs and log_ns - logs[0] > PROBE_SECONDS * 1e9:
                    break
                msg = src.deserialize(raw, msgtype, f"{src.path}: topic {topic}")
                first = msg if first is None else first
                headers.append(header_stamp_ns(msg))
                logs.append(log_ns)
            if first is None:
                continue
            use_header = stamp == "header" and headers[0] is not None
            if use_header and headers[0] == 0:
                use_header = False
                warnings.warn(RosbagWarning(f"topic {topic}: header.stamp is unset (0); its log times are used"),
                              stacklevel=3)
            fps = measured_fps(np.asarray(headers if use_header else logs, dtype=np.int64))
            try:
                space = kind.space(first, fps)
            except FormatError as exc:
                raise FormatError(f"{src.path}: topic {topic}: {exc}") from None
            space = space.with_metadata({"topic": topic, "ros_type": msgtype, **({"fps": fps} if fps else {})})
            plans.append(TopicPlan(topic, msgtype, name, space, use_header, kind))
            break
        else:
            warnings.warn(RosbagWarning(f"topic {topic}: no message in any bag; left out"), stacklevel=3)
    return plans


def _first(it: Iterator[Any], n: int) -> Iterator[Any]:
    for i, item in enumerate(it):
        if i >= n:
            it.close()  # type: ignore[attr-defined]
            return
        yield item


class _Block:
    def __init__(self, plan: TopicPlan):
        self.plan, self.t, self.values, self.nbytes, self.count = plan, [], [], 0, 0
        self.last: int | None = None


def convert(src: BagSource, plans: Sequence[TopicPlan]) -> Iterator[tuple[TopicPlan, np.ndarray, Any]]:
    """The bag's messages of the planned topics as blocks ``(plan, t_ns (N,) int64, values batch)``, each
    block at most :data:`BLOCK_SAMPLES` samples or :data:`BLOCK_BYTES` bytes; blocks of one topic in time order.

    Raises:
        FormatError: a message that cannot be deserialized or does not match its topic's space, or a
            timestamp before its topic's previous one (names the bag, topic, message index and both times).
    """
    blocks = {p.topic: _Block(p) for p in plans}
    for topic, log_ns, raw in src.messages(set(blocks)):
        b = blocks[topic]
        plan = b.plan
        where = f"{src.path}: topic {topic} message {b.count}"
        msg = src.deserialize(raw, plan.msgtype, where)
        t = header_stamp_ns(msg) if plan.use_header else log_ns
        if t is None:
            t = log_ns
        if b.last is not None and t < b.last:
            which = "header.stamp" if plan.use_header else "log time"
            hint = " (stamp='log' orders it by log time)" if plan.use_header else ""
            raise FormatError(f"{where}: {which} {t} ns is before the previous message's {b.last} ns{hint}")
        value = plan.kind.value(msg, plan.space, where)
        b.last = t
        b.count += 1
        b.t.append(t)
        b.values.append(value)
        b.nbytes += _nbytes(value)
        if len(b.t) >= BLOCK_SAMPLES or b.nbytes >= BLOCK_BYTES:
            yield _take(b)
    for b in blocks.values():
        if b.t:
            yield _take(b)


def _nbytes(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return int(np.asarray(value).nbytes)


def _stack(values: list[Any]) -> Any:
    if isinstance(values[0], dict):
        return {k: _stack([v[k] for v in values]) for k in values[0]}
    return np.stack(values)


def _take(b: _Block) -> tuple[TopicPlan, np.ndarray, Any]:
    out = (b.plan, np.asarray(b.t, dtype=np.int64), _stack(b.values))
    b.t, b.values, b.nbytes = [], [], 0
    return out


@dataclass(frozen=True)
class TopicData:
    """One topic of one bag in memory: ``t_ns`` ``(N,)`` int64, ``values`` a batch with leading ``N``,
    ``space`` the stream space of one sample (with its metadata)."""

    t_ns: np.ndarray
    values: Any
    space: Space


def read_bag(path: Any, *, topics: Mapping[str, str | None] | Iterable[str] | None = None, only: bool = False,
             stamp: str = "header") -> dict[str, TopicData]:
    """One bag's topics converted as :func:`~trajstore.interop.rosbag.import_rosbag` does, in memory:
    ``{stream name: TopicData}``. For small bags and inspection; the import streams instead.

    Raises: as :func:`~trajstore.interop.rosbag.import_rosbag`.
    """
    src = open_bag(path)
    try:
        plans = plan_topics([src], choose_topics([src], as_topic_map(topics), only), stamp)
        parts: dict[str, list[tuple[np.ndarray, Any]]] = {p.name: [] for p in plans}
        for plan, t, values in convert(src, plans):
            parts[plan.name].append((t, values))
        warn_lost(src)
    finally:
        src.close()
    out = {}
    for plan in plans:
        blocks = parts[plan.name]
        if not blocks:
            continue
        t = np.concatenate([b[0] for b in blocks])
        out[plan.name] = TopicData(t, _concat([b[1] for b in blocks]), plan.space)
    return out


def _concat(batches: list[Any]) -> Any:
    if isinstance(batches[0], dict):
        return {k: _concat([b[k] for b in batches]) for k in batches[0]}
    return np.concatenate(batches)


def warn_lost(src: BagSource) -> dict[str, int | None]:
    """Warn (:class:`RosbagWarning`) about what of ``src`` could not be read; returns ``src.lost()``."""
    lost = src.lost()
    if src.problem and src.read_all():
        warnings.warn(RosbagWarning(f"{src.path}: {src.problem}; every message was read and imported"),
                      stacklevel=3)
    elif lost or src.problem:
        what = ", ".join(f"{t}: {'an unknown number of' if n is None else n} messages (read "
                         f"{src.read_counts.get(t, 0)})" for t, n in lost.items())
        why = src.problem or "messages missing"
        warnings.warn(RosbagWarning(f"{src.path}: only a readable prefix was imported ({why}); lost: "
                                    f"{what or 'none counted'}"), stacklevel=3)
    return lost
