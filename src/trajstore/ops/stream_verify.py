"""Check a stream buffer folder on its own: every stream's sub-buffer as
:func:`~trajstore.ops.verify.verify_buffer` checks any buffer folder (files, payloads, counts), then
the timestamps against the episode log:

* **metadata**: ``streams.json`` reads, names each stream's folder inside the buffer, and the folder
  opens as a stream buffer (read-only);
* **timestamps**: each stream's sub-buffer declares its ``timestamp`` leaf int64 ``()`` (nanoseconds),
  the times read back as int64, non-decreasing within every episode (the first sample out of order is
  named: stream, episode id, index within the episode, both times);
* **spans**: each episode's span of each stream agrees with the samples read: its count, its first and
  last time; the spans of a stream follow one another (``start`` of one is the ``stop`` of the one
  before) and end at the stream's length; the sub-buffer's episodes are those spans with samples, in
  order and of the same lengths.

Reads only (no lock, nothing written). Timestamps of a stream whose sub-buffer is damaged are not read.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from trajstore.errors import FormatError
from trajstore.ops.stream_info import TIMESTAMP_LEAF, VALUE_LEAF, stream_folders
from trajstore.streams.folder import META_FILE as STREAMS_FILE
from trajstore.ops.verify import Problem, VerifyReport, _text, steps_to_read, verify_buffer
from trajstore.streams.rates import episode_timestamps

Progress = Callable[[int], None]


@dataclass
class StreamCheck:
    """What was checked of one stream: its sub-buffer's report, its samples and episodes, its problems."""

    name: str
    folder: str
    samples: int = 0
    episodes_with_samples: int = 0
    timestamps_checked: bool = False  # False when its sub-buffer is damaged (times not read)
    problems: int = 0
    buffer: VerifyReport | None = None


@dataclass
class StreamVerifyReport:
    """The result of :func:`verify_stream_buffer`; :attr:`ok` when no problem was found."""

    path: str
    episodes: int = 0
    streams: list[StreamCheck] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def samples(self) -> int:
        return sum(s.samples for s in self.streams)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "streams", **asdict(self), "ok": self.ok}


def stream_samples_to_read(path: str | os.PathLike) -> int:
    """Steps :func:`verify_stream_buffer` reads over all sub-buffers (its progress total), 0 if unknown."""
    try:
        return sum(steps_to_read(folder) for folder in stream_folders(path).values())
    except Exception:  # noqa: BLE001 - only a progress total
        return 0


