"""File-system primitives shared by the storages and the buffer: atomic JSON, fresh folders, fsync."""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from trajstore._json import dumps_checked, loads_bounded
from trajstore.errors import FormatError, StorageExistsError


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory so that a rename or a new file in it survives a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_pool_lock = threading.Lock()
_POOL_PREFIX = "trajstore-sync"


def in_parallel(*calls: Callable[[], Any]) -> list[Any]:
    """Run ``calls`` at the same time (the first on this thread) and return their results in order.

    For independent writes that each end in an ``fsync``: the kernel can make them durable in one
    journal commit instead of one after the other. Every call has finished when this returns or
    raises; the first call's exception that was raised (in argument order) is re-raised.
    """
    global _pool, _pool_pid
    if len(calls) <= 1 or threading.current_thread().name.startswith(_POOL_PREFIX):
        return [c() for c in calls]  # nested: a pool thread waiting on the pool could starve it
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():  # the pool's threads do not survive a fork
            _pool, _pool_pid = ThreadPoolExecutor(max_workers=4, thread_name_prefix=_POOL_PREFIX), os.getpid()
        futures = [_pool.submit(c) for c in calls[1:]]
    results: list[Any] = []
    errors: list[BaseException] = []
    for wait in (calls[0], *(f.result for f in futures)):
        try:
            results.append(wait())
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after every call finished
            results.append(None)
            errors.append(exc)
    if errors:
        raise errors[0]
    return results


def write_json_atomic(path: str | os.PathLike, data: Any, *, indent: int | None = 1,
                      sync_folder: bool = True) -> None:
    """Replace ``path`` with ``data`` as JSON: write a temp file, fsync, rename, fsync the folder.

    A reader sees the old file or the new one, never a torn one; a crash leaves one of the two.
    ``sync_folder=False`` leaves the rename's durability to a later fsync of the same folder (a file
    that another file, renamed after it in that folder, names).

    Raises:
        InvalidValueError: ``data`` is not JSON that :func:`read_json` reads back (NaN, an integer
            Python cannot write, too deep; see :func:`trajstore._json.dumps_checked`); nothing is written.
    """
    path = Path(path)
    # Per thread: two threads of one process replacing the same file must not share (and rename away) one temp file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    payload = dumps_checked(data, what=str(path), indent=indent,
                            separators=None if indent else (",", ":")).encode()
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync_folder:
        fsync_dir(path.parent)


def read_json(path: str | os.PathLike, what: str) -> Any:
    """Load a JSON file, turning a missing or corrupt file into :class:`FormatError`.

    Raises:
        FormatError: ``path`` does not exist, or is not valid JSON, nested too deep or holding too long
            a number (:func:`trajstore._json.loads_bounded`); the message names ``what`` and ``path``.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise FormatError(f"{what}: {path} does not exist") from None
    return loads_bounded(raw, source=f"{what}: {path}" if what else str(path))


def make_fresh_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` (and parents) as a new folder; an existing *empty* folder is accepted.

    Raises:
        StorageExistsError: ``path`` is a file or a non-empty folder (nothing is touched).
    """
    path = Path(path)
    if path.exists():
        if not path.is_dir() or any(path.iterdir()):
            raise StorageExistsError(f"{path} already exists and is not an empty folder; "
                                     "pick a new path or load it with load_from")
    path.mkdir(parents=True, exist_ok=True)
    return path


def remove_made(path: Path, existed: bool) -> None:
    """Undo :func:`make_fresh_dir` after a failed create: leave nothing half-made behind."""
    if existed:  # it was an empty folder the user made: keep the folder, empty it again
        for child in path.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def check_new_folder(out: str | os.PathLike) -> None:
    """Raise :class:`StorageExistsError` unless ``out`` is absent or an empty folder."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise StorageExistsError(f"{out} already exists and is not an empty folder; pick a new path")


#: A staging folder that no owner file vouches for (made by an older trajstore) is removed as stale only
#: when its process id is gone and it was last changed longer ago than this (seconds): one hour.
STALE_UNOWNED_SECONDS = 3600.0


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (``/proc/<pid>/stat``'s start time, clock ticks since boot, with the
    boot id), or ``None`` when that is not known here (no ``/proc``, or no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        ticks = stat.rsplit(")", 1)[1].split()[19]  # field 22; the command name may hold spaces
    except (OSError, IndexError):
        return None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{boot}:{ticks}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    return True


def owner_record() -> dict[str, Any]:
    """Who this process is, for a file that marks something it is building or holds: ``{"host": host
    name, "pid": process id, "start": its start time (see :func:`owner_is_gone`), or None}``."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "start": _process_start(os.getpid())}


def owner_is_gone(owner: Any) -> bool:
    """True when ``owner`` (an :func:`owner_record`) names a process of this host that is gone: no
    process has its id (``os.kill(pid, 0)``), or the one that has it started at another time (the id was
    reused). False when unsure: another host's process (not visible here), a record that is not one."""
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if not _pid_alive(pid):
        return True
    start = _process_start(pid)
    return start is not None and owner.get("start") is not None and start != owner["start"]


def left_by_dead_run(folder: Path, pid: int, owner_file: Path) -> bool:
    """Whether the staging folder (or temporary file) ``folder`` of process ``pid`` was left by a run that
    died (see :func:`staged_folder` for the rule). Unsure means no: a live run's folder is never removed."""
    try:
        owner = loads_bounded(owner_file.read_bytes(), source=str(owner_file))
    except (OSError, ValueError):  # none, or cut short by the kill: vouches for nothing
        owner = None
    if isinstance(owner, dict):
        return owner.get("pid") == pid and owner_is_gone(owner)
    try:
        age = time.time() - folder.lstat().st_mtime
    except FileNotFoundError:
        return False
    return not _pid_alive(pid) and age > STALE_UNOWNED_SECONDS


