"""The viewer over a pushed buffer (moto's S3 server): the same answers and frames as over the folder,
every storage kind (JPEG, 16-bit PNG depth, H.264 video), frames by the remote reader's byte ranges."""

import io
from urllib.parse import quote

import numpy as np
import pytest
from PIL import Image

from tests.remote.conftest import H, W, frame, make_buffer
from tests.view.conftest import get
from trajstore.remote.publish import push
from trajstore.view import serve

pytest.importorskip("av")


@pytest.fixture(scope="module")
def servers(tmp_path_factory, s3, storage_options):
    folder = tmp_path_factory.mktemp("view-remote") / "rb"
    with make_buffer(folder, episodes=3):
        pass
    url = "s3://trajstore-tests/view-remote"
    push(folder, url, storage_options)
    with serve(folder) as local, serve(url, storage_options=storage_options) as remote:
        yield local, remote, url


def test_the_url_is_the_title_and_episodes_equal(servers):
    local, remote, url = servers
    b = get(remote, "/api/buffer").json()
    assert b["title"] == url and b["episodes"] == 3 and b["steps"] == 36
    assert get(remote, "/api/episodes").json() == get(local, "/api/episodes").json()
    assert get(remote, "/api/episode/1/series").json() == get(local, "/api/episode/1/series").json()
    assert get(remote, "/api/episode/2").json()["data"] == {"task": "task 2", "success": True}


@pytest.mark.parametrize("camera", ["observation/rgb", "observation/depth", "observation/wrist"])
def test_frames_equal_the_folders(servers, camera):
    local, remote, _ = servers
    path = f"/api/episode/1/frame/4?camera={quote(camera, safe='')}"
    a, b = get(remote, path), get(local, path)
    assert a.status == b.status == 200 and a.ctype == b.ctype
    assert a.body == b.body  # the same decoded pixels encode to the same bytes
    got = np.asarray(Image.open(io.BytesIO(a.body)).convert("RGB")).astype(int)
    assert got.shape == (H, W, 3)
    if camera == "observation/rgb":  # JPEG stored, JPEG served: close to what was appended
        assert np.abs(got - frame(104).astype(int)).mean() < 4
    if camera == "observation/depth":  # 16-bit depth shown as gray scaled min..max: order kept
        depth = frame(104, 0, np.uint16).astype(np.int64)
        flat = got[..., 0].reshape(-1)
        order = np.argsort(depth.reshape(-1), kind="stable")
        assert (np.diff(flat[order]) >= 0).all() and flat.min() == 0 and flat.max() == 255