def verify_stream_buffer(path: str | os.PathLike, *, progress: Progress | None = None) -> StreamVerifyReport:
    """Check the stream buffer folder at ``path`` (see the module docstring) and report what is damaged.

    Args:
        path: a stream buffer folder (holding ``streams.json``).
        progress: called with a number of samples after each batch a sub-buffer check reads; the total
            is :func:`stream_samples_to_read`.

    Returns:
        A :class:`StreamVerifyReport`; damage is in its ``problems`` (each sub-buffer's problems are
        there too, naming their files), never raised.

    Raises:
        FormatError: ``path`` holds no ``streams.json``.
    """
    folder = Path(path)
    if not (folder / STREAMS_FILE).is_file():
        raise FormatError(f"{folder} is not a stream buffer folder (no {STREAMS_FILE})")
    report = StreamVerifyReport(str(folder))
    try:
        folders = stream_folders(folder)
    except FormatError as exc:
        report.problems.append(Problem(str(folder / STREAMS_FILE), f"unreadable metadata: {_text(exc)}"))
        return report
    for name, sub in folders.items():
        check = StreamCheck(name, str(sub))
        report.streams.append(check)
        if not sub.is_dir():
            _problem(report, check, str(sub), f"stream {name!r}: its folder is missing")
            continue
        check.buffer = verify_buffer(sub, progress=progress)
        check.problems += len(check.buffer.problems)
        report.problems += check.buffer.problems
    from trajstore.damage import DamagedBufferWarning
    from trajstore.streams import StreamBuffer

    try:
        with warnings.catch_warnings():  # the damage is in the report already
            warnings.simplefilter("ignore", DamagedBufferWarning)
            buf = StreamBuffer.load_from(folder, read_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to open is damage to report
        report.problems.append(Problem(str(folder), f"does not open as a stream buffer: {_text(exc)}"))
        return report
    with buf:
        report.episodes = buf.num_episodes
        if list(buf.streams) != list(folders):
            report.problems.append(Problem(str(folder / STREAMS_FILE), f"streams {list(folders)} in the metadata, "
                                                                       f"but the buffer opens {list(buf.streams)}"))
        for check in report.streams:
            if check.name in buf.streams and check.buffer is not None and check.buffer.ok:
                _check_timestamps(buf, check, report)
    return report


def _problem(report: StreamVerifyReport, check: StreamCheck, where: str, what: str) -> None:
    check.problems += 1
    report.problems.append(Problem(where, what))


def _check_timestamps(buf: Any, check: StreamCheck, report: StreamVerifyReport) -> None:
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.spaces import BoxSpace, DictSpace

    name, where = check.name, check.folder
    with ReplayBuffer.load_from(where, read_only=True) as rb:
        space = rb.space
        sub_lengths = [len(e) for e in rb.episodes]
    leaf = space[TIMESTAMP_LEAF] if isinstance(space, DictSpace) and TIMESTAMP_LEAF in space.keys() else None
    if not (isinstance(leaf, BoxSpace) and np.dtype(leaf.dtype) == np.int64 and tuple(leaf.shape) == ()
            and VALUE_LEAF in space.keys()):
        _problem(report, check, where, f"stream {name!r}: the sub-buffer's step space must be a dict of "
                                       f"'{TIMESTAMP_LEAF}' (int64, shape ()) and '{VALUE_LEAF}', got {space!r}")
        return
    try:
        episodes = buf.episodes
        times = episode_timestamps(buf, name, episodes)
        length = int(buf.stream_length(name))
    except Exception as exc:  # noqa: BLE001 - a read that fails is damage
        _problem(report, check, where, f"stream {name!r}: timestamps cannot be read: {_text(exc)}")
        return
    check.timestamps_checked = True
    check.samples = int(sum(len(t) for t in times))
    check.episodes_with_samples = sum(1 for t in times if len(t))
    at = 0
    for e, t in zip(episodes, times):
        t = np.asarray(t)
        label = f"stream {name!r}, episode {e.id}"
        if t.dtype != np.int64:
            _problem(report, check, where, f"{label}: timestamps read as {t.dtype}, not int64 nanoseconds")
            continue
        d = np.diff(t)
        if np.any(d < 0):
            i = int(np.argmax(d < 0)) + 1
            _problem(report, check, where, f"{label}: timestamps out of order: sample {i} at {int(t[i])} ns is "
                                           f"before sample {i - 1} at {int(t[i - 1])} ns "
                                           f"({int(np.count_nonzero(d < 0))} decrease(s) in the episode)")
        span = e.streams.get(name)
        count = 0 if span is None else span.stop - span.start
        if span is not None and span.start != at:
            _problem(report, check, where, f"{label}: the log's span starts at sample {span.start}, but the "
                                           f"previous episode's ends at {at}")
        at = at if span is None else span.stop
        if count != len(t):
            _problem(report, check, where, f"{label}: the log's span holds {count} samples, {len(t)} read")
        elif len(t) and (span.first_ns != int(t[0]) or span.last_ns != int(t[-1])):
            _problem(report, check, where, f"{label}: the log says first/last time {span.first_ns}/{span.last_ns} "
                                           f"ns, the samples {int(t[0])}/{int(t[-1])} ns")
        elif not len(t) and span is not None and (span.first_ns is not None or span.last_ns is not None):
            _problem(report, check, where, f"{label}: the log gives times to a span without samples")
    if at != length:
        _problem(report, check, where, f"stream {name!r}: the episodes' spans end at sample {at}, the stream "
                                       f"holds {length}")
    spans = [len(t) for t in times if len(t)]
    if sub_lengths != spans:
        _problem(report, check, where, f"stream {name!r}: the sub-buffer's episodes have {_short(sub_lengths)} "
                                       f"samples, the log's spans with samples {_short(spans)}")


def _short(values: list[int], limit: int = 8) -> str:
    return str(values[:limit])[:-1] + (", ...]" if len(values) > limit else "]")


__all__ = ["verify_stream_buffer", "StreamVerifyReport", "StreamCheck", "stream_samples_to_read"]
