"""The child process of the damaged-file fuzz: ``python -m tests.fuzz._child FOLDER RESULT_FD [read|write]``.

For each line read on stdin (a case number; the parent has damaged a file of FOLDER by then) it
writes one JSON line to RESULT_FD: ``{"case", "outcome": "ok" | "error", "type", "format_error",
"trajstore_error", "message", "where"}``.

- ``read`` (default): :func:`~tests.fuzz.damage.read_everything` on FOLDER.
- ``write``: on a copy of FOLDER, :func:`~tests.fuzz.damage.write_more` (a writer opens it and
  appends an episode). The result also says ``"lost"``: a writer that failed changed what a reader
  of the copy gets (the data, or the error), and ``"bad_write"``: a writer that succeeded left
  steps that do not read back (:func:`~tests.fuzz.damage.check_more`).

A crash or hang of this process is the parent's to notice.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import traceback
import warnings
from pathlib import Path
from typing import Callable

from tests.fuzz.damage import check_more, read_everything, write_more
from trajstore.errors import FormatError, TrajstoreError


def attempt(fn: Callable[[Path], object], folder: Path) -> dict:
    try:
        value = fn(folder)
    except Exception as exc:  # noqa: BLE001 - every exception is a result here
        frames = traceback.extract_tb(exc.__traceback__)
        return {"outcome": "error", "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                "format_error": isinstance(exc, FormatError), "trajstore_error": isinstance(exc, TrajstoreError),
                "message": str(exc)[:2000],
                "where": [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-4:]]}
    return {"outcome": "ok", "value": value}


def _seen(result: dict) -> tuple:
    """What a reader got: the steps read, or the kind of error."""
    return (result["outcome"], result.get("value"), result.get("type"))


def write_case(folder: Path) -> dict:
    scratch = folder.with_name(folder.name + ".write-case")
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(folder, scratch)
    try:
        before = attempt(read_everything, scratch)
        result = attempt(write_more, scratch)
        if result["outcome"] == "error":
            after = attempt(read_everything, scratch)
            result["lost"] = _seen(after) != _seen(before)
            result["after"] = after.get("message", after.get("value"))
        else:
            checked = attempt(check_more, scratch)
            result["bad_write"] = checked["outcome"] != "ok"
            result["after"] = checked.get("message")
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    folder, fd = Path(sys.argv[1]), int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "read"
    warnings.simplefilter("ignore")
    out = os.fdopen(fd, "w", buffering=1)
    for line in sys.stdin:
        result = write_case(folder) if mode == "write" else attempt(read_everything, folder)
        result["case"] = int(line)
        out.write(json.dumps(result, default=str) + "\n")


if __name__ == "__main__":
    main()
