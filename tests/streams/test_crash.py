"""kill -9 of a stream buffer writer recording from 3 threads (camera 30 Hz, joints 500 Hz, force 1 kHz,
with periodic flush / end_episode by the main thread) at random moments: every stream keeps a committed
prefix of what the writer generated, and the next writable open ends the left-open episode as interrupted."""

import random
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.storages.test_hdf5_crash import kill_and_collect
from tests.streams.helpers import batch, spaces
from trajstore.streams import StreamBuffer

PERIOD = {"wrist": 33_333_333, "joints": 2_000_000, "ft": 1_000_000}
RUN_NS = 10 ** 12  # run r records from r * RUN_NS on: every timestamp names its run and sample

WRITER = """
import random, sys, threading, time
from trajstore.streams import StreamBuffer
from tests.streams.helpers import VALUE
from tests.streams.test_crash import PERIOD, RUN_NS

path, run, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
buf = StreamBuffer.load_from(path, read_only=False)
start = {n: buf.stream_length(n) for n in PERIOD}
print("START", flush=True)

def record(name):
    rng = random.Random(seed + len(name))
    i = 0
    while True:
        buf.append(name, VALUE[name](i % 997), run * RUN_NS + i * PERIOD[name])
        i += 1
        if rng.random() < 0.05:
            time.sleep(0.001)

for name in PERIOD:
    threading.Thread(target=record, args=(name,), daemon=True).start()
rng = random.Random(seed)
k = 0
while True:
    time.sleep(rng.uniform(0.01, 0.08))
    before = {n: buf.stream_length(n) - start[n] for n in PERIOD}
    if rng.random() < 0.3:
        buf.end_episode(run=run, k=k)
        k += 1
    else:
        buf.flush()
    print("C", *(before[n] for n in PERIOD), flush=True)
"""


def run_until_killed(path, run, seed, delay):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(run), str(seed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "START", proc.stderr.read()
        time.sleep(delay)
        out = kill_and_collect(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    committed = [list(map(int, line.split()[1:])) for line in out.splitlines() if line.startswith("C ")]
    return dict(zip(PERIOD, np.max(committed, axis=0).tolist())) if committed else dict.fromkeys(PERIOD, 0)


def check_prefixes(buf, runs, committed):
    """Each run's samples of each stream: exactly its first m samples (m >= what it reported committed),
    with the values it generated for those timestamps."""
    for name, period in PERIOD.items():
        t = buf.timestamps(name)
        assert (np.diff(t) > 0).all(), name  # runs follow each other; samples within a run increase
        for run in range(runs):
            mine = np.flatnonzero((t >= run * RUN_NS) & (t < (run + 1) * RUN_NS))
            m = len(mine)
            assert m >= committed[run][name], (name, run, m, committed[run])
            if not m:
                continue
            assert mine[-1] - mine[0] + 1 == m, (name, run)  # contiguous
            np.testing.assert_array_equal(t[mine] - run * RUN_NS, np.arange(m, dtype=np.int64) * period)
            got = buf.read_samples(name, mine)
            want = batch(name, np.arange(m) % 997)
            if name == "ft":
                np.testing.assert_array_equal(got["force"], want["force"])
                np.testing.assert_array_equal(got["torque"], want["torque"])
            else:
                np.testing.assert_array_equal(got, want)
    eps = buf.episodes
    for name in PERIOD:  # the episodes tile every stream
        assert sum(e.streams[name].count for e in eps) == buf.stream_length(name)
        assert [e.streams[name].start for e in eps] == np.cumsum(
            [0] + [e.streams[name].count for e in eps]).tolist()[:-1]
    assert all(e.done or e.interrupted for e in eps[:-1])


@pytest.mark.slow
def test_kill_9_while_recording_from_3_threads(tmp_path):
    path = tmp_path / "b"
    StreamBuffer.create(path, streams=spaces(), kind_kwargs={"image": {"format": "PNG"}}).close()
    rng = random.Random(18)
    committed = []
    for run in range(6):
        committed.append(run_until_killed(path, run, rng.randrange(1 << 30), delay=rng.uniform(0.2, 1.2)))
        with StreamBuffer.load_from(path) as reader:  # read-only: the left-open episode is still open
            check_prefixes(reader, run + 1, committed)
            seen = reader.episodes
            closed = [e for e in seen if e.done or e.interrupted]
            assert len(closed) >= len(seen) - 1
        with StreamBuffer.load_from(path, read_only=False) as writer:
            check_prefixes(writer, run + 1, committed)
            eps = writer.episodes
            assert all(e.done or e.interrupted for e in eps)  # the left-open episode is ended
            assert [e.id for e in eps] == list(range(len(eps)))
            # the closed episodes are the reader's; the samples after them (what the reader saw open, and
            # what the streams made durable after the last commit of streams.json) are one interrupted episode
            assert [(e.id, e.data, e.streams) for e in eps[:len(closed)]] == [(e.id, e.data, e.streams)
                                                                             for e in closed]
            assert len(eps) <= len(closed) + 1 and len(eps) >= len(seen)
            if len(eps) > len(closed):
                last = eps[-1]
                assert last.interrupted and not last.done and last.data == {}
                for name, span in last.streams.items():
                    if len(seen) > len(closed):
                        assert span.start == seen[-1].streams[name].start
                        assert span.stop >= seen[-1].streams[name].stop
            done = [e for e in eps if e.done]
            assert all(e.data["run"] <= run for e in done)
    assert sum(sum(c.values()) for c in committed) > 0  # the kills hit a writer that had committed samples
