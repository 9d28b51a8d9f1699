"""``trajstore view PATH|URL [--port N] [--host 127.0.0.1] [--open]``: the viewer's server, until Ctrl-C."""

from __future__ import annotations

import errno
import socket
from typing import Optional

import typer
from rich.markup import escape

from trajstore.cli import remote
from trajstore.cli._output import console, error_console, fail, progress_option


def view_command(path: str = typer.Argument(..., metavar="PATH_OR_URL", help="Buffer folder, or the URL of a pushed buffer "
                                                      "(s3://bucket/rb)."),
                 port: int = typer.Option(8765, help="Port to listen on (0: any free one)."),
                 host: str = typer.Option("127.0.0.1", help="Address to bind: 127.0.0.1 answers this machine "
                                                            "only; 0.0.0.0 every network (the data is then "
                                                            "readable by anyone who can reach the port)."),
                 open_browser: bool = typer.Option(False, "--open", help="Open the page in the browser."),
                 storage_option: Optional[list[str]] = typer.Option(None, "--storage-option", "-o",
                                                                    help=remote.STORAGE_OPTION_HELP),
                 progress: bool = progress_option("Taken by every command (for scripts); the server shows no bar.")) -> None:
    """Look at a buffer in the browser: every episode (filter with the selection text of `copy --episodes`),
    its cameras as players in sync with plots of the low-dim leaves, its data, final observation and
    the buffer's statistics. Serves until Ctrl-C."""
    from trajstore.errors import TrajstoreError
    from trajstore.ops.stream_info import is_stream_folder
    from trajstore.view import serve

    if is_stream_folder(path):
        raise fail(f"{path} is a stream buffer (sensors at their own rates): the viewer shows the episodes of a "
                   f"replay buffer. Export it aligned and import the result, `trajstore export zarr {path} OUT.zarr "
                   "--anchor CAMERA_STREAM` then `trajstore import zarr OUT.zarr RB`, and view RB")
    if not 0 <= port <= 65535:
        raise fail(f"--port must be 0..65535, got {port}")
    host = host.strip().strip("[]")  # [::1] as in a URL
    if not host:
        raise fail("--host must name an address: 127.0.0.1 (this machine), ::1, or 0.0.0.0 (every network)")
    options = remote.parse_storage_options(storage_option)
    try:
        server = serve(path, host=host, port=port, open_browser=open_browser, storage_options=options)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise fail(f"port {port} on {host} is taken: give another with --port N (or --port 0 for any free one)")
        if isinstance(exc, socket.gaierror) or exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
            raise fail(f"--host {host}: cannot listen there ({exc.strerror or exc}); give an address of this "
                       "machine, e.g. 127.0.0.1")
        raise remote.remote_failure(path, path, exc)
    except (TrajstoreError, ValueError, ImportError, *remote.backend_errors()) as exc:
        raise remote.remote_failure(path, path, exc)
    console.print(f"viewing {escape(path)} at [bold]{server.url}[/bold] (Ctrl-C stops)", soft_wrap=True)
    if host in ("0.0.0.0", "::"):
        error_console.print(f"warning: listening on every network ({host}): anyone who can reach port "
                            f"{server.port} can read this buffer", soft_wrap=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
