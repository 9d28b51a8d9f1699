"""The viewer's web server: the standard library's ``ThreadingHTTPServer`` serving the page (``static/``)
and the JSON and image answers of :class:`~trajstore.view.buffer_api.BufferAPI`, bound to 127.0.0.1 by
default.

Routes (all ``GET``; ``HEAD`` too):

* ``/`` the page; ``/static/<file>`` its script, style and the vendored uPlot (only files of the
  package's ``static/`` folder: any other path, ``..`` included, is a 404);
* ``/api/buffer``; ``/api/episodes`` (``?select=TEXT`` for a selection); ``/api/episode/<id>``;
  ``/api/episode/<id>/series``; ``/api/episode/<id>/frame/<step>?camera=<key>``;
  ``/api/episode/<id>/final_frame?camera=<key>`` (what each answers: :mod:`trajstore.view.buffer_api`).

A bad request gets a 4xx answer with a JSON body ``{"error": "..."}`` naming what was wrong (an unknown
route or file, a malformed id or step, a missing ``camera``, a selection that does not parse); an error
of the buffer's reader is a 500 with its message, never a traceback in the page. Nothing the server does
writes to the buffer: it opens paths read-only.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from trajstore.errors import StaleReadError
from trajstore.view.buffer_api import BufferAPI, ViewRequestError

__all__ = ["ViewServer", "serve", "STATIC_TYPES"]

#: Content types of the page's files, by suffix; a file of another suffix is never served.
STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}
_STATIC_NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?")
_EPISODE_ROUTE = re.compile(r"/api/episode/(-?\d{1,19})(/series|/frame/(-?\d{1,19})|/final_frame)?")
#: Seconds a connection may sit idle or half-sent before it is closed.
IDLE_SECONDS = 60
#: Longest selection text taken (the parser is linear, this bounds the work of one request).
MAX_SELECTION_CHARS = 10_000


def _static_root() -> Path:
    return Path(str(resources.files("trajstore.view") / "static"))


class ViewServer:
    """A running viewer: ``url``, :meth:`stop` (also on leaving a ``with`` block), :meth:`wait`.

    Made by :func:`serve`; answers on a background thread, so a notebook cell returns at once (the
    notebook shows the address as a link).
    """

    def __init__(self, api: BufferAPI, host: str, port: int, owned: Any = None):
        self.api = api
        self._owned = owned  # a buffer this server opened and closes
        server_cls = _HTTPServer6 if ":" in host else _HTTPServer
        self._httpd = server_cls((host, port), _handler_for(api, _allowed_hosts(host)))
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self._httpd.server_address[1]}/"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="trajstore-view", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def wait(self) -> None:
        """Block until :meth:`stop` is called from another thread or the process is interrupted."""
        self._thread.join()

    def stop(self) -> None:
        """Stop answering, free the port and close the buffer if this server opened it."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> "ViewServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ViewServer({self.api.title!r} at {self.url})"

    def _repr_html_(self) -> str:
        return f'<a href="{self.url}" target="_blank">trajstore view of {self.api.title}: {self.url}</a>'


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the page opens several connections at once; 5 makes some wait a SYN retry (1 s)


class _HTTPServer6(_HTTPServer):
    address_family = socket.AF_INET6


def _allowed_hosts(host: str) -> set[str] | None:
    """Host header names the server answers (without the port), or ``None`` for any: a page served on
    127.0.0.1 must not be readable by another site through DNS rebinding (its name resolving to 127.0.0.1)."""
    if host in ("0.0.0.0", "::", ""):
        return None  # every interface: the user chose to serve the network
    return {host.lower(), "localhost", "127.0.0.1", "[::1]", f"[{host.lower()}]"}


def serve(rb_or_path: Any, *, host: str = "127.0.0.1", port: int = 0, open_browser: bool = False,
          storage_options: dict[str, Any] | None = None) -> ViewServer:
    """Start the viewer of a buffer and return it running (on a background thread).

    Args:
        rb_or_path: an open :class:`~trajstore.ReplayBuffer` (left open when the server stops; a buffer
            open for writing is viewed through a reader of its folder opened here, which sees what the
            writer flushes, so recording goes on undisturbed), or a buffer folder or URL (``s3://bucket/rb``, opened read-only with ``storage_options`` as
            :meth:`~trajstore.ReplayBuffer.load_from` does; closed when the server stops).
        host: address to bind; 127.0.0.1 (this machine only) by default. ``port``: 0 picks a free one.
        open_browser: open the page in the system's browser.

    Returns:
        A :class:`ViewServer`; its ``url`` is the page's address.

    Raises:
        FormatError: the path is not a buffer folder; the errors of ``load_from``.
        OSError: the port is taken (``EADDRINUSE``), the host is no address of this machine.
        ValueError: a buffer being written that has no folder (in memory: nothing another thread may read).
    """
    from trajstore.replay_buffer.replay_buffer import ReplayBuffer

    owned = None
    if isinstance(rb_or_path, ReplayBuffer) and not rb_or_path.read_only:
        if rb_or_path.cache_path is None:
            raise ValueError("an in-memory buffer being written cannot be viewed (the server reads on threads of "
                             "its own): give it a cache_path, or view it once closed")
        rb_or_path = rb_or_path.cache_path  # a reader of the folder: the writer's own state is never touched
    if isinstance(rb_or_path, ReplayBuffer):
        rb, title = rb_or_path, str(rb_or_path.published_snapshot[0] if rb_or_path.published_snapshot
                                    else rb_or_path.cache_path or "memory buffer")
    else:
        title = os.fspath(rb_or_path)
        rb = owned = ReplayBuffer.load_from(rb_or_path, read_only=True, storage_options=storage_options)
    try:
        server = ViewServer(BufferAPI(rb, title), host, port, owned)
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    if open_browser:
        webbrowser.open(server.url)
    return server


