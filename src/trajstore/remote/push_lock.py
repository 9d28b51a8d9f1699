"""One push per URL at a time: the push lock ``<url>/push.lock``.

A push takes the lock before it reads the URL's manifest and holds it until it has deleted what
retention let go; a second push to the URL while it is held fails at once with
:class:`~trajstore.errors.PushConflictError` naming the holder. The lock is a small JSON object::

    {"host": "robot-3", "pid": 4711, "start": "<boot id>:<start ticks>", "token": "9f2c...",
     "acquired": 1764561234.5, "expires": 1764561834.5}

* On a local file system (``file://``, a plain path) it is a kernel ``flock`` on that file, held by the
  pushing process: the kernel drops it when the process ends, however it ends. The JSON is only there
  to name the holder.
* On S3 it is created with a conditional PUT (``If-None-Match: *``: exactly one of two pushes creating it
  at once succeeds) and rewritten every :data:`LOCK_SECONDS` / 3 by the holder (``If-Match`` on its last
  ETag) with a new expiry; the holder deletes it at the end. A lock whose expiry has passed (by this
  pusher's clock: pushers' clocks must agree to within minutes), or whose holder is a process of this
  host that is gone (:func:`trajstore._fs.owner_is_gone`: killed), is taken over, again by a conditional
  PUT on the ETag that was read, so two pushes taking over the same stale lock cannot both win. A
  holder whose lock was taken over (it stalled past the expiry) finds out at its next refresh, and
  before it writes the manifest (:meth:`PushLock.confirm`), and stops there.
* On other fsspec stores the same protocol runs with the file system's ``pipe_file(mode="create")`` and
  a compare-then-write for the takeover: atomic as far as that store's exclusive create is.

The time the lock was taken, by the store's clock (the lock object's modification time), is
:attr:`PushLock.acquired_at`: retention never deletes an object written at or after it
(:mod:`~trajstore.remote.retention`), so objects a concurrent or later push uploaded stay.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from trajstore._fs import owner_is_gone, owner_record
from trajstore.errors import PushConflictError

LOCK_NAME = "push.lock"
#: URL schemes whose store takes conditional PUTs (If-None-Match, If-Match): S3 and its look-alikes.
S3_PROTOCOLS = ("s3", "s3a")
#: How long a push lock on an object store holds without being refreshed (seconds): ten minutes.
LOCK_SECONDS = 600.0


def modified_time(info: dict[str, Any]) -> float | None:
    """The modification time (Unix seconds, the store's clock) in an fsspec ``info`` dict, or ``None``."""
    for key in ("LastModified", "mtime", "updated", "last_modified", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def describe_holder(owner: Any) -> str:
    """``"pid 4711 on robot-3 (since 12:00:34 UTC, lock expires 12:10:34 UTC)"`` for a lock's JSON."""
    if not isinstance(owner, dict):
        return "another push (its lock names no owner)"

    def when(t: Any) -> str:
        return time.strftime("%H:%M:%S UTC", time.gmtime(t)) if isinstance(t, (int, float)) else "?"

    text = f"pid {owner.get('pid')} on {owner.get('host')} (since {when(owner.get('acquired'))}"
    return text + (f", lock expires {when(owner['expires'])})" if "expires" in owner else ")")


class PushLock:
    """The push lock of the URL at ``root`` of ``fs``, as a context manager: ``with PushLock(...) as lock``.

    Raises (on entry):
        PushConflictError: another push holds the lock (names it); nothing was written.
    """

    def __init__(self, fs: Any, root: str, url: str, *, local: bool, s3: bool, seconds: float = LOCK_SECONDS):
        self.fs, self.root, self.url, self.local, self.s3, self.seconds = fs, root, url, local, s3, seconds
        self.path = f"{root}/{LOCK_NAME}"
        self.token = secrets.token_hex(16)
        self.acquired_at = 0.0
        self._acquired_clock = 0.0
        self._tag: Any = None  # S3: the ETag of our last write; elsewhere the bytes we last wrote
        self._fd: int | None = None
        self._lost: str | None = None
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- the lock's content ----------------------------------------------------------------------------

    def _record(self) -> bytes:
        now = time.time()
        return json.dumps({**owner_record(), "token": self.token, "acquired": self._acquired_clock or now,
                           "expires": now + self.seconds}).encode()

    def _conflict(self, owner: Any, why: str = "another push to this URL is under way") -> PushConflictError:
        return PushConflictError(f"{self.url}: {why}: {describe_holder(owner)}; one push per URL at a time: "
                                 "push again when it has ended")

    # -- taking and giving back --------------------------------------------------------------------------

    def __enter__(self) -> "PushLock":
        self._acquired_clock = time.time()
        if self.local:
            self._take_local()
        else:
            self._take_object()
            self._thread = threading.Thread(target=self._refresh_loop, name="trajstore-push-lock", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        _HELD.discard(self.token)
        if self.local:
            self._release_local()
            return
        try:
            self._release_object()
        except Exception:  # noqa: BLE001 - the push's outcome stands; a lock left behind expires, and a
            pass  # later push of this process or host takes it over at once (its holder is gone)

    def _take_local(self) -> None:
        import fcntl

        Path(self.root).mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._conflict(_load(Path(self.path).read_bytes() if os.path.exists(self.path) else b"")) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._record(), 0)
        os.fsync(fd)
        self._fd = fd
        self.acquired_at = os.fstat(fd).st_mtime

    def _release_local(self) -> None:
        import fcntl

        if self._fd is not None:
            os.ftruncate(self._fd, 0)  # names no holder once free
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def _take_object(self) -> None:
        for _ in range(5):
            data = self._record()
            try:
                self._tag = self._create(data)
                break
            except FileExistsError:
                pass
            found = self._read()
            if found is None:
                continue  # released meanwhile: create it again
            tag, owner = found
            if not (_expired(owner) or owner_is_gone(owner) or _left_by_this_process(owner)):
                raise self._conflict(owner)
            try:  # a stale lock: replace exactly the one that was read
                self._tag = self._replace(data, tag)
                break
            except (FileNotFoundError, _Moved):
                continue  # another push took it over (or released it) first: look again
        else:
            raise self._conflict(None, "the push lock kept changing hands")
        info = self.fs.info(self.path)
        self.acquired_at = modified_time(info) or time.time()
        _HELD.add(self.token)  # only now: a lock this process made but could not date is taken over next time

    def _release_object(self) -> None:
        with self._mutex:
            if self._lost is not None:
                return
            found = self._read()
            if found is not None and isinstance(found[1], dict) and found[1].get("token") == self.token:
                self.fs.rm_file(self.path)

    # -- keeping it --------------------------------------------------------------------------------------

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                self._refresh()
            except Exception:  # noqa: BLE001 - a network blip: the next refresh, or confirm(), tries again
                continue

    def _refresh(self) -> None:
        with self._mutex:
            if self._lost is not None:
                return
            try:
                self._tag = self._replace(self._record(), self._tag)
            except (FileNotFoundError, _Moved):
                found = self._read()
                self._lost = describe_holder(found[1] if found else None)

    def confirm(self) -> None:
        """Make sure this push still holds the lock, now (object stores: refresh it with a conditional
        write); call before writing the manifest.

        Raises:
            PushConflictError: another push took the lock over (this one stalled past its expiry).
        """
        if not self.local:
            self._refresh()
        self.raise_if_lost()

    def raise_if_lost(self) -> None:
        """Raises PushConflictError if a refresh found the lock taken over (a flag check: no request)."""
        if self._lost is not None:
            raise PushConflictError(f"{self.url}: this push's lock expired and was taken over by {self._lost}; "
                                    "it stopped before writing the manifest: push again when that push has ended")

    # -- conditional writes -----------------------------------------------------------------------------

    def _create(self, data: bytes) -> Any:
        """Write the lock only if there is none. Raises FileExistsError when there is one."""
        if self.s3:
            try:
                return self.fs.pipe_file(self.path, data, mode="create")["ETag"]
            except FileExistsError:
                raise
            except OSError as exc:
                if precondition_failed(exc):  # a create racing another one
                    raise FileExistsError(self.path) from None
                raise
        self.fs.pipe_file(self.path, data, mode="create")
        return data

    def _replace(self, data: bytes, tag: Any) -> Any:
        """Overwrite the lock only if it is still ``tag``. Raises _Moved or FileNotFoundError otherwise."""
        if self.s3:
            try:
                return self.fs.pipe_file(self.path, data, IfMatch=tag)["ETag"]
            except FileNotFoundError:
                raise
            except OSError as exc:
                if precondition_failed(exc):
                    raise _Moved() from None
                raise
        current = self.fs.cat_file(self.path)
        if current != tag:
            raise _Moved()
        self.fs.pipe_file(self.path, data)
        return data

    def _read(self) -> tuple[Any, Any] | None:
        """``(tag, parsed JSON or None)`` of the lock as it is, or None when there is none."""
        try:
            if self.s3:
                self.fs.invalidate_cache(self.path)
                tag = self.fs.info(self.path)["ETag"]
                data = self.fs.cat_file(self.path)
            else:
                data = tag = self.fs.cat_file(self.path)
        except FileNotFoundError:
            return None
        return tag, _load(data)


#: Tokens of the push locks this process holds now (a lock naming this process with another token was
#: left by one of its earlier pushes that could not delete it).
_HELD: set[str] = set()


def _left_by_this_process(owner: Any) -> bool:
    mine = owner_record()
    return (isinstance(owner, dict) and all(owner.get(k) == mine[k] for k in ("host", "pid", "start"))
            and owner.get("token") not in _HELD)


def precondition_failed(exc: BaseException) -> bool:
    """Whether an S3 error is a failed condition (412 PreconditionFailed, 409 ConditionalRequestConflict)."""
    cause = getattr(exc, "__cause__", None)
    code = str(getattr(cause, "response", {}).get("Error", {}).get("Code", "")) if cause is not None else ""
    return code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409") or \
        "pre-condition" in str(exc).lower()


class _Moved(Exception):
    """The lock is no longer the version a conditional write expected."""


def _load(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def _expired(owner: Any) -> bool:
    if not isinstance(owner, dict):
        return True  # not a lock this package wrote, or a cut-short one: nobody can refresh it
    expires = owner.get("expires")
    return not isinstance(expires, (int, float)) or expires <= time.time()
