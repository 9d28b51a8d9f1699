"""File-system primitives shared by the storages and the buffer: atomic JSON, fresh folders, fsync."""

from __future__ import annotations

import json
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

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
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    payload = json.dumps(data, indent=indent, allow_nan=False, separators=None if indent else (",", ":")).encode()
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync_folder:
        fsync_dir(path.parent)


def read_json(path: str | os.PathLike, what: str) -> Any:
    """Load a JSON file, turning a missing or corrupt file into :class:`FormatError`."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        raise FormatError(f"{what}: {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{what}: {path} is not valid JSON ({exc})") from None


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


@contextmanager
def staged_folder(out: str | os.PathLike) -> Iterator[Path]:
    """Build a folder under a temporary name beside ``out`` and rename it to ``out`` when the body
    returns, so ``out`` appears whole or not at all; if the body raises, the temporary folder is
    removed and ``out`` is as it was.

    Yields the temporary path (it does not exist yet: the body makes it).

    Raises:
        StorageExistsError: ``out`` is a file or a non-empty folder (checked first; nothing is made).
    """
    out = Path(out)
    check_new_folder(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    shutil.rmtree(tmp, ignore_errors=True)  # left by an earlier run of this process id that died
    try:
        yield tmp
        os.replace(tmp, out)  # an empty folder at out is replaced (POSIX rename)
        fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
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
