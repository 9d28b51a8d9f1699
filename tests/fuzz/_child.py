"""The child process of the damaged-file fuzz: ``python -m tests.fuzz._child FOLDER RESULT_FD``.

For each line read on stdin (a case number; the parent has damaged a file of FOLDER by then) it
runs :func:`~tests.fuzz.damage.read_everything` on FOLDER and writes one JSON line to RESULT_FD:
``{"case", "outcome": "ok" | "error", "type", "format_error", "trajstore_error", "message", "where"}``.
A crash or hang of this process is the parent's to notice.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from tests.fuzz.damage import read_everything
from trajstore.errors import FormatError, TrajstoreError


def run_one(folder: Path) -> dict:
    try:
        read_everything(folder)
    except Exception as exc:  # noqa: BLE001 - every exception is a result here
        frames = traceback.extract_tb(exc.__traceback__)
        return {"outcome": "error", "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                "format_error": isinstance(exc, FormatError), "trajstore_error": isinstance(exc, TrajstoreError),
                "message": str(exc)[:2000],
                "where": [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-4:]]}
    return {"outcome": "ok"}


def main() -> None:
    folder, fd = Path(sys.argv[1]), int(sys.argv[2])
    warnings.simplefilter("ignore")
    out = os.fdopen(fd, "w", buffering=1)
    for line in sys.stdin:
        result = run_one(folder)
        result["case"] = int(line)
        out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
