"""``trajstore push FOLDER URL`` and ``trajstore pull URL FOLDER``: publish a buffer to object storage and back."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.markup import escape

from trajstore._json import loads_bounded
from trajstore.cli._output import EXIT_DAMAGE, console, fail, progress_bar, progress_option
from trajstore.damage import DamagedDataError
from trajstore.errors import TrajstoreError

#: Deepest JSON value read from one ``--storage-option`` (fsspec's options nest a few levels).
MAX_OPTION_DEPTH = 16
STORAGE_OPTION_HELP = ("fsspec storage option KEY=VALUE (repeatable); a dotted KEY nests "
                       "(client_kwargs.endpoint_url=http://127.0.0.1:9000); VALUE is JSON if it parses, else text. "
                       "Credentials may also come from the usual environment variables (AWS_ACCESS_KEY_ID, ...).")


def parse_storage_options(pairs: list[str] | None) -> dict[str, Any] | None:
    """``["key=test", "client_kwargs.endpoint_url=http://h:1"]`` -> nested dict; ``None`` for none.

    Raises:
        ValueError: a pair without ``=`` or with an empty key.
    """
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise ValueError(f"--storage-option expects KEY=VALUE, got {pair!r}")
        try:
            value = loads_bounded(text, source=f"--storage-option {key}", max_depth=MAX_OPTION_DEPTH)
        except ValueError:  # not JSON (or nested deeper than any option is): the text itself
            value = text
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"--storage-option {pair!r}: {part} was given a value and keys")
        node[last] = value
    return out


def backend_errors() -> tuple[type[BaseException], ...]:
    """Exceptions of the object-store client that mean "could not reach or authenticate" (botocore's,
    which are neither OSError nor ValueError), for one-line CLI errors; empty without s3fs."""
    try:
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return ()
    return (BotoCoreError,)


def remote_failure(url: str, folder: object, exc: BaseException) -> typer.Exit:
    """The one-line error of a command reaching ``url``; missing credentials say where to put them, a
    missing bucket that it must be made first."""
    text = str(exc)
    if isinstance(exc, FileNotFoundError) and "bucket" in text.lower():
        bucket = url.split("://", 1)[-1].split("/", 1)[0]
        text += (f" (push does not make buckets: create {bucket!r} first, e.g. `aws s3 mb s3://{bucket}` "
                 f"or s3fs.S3FileSystem(...).mkdir({bucket!r}))")
    return fail(f"{url}: {text}" if url not in text and str(folder) not in text else text)


def push(folder: Path = typer.Argument(..., help="Buffer folder (closed, or being recorded)."),
         url: str = typer.Argument(..., help="Where to publish it: s3://bucket/path or any fsspec URL."),
         storage_option: Optional[List[str]] = typer.Option(None, "--storage-option", "-o", help=STORAGE_OPTION_HELP),
         retain_seconds: float = typer.Option(3600.0, min=0, help="Keep the objects of snapshots replaced less than "
                                                                 "this long ago, for readers still using them "
                                                                 "(the one this push replaces is always kept)."),
         progress: bool = progress_option("Show a progress bar of the bytes uploaded (--no-progress: none).")
         ) -> None:
    """Publish a buffer folder under URL: only files the URL does not hold yet are uploaded, the
    manifest last, so readers see the previous push or this one, never a mix. A sharded dataset
    (trajstore.shards) is pushed shard by shard, its dataset file last."""
    from trajstore.remote import push as push_folder

    try:
        with progress_bar(desc="pushing", unit="B", unit_scale=True, enabled=progress) as bar:
            report = push_folder(folder, url, parse_storage_options(storage_option), retain_seconds=retain_seconds,
                                 progress=_updater(bar))
    except DamagedDataError as exc:  # damage, not bad input
        raise fail(exc, EXIT_DAMAGE)
    except (TrajstoreError, OSError, ValueError, ImportError, *backend_errors()) as exc:
        raise remote_failure(url, folder, exc)
    console.print(escape(report.line()), soft_wrap=True)


def pull(url: str = typer.Argument(..., help="A published buffer: s3://bucket/path or any fsspec URL."),
         folder: Path = typer.Argument(..., help="A new (or empty) local folder."),
         storage_option: Optional[List[str]] = typer.Option(None, "--storage-option", "-o", help=STORAGE_OPTION_HELP),
         progress: bool = progress_option("Show a progress bar of the bytes downloaded (--no-progress: none).")
         ) -> None:
    """Copy a published buffer into a new local folder (whole or not at all; every file checked
    against its SHA-256). A pushed sharded dataset is pulled shard by shard."""
    from trajstore.remote import pull as pull_folder

    try:
        with progress_bar(desc="pulling", unit="B", unit_scale=True, enabled=progress) as bar:
            report = pull_folder(url, folder, parse_storage_options(storage_option), progress=_updater(bar))
    except (TrajstoreError, OSError, ValueError, ImportError, *backend_errors()) as exc:
        raise remote_failure(url, folder, exc)
    console.print(escape(report.line()), soft_wrap=True)


def _updater(bar: Any) -> Any:
    """``progress(done, total)`` for push and pull, moving a tqdm bar to ``done`` of ``total``."""
    def update(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return update
