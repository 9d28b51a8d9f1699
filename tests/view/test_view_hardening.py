"""What the viewer's server does with hostile or unlucky requests: other sites' Host headers (DNS
rebinding), a ring moving an episode's start under the page, methods it does not serve, stalled
connections, a buffer still being recorded in the same process, odd camera leaves."""

import http.client
import socket
import threading
import time
from urllib.parse import quote

import numpy as np
import pytest

from tests.view.conftest import get
from tests.view.viewer_buffers import LENGTHS, frame_colour, make_buffer, steps
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space
from trajstore.view import serve

CAM = quote("observation/pixels", safe="")


def raw(server, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


@pytest.mark.parametrize("host,status", [("attacker.example:{port}", 403), ("localhost:{port}", 200),
                                         ("127.0.0.1:{port}", 200), ("127.0.0.1.nip.io:{port}", 403), ("", 403)])
def test_only_its_own_host_names_are_answered(server, host, status):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.putrequest("GET", "/api/episode/0", skip_host=True)
    if host:
        conn.putheader("Host", host.format(port=server.port))
    conn.endheaders()
    r = conn.getresponse()
    body = r.read()
    assert r.status == status, body
    if status == 403:
        assert b"its own address" in body and b"seed" not in body


def test_unknown_methods_and_malformed_requests_get_json(server):
    answer = raw(server, b"POST /api/buffer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 501") and b'{"error":"501' in answer
    answer = raw(server, b"GARBAGE\r\n\r\n")  # no version: answered as HTTP/0.9, a body without headers
    assert answer.endswith(b'{"error":"400 Bad request syntax (\'GARBAGE\')"}')
    answer = raw(server, b"GET /api/buffer HTTP/1.1 extra\r\n\r\n")  # a bad version: no headers either
    assert answer.endswith(b'{"error":"400 Bad request version (\'extra\')"}')


def test_a_selection_of_ids_not_held_is_a_400(server):
    a = get(server, "/api/episodes?select=99")
    assert a.status == 400 and "not held" in a.json()["error"]


def test_a_ring_moving_an_episodes_start_is_a_409_then_the_new_numbering(tmp_path):
    from tests.view.viewer_buffers import step_space
    from trajstore.storages import ImageStorage

    sp = step_space()
    kwargs = dict_storage_kwargs_from_space(sp, kind_storage_cls={"image": ImageStorage},
                                            key_kwargs={"observation/pixels": {"format": "PNG"}})
    writer = ReplayBuffer.create(DictStorage, sp, cache_path=tmp_path / "ring", capacity=60, **kwargs)
    try:
        for e, n in enumerate((30, 20)):
            writer.extend(steps(e, n))
            writer.end_episode(task="t", success=True)
        with serve(tmp_path / "ring") as s:
            ep = get(s, "/api/episode/0").json()
            assert ep["first"] == 0 and ep["steps"] == 30
            ok = get(s, f"/api/episode/0/frame/5?camera={CAM}&first=0")
            assert ok.status == 200
            writer.extend(steps(2, 25))  # 75 steps into 60: episode 0 loses its first 15
            writer.end_episode()
            get(s, "/api/episodes")  # the page's reload refreshes the view
            moved = get(s, f"/api/episode/0/frame/5?camera={CAM}&first=0")
            assert moved.status == 409 and "reload the episode" in moved.json()["error"]
            ep = get(s, "/api/episode/0").json()
            assert ep["first"] == 15 and ep["steps"] == 15 and ep["overwritten"] is True
            from PIL import Image
            import io

            again = get(s, f"/api/episode/0/frame/5?camera={CAM}&first=15")
            assert (np.asarray(Image.open(io.BytesIO(again.body))) == frame_colour(0, 20)).all()
    finally:
        writer.close()


def test_viewing_a_buffer_while_recording_into_it_in_the_same_process(tmp_path):
    """The notebook case: ``serve(rb)`` of the writer; the server reads through its own reader."""
    rb = make_buffer(tmp_path / "rb", lengths=(5,), close=False)
    errors = []
    stop = threading.Event()
    with serve(rb) as s:
        def read():
            while not stop.is_set():
                for path in ("/api/episodes", f"/api/episode/0/frame/2?camera={CAM}", "/api/buffer"):
                    a = get(s, path)
                    if a.status != 200:
                        errors.append((path, a.status, a.body[:200]))
        t = threading.Thread(target=read)
        t.start()
        try:
            for e in range(1, 25):
                rb.extend(steps(e, 7))
                rb.end_episode(task="more", success=False)
        finally:
            stop.set()
            t.join()
        assert get(s, "/api/episodes").json()["steps"] == [5] + [7] * 24
    assert errors == []
    assert len(rb.episodes) == 25  # the writer is still whole
    rb.close()


def test_an_in_memory_writer_is_refused():
    sp = DictSpace({"x": BoxSpace(-1, 1, (2,), np.float32)})
    rb = ReplayBuffer.create(DictStorage, sp, **dict_storage_kwargs_from_space(sp))
    with pytest.raises(ValueError, match="in-memory buffer being written cannot be viewed"):
        serve(rb)


def test_a_stalled_connection_is_closed_and_blocks_no_one(folder, monkeypatch):
    import trajstore.view.server as server_module

    monkeypatch.setattr(server_module, "IDLE_SECONDS", 1)
    with serve(folder) as s:
        stalled = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        stalled.sendall(b"GET /api/buffer HTTP/1.1\r\nHo")  # and nothing more
        assert get(s, "/api/episodes").json()["steps"] == list(LENGTHS)  # others are answered meanwhile
        t0 = time.monotonic()
        assert stalled.recv(100) == b""  # closed by the server after its idle timeout
        assert time.monotonic() - t0 < 20
        stalled.close()


def test_ipv6_loopback(folder):
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        s = serve(folder, host="::1")
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with s:
        assert s.url.startswith("http://[::1]:")
        conn = http.client.HTTPConnection("::1", s.port, timeout=30)
        conn.request("GET", "/api/episodes")
        assert conn.getresponse().status == 200


def test_a_chw_camera_in_hdf5_and_a_2d_chw_leaf(tmp_path):
    sp = DictSpace({"observation": DictSpace({
        "chw": BoxSpace(0, 255, (3, 8, 10), np.uint8, metadata={"kind": "image", "layout": "CHW"}),
        "flat": BoxSpace(0, 10, (8, 10), np.float32, metadata={"kind": "depth", "layout": "CHW"})})})
    from trajstore.storages import HDF5Storage

    rb = ReplayBuffer.create(HDF5Storage, sp, cache_path=tmp_path / "rb", check_bounds=False)
    chw = np.zeros((2, 3, 8, 10), np.uint8)
    chw[:, 0], chw[:, 2] = 200, 50  # red-blue
    flat = np.linspace(0, 10, 160, dtype=np.float32).reshape(2, 8, 10)
    flat[0, 0, 0] = np.nan  # a depth camera's no-return pixel
    rb.extend({"observation": {"chw": chw, "flat": flat}})
    rb.end_episode()
    rb.close()
    with serve(tmp_path / "rb") as s:
        b = get(s, "/api/buffer").json()
        cams = {c["key"]: c for c in b["cameras"]}
        assert (cams["observation/chw"]["layout"], cams["observation/chw"]["height"]) == ("CHW", 8)
        assert cams["observation/flat"]["layout"] == "HWC"  # CHW makes no sense for (H, W): ignored
        from PIL import Image
        import io

        got = np.asarray(Image.open(io.BytesIO(get(s, "/api/episode/0/frame/1?camera=observation/chw").body)))
        assert got.shape == (8, 10, 3) and (got == (200, 0, 50)).all()
        depth = np.asarray(Image.open(io.BytesIO(get(s, "/api/episode/0/frame/0?camera=observation/flat").body)))
        assert depth[0, 0, 0] == 0 and depth[..., 0].max() == 255  # scaled over the finite pixels


def test_a_lost_first_timestamp_leaves_the_other_times(tmp_path):
    from trajstore.storages import HDF5Storage

    sp = DictSpace({"x": BoxSpace(-1, 1, (2,), np.float32), "timestamp": BoxSpace(0, 1e9, (), np.float64)})
    rb = ReplayBuffer.create(HDF5Storage, sp, cache_path=tmp_path / "rb", check_bounds=False)
    rb.extend({"x": np.zeros((3, 2), np.float32), "timestamp": np.array([np.nan, 50.0, 50.25])})
    rb.end_episode()
    rb.close()
    with serve(tmp_path / "rb") as s:
        e = get(s, "/api/episode/0").json()
    assert e["times"] == [None, 0.0, 0.25] and e["time_source"] == "leaf timestamp"
