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
    (folder / META_FILE).write_text(json.dumps(m))
