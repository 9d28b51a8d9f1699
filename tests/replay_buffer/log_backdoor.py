"""A back door to the episode log: what reached the disk, read without trajstore's own code."""

import json
from pathlib import Path

META_FILE = "trajstore.json"


def meta(folder: Path) -> dict:
    return json.loads((Path(folder) / META_FILE).read_text())


def committed_records(folder: Path, *, kept_only: bool = True) -> list[dict]:
    """The episode records ``trajstore.json`` commits (by default only those still in the table)."""
    entry = meta(folder)["episodes"]["log"]
    raw = (Path(folder) / entry["file"]).read_bytes()[:entry["bytes"]]
    lines = raw.decode().splitlines()
    header, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    assert header == {"format": "trajstore.episode_log", "version": 1} and len(records) == entry["records"]
    return records[entry["skip"]:] if kept_only else records


def rewrite_last_record(folder: Path, **changes) -> None:
    """Change fields of the last committed episode record in place (a damaged log that still parses)."""
    folder = Path(folder)
    m = meta(folder)
    entry = m["episodes"]["log"]
    log = folder / entry["file"]
    lines = log.read_bytes()[:entry["bytes"]].decode().splitlines()
    last = json.loads(lines[-1])
    last.update({k: v(last[k]) if callable(v) else v for k, v in changes.items()})
    lines[-1] = json.dumps(last)
    raw = ("\n".join(lines) + "\n").encode()
    log.write_bytes(raw)
    entry["bytes"] = len(raw)
    if entry.get("index"):  # the binary index says the same (a table committed wrong, not a torn file)
        _rewrite_last_index_record(folder / entry["index"], entry["records"], last, len(lines[-1]) + 1)
        if "index_crc32" in entry:  # and its crc32 (of the header and the committed records) with it
            import zlib
            entry["index_crc32"] = zlib.crc32((folder / entry["index"]).read_bytes()[:32 + 56 * entry["records"]])
    (folder / META_FILE).write_text(json.dumps(m))


def _rewrite_last_index_record(path: Path, records: int, record: dict, line_bytes: int) -> None:
    """Record ``records - 1`` of ``episodes.NNNNNN.idx``: 32-byte header, then little-endian int64
    ``(id, start, stop, final, interrupted, offset, length)`` per log line."""
    import numpy as np

    at = 32 + 56 * (records - 1)
    with open(path, "r+b") as f:
        f.seek(at)
        old = np.frombuffer(f.read(56), "<i8")
        f.seek(at)
        f.write(np.array([record["id"], record["start"], record["stop"], record["final"],
                          int(record["interrupted"]), old[5], line_bytes], "<i8").tobytes())
