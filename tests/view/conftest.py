import json

import pytest

from tests.view.viewer_buffers import make_buffer
from trajstore.view import serve


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_buffer(tmp_path_factory.mktemp("view") / "rb")


@pytest.fixture(scope="module")
def server(folder):
    with serve(folder) as s:
        yield s


class Answer:
    def __init__(self, status, ctype, body):
        self.status, self.ctype, self.body = status, ctype, body

    def json(self):
        assert self.ctype == "application/json", (self.status, self.ctype, self.body[:200])
        return json.loads(self.body)


def get(server, path, method="GET") -> Answer:
    """``path`` of the server as sent (no normalisation by a client library)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return Answer(r.status, r.getheader("Content-Type"), r.read())
    finally:
        conn.close()