def _handler_for(api: BufferAPI, hosts: set[str] | None) -> type[BaseHTTPRequestHandler]:
    root = _static_root()

    class Handler(BaseHTTPRequestHandler):
        server_version = "trajstore-view"
        timeout = IDLE_SECONDS  # an idle or half-sent connection is closed, not held by a thread for ever
        protocol_version = "HTTP/1.1"  # keep-alive: the page fetches many frames
        # Headers and body are two writes: with Nagle on, the client's delayed ACK holds each answer
        # ~40 ms (25 frames/s at most, whatever the frame size).
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            self._answer(send_body=True)

        def do_HEAD(self) -> None:
            self._answer(send_body=False)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per frame is noise
            pass

        def handle(self) -> None:
            try:
                super().handle()
            except (ConnectionError, TimeoutError):  # the page went away or stalled: nothing to tell anyone
                self.close_connection = True

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """The standard library's own errors (a malformed request line, an unknown method) as JSON too."""
            body = _json({"error": f"{code} {message or HTTPStatus(code).phrase}"})
            self.send_response(code, message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD" and code >= 200 and code not in (204, 304):
                self.wfile.write(body)

        def _answer(self, send_body: bool) -> None:
            try:
                if hosts is not None and _host_name(self.headers.get("Host", "")) not in hosts:
                    raise ViewRequestError(403, "this viewer answers requests for its own address only (the Host "
                                                "header names another)")
                status, body, ctype = _route(api, root, self.path)
            except ViewRequestError as exc:
                status, body, ctype = exc.status, _json({"error": str(exc)}), "application/json"
            except StaleReadError as exc:  # a ring overwrote what was being read: the page asks again
                status, body, ctype = 409, _json({"error": str(exc)}), "application/json"
            except Exception as exc:  # noqa: BLE001 - the page gets the message, never a dropped connection
                status, body = HTTPStatus.INTERNAL_SERVER_ERROR, _json({"error": f"{type(exc).__name__}: {exc}"})
                ctype = "application/json"
            self.send_response(int(status))
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")  # a ring or a live writer changes what a URL holds
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if send_body:
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the page moved on (a skipped frame)
                    self.close_connection = True

    return Handler


def _route(api: BufferAPI, root: Path, raw_path: str) -> tuple[int, bytes, str]:
    """``(status, body, content type)`` of one request path.

    Raises:
        ViewRequestError: a 4xx answer.
    """
    if len(raw_path) > 16_384:
        raise ViewRequestError(414, "request path too long")
    parts = urlsplit(raw_path)
    try:
        query = parse_qs(parts.query, keep_blank_values=True, max_num_fields=8, errors="strict")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ViewRequestError(400, f"bad query string: {exc}") from None
    path = parts.path
    if path in ("/", "/index.html"):
        return _static(root, "index.html")
    if path.startswith("/static/"):
        return _static(root, path[len("/static/"):])
    if path == "/api/buffer":
        return 200, _json(api.buffer()), "application/json"
    if path == "/api/episodes":
        if "select" in query:
            text = _one(query, "select")
            if len(text) > MAX_SELECTION_CHARS:
                raise ViewRequestError(400, f"selection of {len(text)} characters; at most {MAX_SELECTION_CHARS}")
            if not text.strip():
                return 200, _json(api.episodes()), "application/json"
            return 200, _json(api.select(text)), "application/json"
        return 200, _json(api.episodes()), "application/json"
    m = _EPISODE_ROUTE.fullmatch(path)
    if m is None:
        raise ViewRequestError(404, f"no such page or API route: {path[:200]}")
    episode, what, step = int(m.group(1)), m.group(2), m.group(3)
    if what is None:
        return 200, _json(api.episode(episode)), "application/json"
    if what == "/series":
        return 200, _json(api.series(episode)), "application/json"
    camera = _one(query, "camera")
    if what == "/final_frame":
        body, ctype = api.final_frame(episode, camera)
    else:
        first = query.get("first", [""])[0]
        if first not in ("", "null") and not re.fullmatch(r"\d{1,19}", first):
            raise ViewRequestError(400, f"first must be a step number, got {first[:40]!r}")
        body, ctype = api.frame(episode, int(step), camera, int(first) if first not in ("", "null") else None)
    return 200, body, ctype


def _static(root: Path, name: str) -> tuple[int, bytes, str]:
    """A file of the page's folder: plain names only (one sub-folder deep), known suffixes only."""
    suffix = os.path.splitext(name)[1]
    if not _STATIC_NAME.fullmatch(name) or ".." in name.split("/") or suffix not in STATIC_TYPES:
        raise ViewRequestError(404, f"no static file {name[:200]!r}")
    file = (root / name).resolve()
    if root.resolve() not in file.parents or not file.is_file():
        raise ViewRequestError(404, f"no static file {name[:200]!r}")
    return 200, file.read_bytes(), STATIC_TYPES[suffix]


def _host_name(header: str) -> str:
    """The name of a Host header without its port: ``localhost:8765`` -> ``localhost``, ``[::1]:80`` -> ``[::1]``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _one(query: dict[str, list[str]], name: str) -> str:
    values = query.get(name)
    if not values:
        raise ViewRequestError(400, f"the request needs ?{name}=...")
    return values[0]


def _json(value: Any) -> bytes:
    return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()
