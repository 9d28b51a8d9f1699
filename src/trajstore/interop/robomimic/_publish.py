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
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from trajstore._fs import STALE_UNOWNED_SECONDS, fsync_dir, owner_is_gone, owner_record
from trajstore._json import dumps_checked, loads_bounded
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _stale(path: Path, pid: int, owner_file: Path | None) -> bool:
    """Whether the temporary ``path`` (or its owner record alone) of process ``pid`` was left by a run that
    died: its owner record names this host and ``pid``, and that process is gone or is another one (the id
    was reused); without a readable record, ``pid`` is gone and nothing changed for
    :data:`~trajstore._fs.STALE_UNOWNED_SECONDS`. Unsure means no."""
    owner = None
    if owner_file is not None:
        try:
            owner = loads_bounded(owner_file.read_bytes(), source=str(owner_file))
        except (OSError, ValueError):  # none, or cut short by the kill
            owner = None
    if isinstance(owner, dict):
        return owner.get("pid") == pid and owner_is_gone(owner)
    ages = []
    for p in (path, owner_file):
        try:
            if p is not None:
                ages.append(time.time() - p.lstat().st_mtime)
        except FileNotFoundError:
            pass
    return bool(ages) and not _pid_alive(pid) and min(ages) > STALE_UNOWNED_SECONDS


def remove_stale_temps(out: Path) -> list[Path]:
    """Remove the temporary files beside ``out`` (and their owner records) that exports which died left
    behind (see :func:`_stale`); returns those removed. A live export's, another host's (a shared file
    system) and an unsure one are kept."""
    owned = re.compile(rf"^\.{re.escape(out.name)}\.(\d+)-[0-9a-f]{{8}}\.partial(?:\.owner)?$")
    legacy = re.compile(rf"^\.{re.escape(out.name)}\.(\d+)\.tmp$")
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
        if _stale(path, pid, owner_file):
            path.unlink(missing_ok=True)
            owner_file.unlink(missing_ok=True)
            removed.append(path)
    for name in sorted(names):
        m = legacy.match(name)
        path = out.with_name(name)
        if m and path.is_file() and not path.is_symlink() and _stale(path, int(m.group(1)), None):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
