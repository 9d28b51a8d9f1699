"""Publish an export's file whole, without replacing anything: the file is built under a hidden temporary
name beside ``out`` that says whose it is, and linked to ``out`` only if nothing is there yet. The file
counterpart of :func:`trajstore._fs.staged_folder` (same owner records, same rule for what a killed run
left behind).

Names beside ``out`` (``o.hdf5``)::

    .o.hdf5.<pid>-<token>.partial          the file being written (``token``: 8 hex digits, one per export)
    .o.hdf5.<pid>-<token>.partial.owner    JSON :func:`trajstore._fs.owner_record` (host, pid, start time)
    .o.hdf5.<pid>.tmp                      an older trajstore's temporary file (no owner record)
"""

from __future__ import annotations

import errno
import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from trajstore._fs import fsync_dir, left_by_dead_run, owner_record
from trajstore._json import dumps_checked
from trajstore.errors import StorageExistsError

#: ``link`` errors of a file system without hard links (then ``out`` is reserved with ``O_EXCL`` instead).
NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}


def _appeared(out: Path) -> StorageExistsError:
    return StorageExistsError(f"{out} appeared while exporting (another process wrote it); nothing was written "
                              "there")


@contextmanager
def staged_file(out: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``out`` (not made yet: the body writes it); when the body returns, the
    file is fsynced and linked to ``out`` (``os.link``, which never replaces a file), its temporary name
    removed and the folder fsynced. Whatever happens, the temporary file and its owner record are removed.

    Temporaries of ``out`` that killed runs left behind are removed first (:func:`remove_stale_temps`).

    Raises:
        StorageExistsError: something appeared at ``out`` while the body ran (another export, a user);
            it is left as it was.
    """
    remove_stale_temps(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
    owner = tmp.with_name(tmp.name + ".owner")
    try:
        owner.write_text(dumps_checked(owner_record(), what=str(owner)))
        yield tmp
        with open(tmp, "rb+") as fd:
            os.fsync(fd.fileno())
        _publish(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        owner.unlink(missing_ok=True)
    fsync_dir(out.parent)


def _publish(tmp: Path, out: Path) -> None:
    try:
        os.link(tmp, out)  # fails if anything (a file, a folder, a dangling symlink) is at out
        return
    except FileExistsError:
        raise _appeared(out) from None
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise
    try:  # no hard links here: reserve the name (an empty file appears for a moment), then fill it
        os.close(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        raise _appeared(out) from None
    os.replace(tmp, out)


def remove_stale_temps(out: Path) -> list[Path]:
    """Remove the temporary files beside ``out`` (and their owner records) that exports which died left
    behind (the rule of :func:`trajstore._fs.left_by_dead_run`); returns those removed. A live export's, another host's (a shared file
    system) and an unsure one are kept."""
    owned = re.compile(rf"^\.{re.escape(out.name)}\.(\d+)-[0-9a-f]{{8}}\.partial(?:\.owner)?$")
    try:
        names = [p.name for p in out.parent.iterdir()]
    except FileNotFoundError:
        return []
    removed = []
    stems: dict[str, int] = {}
    for name in names:
        m = owned.match(name)
        if m:
            stems[name.removesuffix(".owner")] = int(m.group(1))
    for stem, pid in sorted(stems.items()):
        path = out.with_name(stem)
        owner_file = path.with_name(stem + ".owner")
        if left_by_dead_run(path, pid, owner_file):
            path.unlink(missing_ok=True)
            owner_file.unlink(missing_ok=True)
            removed.append(path)
    return removed
