"""The child process of the importer fuzz:
``python -m tests.fuzz._import_child FORMAT SRC PRISTINE RESULT_FD HEADROOM``.

``FORMAT`` is ``lerobot`` or ``zarr``. The process imports PRISTINE (an unchanged copy of SRC) once,
then limits its address space (``RLIMIT_AS``) to what it maps then plus ``HEADROOM`` bytes, so an
import that allocates what a hostile file declares fails here with a ``MemoryError`` instead of taking
the machine's memory. For each line read on stdin (a case number; the
parent has changed a file of SRC by then) it imports SRC into a new folder, reads the buffer back,
removes it, and writes one JSON line to RESULT_FD: ``{"case", "outcome": "ok" | "error", "type",
"allowed", "message", "where", "value"}`` (``allowed``: a FormatError or an InvalidValueError).

A crash or hang of this process is the parent's to notice.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import traceback
import warnings
from pathlib import Path

from trajstore.errors import FormatError, InvalidValueError


def import_and_read(fmt: str, src: Path, out: Path) -> int:
    """Import ``src`` into ``out``, open it and read every step; returns the steps read."""
    from trajstore.replay_buffer import ReplayBuffer

    if fmt == "lerobot":
        from trajstore.interop.lerobot import import_lerobot

        import_lerobot(src, out, camera="png", progress=False)
    else:
        from trajstore.interop.zarr import import_zarr

        import_zarr(src, out, camera="png", progress=False)
    with ReplayBuffer.load_from(out) as rb:
        rb[:]
        [rb.episode(k).data for k in range(rb.num_episodes)]
        return len(rb)


def attempt(fmt: str, src: Path, out: Path) -> dict:
    try:
        value = import_and_read(fmt, src, out)
    except Exception as exc:  # noqa: BLE001 - every exception is a result here
        frames = traceback.extract_tb(exc.__traceback__)
        made = [p.name for p in out.parent.iterdir() if p.name == out.name or p.name.startswith(f".{out.name}.")]
        return {"outcome": "error", "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                "allowed": isinstance(exc, (FormatError, InvalidValueError)), "message": str(exc)[:2000],
                "where": [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-4:]], "left_behind": made}
    return {"outcome": "ok", "value": value}


def _address_space() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


def main() -> None:
    fmt, src, pristine = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    fd, headroom = int(sys.argv[4]), int(sys.argv[5])
    warnings.simplefilter("ignore")
    # One import of the unchanged dataset first: the libraries' first use maps thread stacks, allocator
    # arenas and code (a few GB of address space, little of it resident); the limit is set above that.
    warm = pristine.with_name(f"{pristine.name}.warm-up")
    shutil.rmtree(warm, ignore_errors=True)
    import_and_read(fmt, pristine, warm)
    shutil.rmtree(warm)
    limit = _address_space() + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out_file = os.fdopen(fd, "w", buffering=1)
    for line in sys.stdin:
        out = src.with_name(f"{src.name}.out-{int(line)}")
        result = attempt(fmt, src, out)
        shutil.rmtree(out, ignore_errors=True)
        result["case"] = int(line)
        out_file.write(json.dumps(result, default=str) + "\n")


if __name__ == "__main__":
    main()
