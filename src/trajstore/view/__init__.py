"""``trajstore view``: look at a buffer in a browser. Every episode in a list that filters with the
selection text of ``trajstore copy --episodes``; for the chosen one, every camera as a player in sync
with plots of the low-dim leaves, its data, final observation and the buffer's statistics.

``serve(rb_or_path)`` starts the server on a background thread and returns a :class:`ViewServer`
(``.url``, ``.stop()``); the page is plain HTML and JavaScript with uPlot vendored (no CDN, no build
step). Server and routes: :mod:`trajstore.view.server`; answers: :mod:`trajstore.view.buffer_api`.
"""

from trajstore.view.server import ViewServer, serve

__all__ = ["ViewServer", "serve"]
