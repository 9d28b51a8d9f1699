"""The committed stream buffer of format version 1 (``streams_v1/``, written once by
``make_stream_fixture.py``) still opens, reads back what was written, aligns, and a writer ends its open
episode as interrupted. Never regenerate the fixture."""

import shutil
from pathlib import Path

import numpy as np

from tests.format_fixtures.make_stream_fixture import RATES, SPACES, times, values
from trajstore.streams import StreamBuffer

FIXTURE = Path(__file__).parent / "streams_v1"


def test_stream_fixture_reads_back(tmp_path):
    folder = tmp_path / "b"
    shutil.copytree(FIXTURE, folder)
    with StreamBuffer.load_from(folder) as buf:
        assert list(buf.streams) == list(SPACES) and buf.num_episodes == 3
        assert [e.data for e in buf.episodes[:2]] == [{"task": "pick", "episode": 0}, {"task": "pick", "episode": 1}]
        for k in range(3):  # the third is the open episode a reader sees as it was left
            for name in SPACES:
                t, v = buf.read(name, episode=k)
                np.testing.assert_array_equal(t, times(name, k))
                np.testing.assert_array_equal(v, values(name, k))  # PNG frames: exact
        view = buf.aligned(anchor="wrist", how={"joints": "linear"})
        assert len(view) == 3 * RATES["wrist"][0]
        np.testing.assert_array_equal(view[1]["joints"], values("joints", 0)[5])  # 100 ms = joint sample 5
    with StreamBuffer.load_from(folder, read_only=False) as writer:
        last = writer.episode(-1)
        assert writer.num_episodes == 3 and last.interrupted and not last.done
        assert last.streams["joints"].count == RATES["joints"][0]
