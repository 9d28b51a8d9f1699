"""A real S3 endpoint for the remote tests: moto's server mode on a free loopback port, with s3fs as
the client (no mock of our own), and buffers with every storage kind."""

from __future__ import annotations

import socket
import uuid

import numpy as np
import pytest

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from trajstore.replay_buffer import ReplayBuffer  # noqa: E402
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace  # noqa: E402
from trajstore.storages import (DictStorage, ImageStorage, MemmapStorage, VideoStorage,  # noqa: E402
                                dict_storage_kwargs_from_space)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def storage_options(s3_endpoint):
    return {"key": "test", "secret": "test", "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "eu-west-1"}}


@pytest.fixture(scope="session")
def s3(storage_options):
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, **storage_options)
    fs.mkdir("trajstore-tests")
    return fs


@pytest.fixture
def bucket_url(s3):
    """A fresh prefix in the test bucket."""
    return f"s3://trajstore-tests/{uuid.uuid4().hex[:12]}"


H, W = 24, 32
CAM = {"kind": "image", "layout": "HWC", "fps": 10}
STEP_SPACE = DictSpace({
    "observation": DictSpace({
        "rgb": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata=CAM),  # JPEG chunks
        "depth": BoxSpace(0, 65535, (H, W), np.uint16, metadata={"kind": "depth"}),  # 16-bit PNG chunks
        "wrist": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "video", "fps": 10}),  # H.264 segments
        "joints": BoxSpace(-10, 10, (4,), np.float32),  # HDF5
    }),
    "action": BoxSpace(-1, 1, (2,), np.float32),  # memmap
    "reward": BoxSpace(-100, 100, (), np.float32),
    "terminated": BinarySpace(()),
    "truncated": BinarySpace(()),
})


def storage_kwargs(chunk_bytes: int = 2**16) -> dict:
    return dict_storage_kwargs_from_space(
        STEP_SPACE, kind_storage_cls={"image": ImageStorage, "depth": ImageStorage, "video": VideoStorage},
        kind_kwargs={"depth": {"format": "PNG", "chunk_bytes": chunk_bytes}, "image": {"chunk_bytes": chunk_bytes},
                     "video": {"segment_frames": 16}},
        key_storage_cls={"action": MemmapStorage})


def frame(n: int, channels: int = 3, dtype=np.uint8) -> np.ndarray:
    """A smooth frame that depends on ``n`` (so every step differs)."""
    y, x = np.mgrid[0:H, 0:W]
    base = (x * 5 + y * 3 + n * 7) % 200
    if channels == 0:
        return (base * 300 + n).astype(dtype)
    return np.stack([(base + 20 * c) % 256 for c in range(channels)], -1).astype(dtype)


def step(n: int, last: bool) -> dict:
    return {"observation": {"rgb": frame(n), "depth": frame(n, 0, np.uint16), "wrist": frame(n + 1000),
                            "joints": np.full(4, (n % 50) / 10, np.float32)},
            "action": np.array([np.sin(n), np.cos(n)], np.float32), "reward": np.float32(n % 7),
            "terminated": last, "truncated": False}


def record(rb: ReplayBuffer, first_episode: int, episodes: int, length: int = 12) -> None:
    """``episodes`` episodes of ``length`` steps, each with a final observation and JSON data."""
    for e in range(first_episode, first_episode + episodes):
        for t in range(length):
            rb.append(step(e * 100 + t, t == length - 1))
        final = step(e * 100 + length, True)["observation"]
        rb.end_episode(final_observation=final, task=f"task {e}", success=e % 2 == 0)


def make_buffer(path, *, capacity: int | None = None, episodes: int = 5, chunk_bytes: int = 2**16) -> ReplayBuffer:
    """A writable buffer with every storage kind, ``episodes`` episodes recorded (a ring wraps when
    ``capacity`` is less than 12 * episodes)."""
    rb = ReplayBuffer.create(DictStorage, STEP_SPACE, cache_path=path, capacity=capacity,
                             **storage_kwargs(chunk_bytes))
    record(rb, 0, episodes)
    return rb


def assert_same(a, b, where: str = "") -> None:
    """Nested dicts of arrays equal leaf by leaf (exactly: the same bytes decode the same way)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, tuple):
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        x, y = np.asarray(a), np.asarray(b)
        assert x.dtype == y.dtype and x.shape == y.shape, where
        assert np.array_equal(x, y), where
