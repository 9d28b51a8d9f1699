"""Run damaged-file cases in a child process with a timeout per case.

One child runs many cases in a row and reports each on a pipe; it is restarted after a crash
(a signal, an abort) or a hang (killed after ``timeout`` seconds), and that case is reported as
such. The parent damages the file before each case and restores it after: each version is
written to a new file renamed into place (a new inode, so no library in the child can mistake it
for a file it saw before).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz.damage import Mutation, storage_folder

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    mutation: Mutation
    outcome: str  # "ok", "error", "crash", "hang"
    detail: dict = field(default_factory=dict)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.fuzz")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class Child:
    def __init__(self, folder: Path, mode: str = "read"):
        read_fd, write_fd = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT),
                                                           os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz._child", str(folder), str(write_fd), mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     pass_fds=(write_fd,), cwd=ROOT, env=env, text=True)
        os.close(write_fd)
        self.results = os.fdopen(read_fd, "r")
        self._buf = ""

    def run(self, case: int, timeout: float) -> dict | None:
        """The child's result of ``case``, or None if it died or did not answer within ``timeout`` s."""
        try:
            self.proc.stdin.write(f"{case}\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except BrokenPipeError:
            return None
        deadline = time.monotonic() + timeout
        fd = self.results.fileno()
        while "\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536).decode()
            if not chunk:
                return None  # EOF: the child died
            self._buf += chunk
        line, self._buf = self._buf.split("\n", 1)
        return json.loads(line)

    def stop(self) -> tuple[int | None, str]:
        """Kill the child if it still runs; returns its exit status and the end of its stderr."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            _, err = self.proc.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            err = ""
        self.results.close()
        return self.proc.returncode, (err or "")[-1500:]


def run_cases(folder: Path, mutations: list[Mutation], *, timeout: float = 20.0, mode: str = "read") -> list[Result]:
    """Apply each mutation to ``folder`` in turn, run the child's ``mode`` case on it ("read": read
    everything; "write": a writer appends to a copy, see ``_child``), restore the file."""
    results: list[Result] = []
    child: Child | None = None
    originals: dict[str, bytes] = {}
    try:
        for case, mutation in enumerate(mutations):
            path = folder / mutation.path
            original = originals.setdefault(mutation.path, path.read_bytes())
            _replace(path, mutation.apply(original))
            try:
                if child is None:
                    child = Child(folder, mode)
                got = child.run(case, timeout)
                if got is None:
                    alive = child.proc.poll() is None
                    status, stderr = child.stop()
                    child = None
                    results.append(Result(mutation, "hang" if alive else "crash",
                                          {"status": status, "stderr": stderr}))
                else:
                    results.append(Result(mutation, got["outcome"], got))
            finally:
                _replace(path, original)
    finally:
        if child is not None:
            child.stop()
    return results


def failures(folder: Path, results: list[Result]) -> list[str]:
    """One line per result that is neither the data nor a trajstore error naming the damaged file
    (or the storage folder holding it, for damage found as a mismatch between its files); in write
    mode also a failed writer that changed what readers get, and a writer whose steps do not read back."""
    bad = []
    for r in results:
        if r.detail.get("bad_write"):
            bad.append(f"{r.mutation}: the writer succeeded but its steps do not read back: {r.detail['after']}")
        if r.detail.get("lost"):
            bad.append(f"{r.mutation}: a failed writer ({r.detail['type']}: {r.detail['message'][:200]}) changed "
                       f"what a reader gets: now {str(r.detail['after'])[:200]}")
        if r.outcome == "ok":
            continue
        if r.outcome in ("crash", "hang"):
            bad.append(f"{r.mutation}: {r.outcome} (exit status {r.detail['status']}): {r.detail['stderr'][-300:]}")
            continue
        d = r.detail
        names = [r.mutation.path]
        holder = storage_folder(folder, r.mutation.path)
        if holder is not None:
            names.append(holder)
        if not (d["format_error"] or d["trajstore_error"]):
            bad.append(f"{r.mutation}: {d['type']}: {d['message'][:300]} at {d['where']}")
        elif not any(n in d["message"] for n in names):
            bad.append(f"{r.mutation}: {d['type']} does not name {names}: {d['message'][:300]}")
    return bad
