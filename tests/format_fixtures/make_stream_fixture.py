"""Writes ``streams_v1/``: a stream buffer of format version 1 (``streams.json``), committed once; later
versions must still open it. Run once as ``python -m tests.format_fixtures.make_stream_fixture``; never
regenerate the committed folder. The values are functions of the sample number (``expected``)."""

from pathlib import Path

import numpy as np

from trajstore.spaces import BoxSpace
from trajstore.storages import ImageStorage

HERE = Path(__file__).parent
CAMERA = {"kind": "image", "layout": "HWC", "fps": 10}
SPACES = {"wrist": BoxSpace(0, 255, (8, 8, 3), np.uint8, metadata=CAMERA),
          "joints": BoxSpace(-1000, 1000, (3,), np.float32)}
#: (stream, samples per episode, period ns) for the two closed episodes; a third is left open (interrupted).
RATES = {"wrist": (4, 100_000_000), "joints": (20, 20_000_000)}


def times(name: str, episode: int) -> np.ndarray:
    n, period = RATES[name]
    return 1_700_000_000_000_000_000 + episode * 10**10 + np.arange(n, dtype=np.int64) * period


def values(name: str, episode: int) -> np.ndarray:
    n = RATES[name][0]
    k = np.arange(n) + 100 * episode
    if name == "wrist":
        return np.broadcast_to((k % 256).astype(np.uint8)[:, None, None, None], (n, 8, 8, 3)).copy()
    return np.stack([k, -k, np.full(n, episode)], 1).astype(np.float32)


def main() -> None:
    from trajstore.streams import StreamBuffer

    buf = StreamBuffer.create(HERE / "streams_v1", streams=SPACES, kind_storage_cls={"image": ImageStorage},
                              kind_kwargs={"image": {"format": "PNG"}})
    for episode in range(3):
        for name in SPACES:
            buf.extend(name, values(name, episode), times(name, episode))
        if episode < 2:
            buf.end_episode(task="pick", episode=episode)
    buf.close()  # the third episode stays open: the next writable open ends it as interrupted


if __name__ == "__main__":
    main()