def remove_stale_staging(out: str | os.PathLike) -> list[Path]:
    """Remove the staging folders ``.{name}.{pid}.partial`` beside ``out`` (and their owner files) that
    runs which died left behind; returns the folders removed. See :func:`staged_folder` for the rule."""
    out = Path(out)
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(\d+)\.partial(\.owner)?$")
    removed = []
    try:
        pids = {int(m.group(1)) for m in map(pattern.match, (p.name for p in out.parent.iterdir())) if m}
    except FileNotFoundError:
        return removed
    for pid in sorted(pids - {os.getpid()}):
        path = out.with_name(f".{out.name}.{pid}.partial")
        owner_file = path.with_name(path.name + ".owner")
        if left_by_dead_run(path, pid, owner_file):
            shutil.rmtree(path, ignore_errors=True)
            owner_file.unlink(missing_ok=True)
            removed.append(path)
    return removed


@contextmanager
def staged_folder(out: str | os.PathLike) -> Iterator[Path]:
    """Build a folder under a temporary name beside ``out`` and rename it to ``out`` when the body
    returns, so ``out`` appears whole or not at all; if the body raises, the temporary folder is
    removed and ``out`` is as it was.

    Yields the temporary path ``.{name}.{pid}.partial`` beside ``out`` (it does not exist yet: the body
    makes it). Beside it, ``.{name}.{pid}.partial.owner`` (JSON: host name, process id, the process's
    start time) says whose it is, until the folder is renamed or removed.

    Staging folders of the same ``out`` that a killed run left behind are removed first. One is taken
    as left behind when its owner file names this host and its process id, and that process is gone
    (``os.kill(pid, 0)`` finds none) or is another process that reused the id (its start time differs);
    one without an owner file (an older trajstore's) when its process id is gone and it has not changed
    for :data:`STALE_UNOWNED_SECONDS`. Another host's staging folder (a shared file system) is kept.

    Raises:
        StorageExistsError: ``out`` is a file or a non-empty folder (checked first; nothing is made), or
            became one while the body ran (another process made it; the temporary folder is removed).
    """
    out = Path(out)
    check_new_folder(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    owner = tmp.with_name(tmp.name + ".owner")
    shutil.rmtree(tmp, ignore_errors=True)  # left by an earlier run of this process id that died
    try:
        owner.write_text(dumps_checked(owner_record(), what=str(owner)))
        yield tmp
        try:
            os.replace(tmp, out)  # an empty folder at out is replaced (POSIX rename)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise
            raise StorageExistsError(f"{out} appeared while copying (another process wrote it); "
                                     "nothing was written there") from e
        owner.unlink(missing_ok=True)
        fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        owner.unlink(missing_ok=True)
        raise


def path_inside(root: str | os.PathLike, rel: str | os.PathLike, what: str) -> Path:
    """``root / rel`` after checking that it stays inside the folder ``root``: for a path that a file
    read from ``root`` names (a dataset's path template, an image's ``path``), so that hostile content
    cannot make a reader open a file elsewhere.

    ``rel`` must be relative, without ``..`` parts or NUL bytes, and ``root / rel`` with every symlink
    followed (those of ``rel``'s parts and of the file itself) must lie inside ``root`` with its own
    symlinks followed: a symlink from one file of ``root`` to another is fine, one that leaves it is
    refused. Whether the file exists is not checked (a missing file is the caller's error to word).

    Returns:
        ``Path(root) / rel`` (not resolved, so that messages name the path as the dataset gives it).

    Raises:
        FormatError: ``rel`` is empty, absolute, has a ``..`` part or a NUL byte, or leads outside ``root``
            through a symlink; the message starts with ``what`` and names ``rel``.
    """
    text = os.fspath(rel)
    rel_path = Path(text)
    if not text or "\0" in text or rel_path.is_absolute() or rel_path.drive or ".." in rel_path.parts:
        raise FormatError(f"{what}: the path {text!r} leads outside {root} (a path inside it, relative, "
                          "without '..', is expected)")
    path = Path(root) / rel_path
    try:
        real_root = Path(os.path.realpath(root))
        real = Path(os.path.realpath(path))
    except (OSError, ValueError) as exc:  # a symlink loop, a path too long
        raise FormatError(f"{what}: the path {text!r} cannot be resolved inside {root}: {exc}") from None
    if real != real_root and real_root not in real.parents:
        raise FormatError(f"{what}: the path {text!r} leads outside {root} through a symlink (to {real})")
    return path


def check_tree_inside(root: str | os.PathLike, what: str) -> None:
    """Refuse a folder ``root`` holding a symlink (at any depth) that leads outside it: for a folder
    that a library then reads by walking it (a zarr store), where no single path can be checked.

    Symlinks are not followed while walking; each one found is checked with :func:`path_inside`.

    Raises:
        FormatError: a symlink leads outside ``root`` (names it), or ``root`` cannot be listed.
    """
    root = Path(root)
    if not root.is_dir():
        return
    try:
        for folder, dirs, files in os.walk(root, followlinks=False, onerror=_raise):
            for name in (*dirs, *files):
                path = Path(folder) / name
                if path.is_symlink():
                    path_inside(root, path.relative_to(root), what)
    except OSError as exc:
        raise FormatError(f"{what}: {root} cannot be listed: {exc}") from None


def _raise(exc: OSError) -> None:
    raise exc
