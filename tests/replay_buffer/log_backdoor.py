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
