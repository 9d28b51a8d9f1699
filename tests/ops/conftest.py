import pytest

from tests.ops.preview_buffers import make_buffer


@pytest.fixture(scope="module")
def buffer300(tmp_path_factory):
    """Episode 0: 300 steps, episode 1: 40 (see preview_buffers)."""
    return make_buffer(tmp_path_factory.mktemp("pv") / "rb")


@pytest.fixture(scope="module")
def stamped(tmp_path_factory):
    """As ``buffer300`` with a ``timestamp`` leaf (25 Hz clock)."""
    return make_buffer(tmp_path_factory.mktemp("pv") / "rb", timestamp=True, lengths=[30, 5])
