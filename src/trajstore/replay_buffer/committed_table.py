"""The committed episode table of a buffer folder: ``trajstore.json``'s ``"episodes"`` entry read with the
episode log it names (:class:`~trajstore.replay_buffer.episode_log.EpisodeLog`), read again when a
compaction removed the log between the two reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from trajstore.errors import FormatError
from trajstore.replay_buffer.episode_log import EpisodeLog
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.replay_buffer.log_format import LogPosition
from trajstore.replay_buffer.metadata import META_FILE, read_meta

__all__ = ["READ_ATTEMPTS", "load_table", "read_committed"]


def load_table(folder: Path, entry: Any, *, read_only: bool, log: EpisodeLog | None = None,
               previous: EpisodeTable | None = None, parse: bool = False) -> tuple[EpisodeTable, EpisodeLog | None]:
    """The committed episode table that ``entry`` (the ``"episodes"`` of ``trajstore.json``) describes,
    and the open log. A reader passes its ``log`` and ``previous`` table to read only the records
    committed since (``previous`` is left unchanged); format 1 and 2 entries hold the whole table.
    ``parse``: see :meth:`EpisodeLog.open`.

    Raises:
        FileNotFoundError: the log is gone (a reader raced a compaction: read the metadata again).
        FormatError: a bad entry, a damaged or short log.
    """
    if not isinstance(entry, dict):
        raise FormatError(f"{folder / META_FILE}: bad episode table {entry!r:.200}")
    try:
        if "log" not in entry:  # format 1 or 2
            return EpisodeTable.from_json(entry), log
        position = LogPosition.from_json(entry["log"], folder)
        counters = {k: v for k, v in entry.items() if k != "log"}
        new = log.read_new(position) if log is not None and log.read_only and previous is not None else None
        if new is not None:
            table = previous.with_appended(np.ascontiguousarray(new[:5]))  # type: ignore[union-attr]
            table.store.locate(new[0], new[5], new[6])
            table.set_counters(counters)
        else:
            fresh, rows = EpisodeLog.open(folder, position, read_only=read_only, parse=parse)
            if log is not None:
                log.close(sources=False)  # the views a reader holds still read their data
            log = fresh
            table = EpisodeTable.from_columns(rows, None, counters, store=fresh.store)
        if not table.keep_last(position.records - position.skip):  # more than a reader's table has kept
            return load_table(folder, entry, read_only=read_only, log=log, parse=parse)
    except (ValueError, TypeError, KeyError) as exc:
        if isinstance(exc, FormatError):
            raise
        # The counters in trajstore.json and the log's records disagree, or one of them is malformed.
        raise FormatError(f"{folder / META_FILE}: bad episode table (with its episode log): {exc}") from None
    return table, log


#: Times a reader reads the metadata again when the log it names was removed meanwhile (a compaction).
READ_ATTEMPTS = 4


def read_committed(folder: Path, *, read_only: bool, log: EpisodeLog | None = None,
                   previous: EpisodeTable | None = None, parse: bool = False
                   ) -> tuple[dict[str, Any], EpisodeTable, EpisodeLog | None]:
    """``trajstore.json`` with the episode table and log it commits (see :func:`load_table`), read
    again when a compaction removed the log between the two reads. ``parse=True`` (a check such as
    ``trajstore verify``) parses every log line and requires the index to agree.

    Raises:
        FormatError: see :func:`~trajstore.replay_buffer.metadata.read_meta` and :func:`load_table`; also
            a log file that stays missing.
    """
    for _ in range(READ_ATTEMPTS):
        meta = read_meta(folder)
        try:
            table, log = load_table(folder, meta.get("episodes"), read_only=read_only, log=log, previous=previous,
                                    parse=parse)
            return meta, table, log
        except FileNotFoundError:
            continue
    raise FormatError(f"{folder}: the episode log named by trajstore.json ({meta['episodes']['log']['file']}) "
                      "does not exist")
