"""Priorities across processes: a writer killed with SIGKILL while it updates and flushes, and a reader that
samples and refreshes while a writer process updates: whole committed generations only, the last one exact."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tests.replay_buffer.test_prioritized import add, make
from trajstore.replay_buffer import ReplayBuffer

N = 64
WRITER = r'''
import numpy as np
from trajstore.replay_buffer import ReplayBuffer
rb = ReplayBuffer.load_from({folder!r}, read_only=False)
steps = np.arange({n})
for g in range(1, {generations} + 1):
    rb.update_priorities(steps, g + steps / 1000.0, priority="td")  # generation g: g + i / 1000 for step i
    rb.flush()
    print(g, flush=True)
rb.close()
print("done", flush=True)
'''


def pattern(g):
    return (g + np.arange(N) / 1000.0).astype(np.float32)


def generation_of(values):
    """The generation whose values these are (1.0 everywhere: 0, before the first update), else None."""
    g = int(round(float(values[0])))
    expected = np.ones(N, np.float32) if g == 1 and values[1] == 1.0 else pattern(g)
    return (0 if g == 1 and values[1] == 1.0 else g) if np.array_equal(values, expected) else None


def prepared(tmp_path):
    rb = make(tmp_path, capacity=N)
    add(rb, range(N))
    rb.close()
    return tmp_path / "rb"


def writer(folder: Path, generations: int) -> subprocess.Popen:
    code = WRITER.format(folder=str(folder), n=N, generations=generations)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)


def test_a_killed_writer_leaves_the_last_committed_priorities(tmp_path):
    folder = prepared(tmp_path)
    for seed in range(3):
        proc = writer(folder, 10_000)
        flushed = []
        for line in proc.stdout:
            flushed.append(int(line))
            if len(flushed) >= 5 + 7 * seed:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader = ReplayBuffer.load_from(folder)
        g = generation_of(reader.priorities("td"))
        assert g is not None and flushed[-1] <= g <= flushed[-1] + 2  # the writer may have flushed again
        _, info = reader.sample(32, priority="td")
        assert info.weight.max() <= 1.0
        reader.close()
        rb = ReplayBuffer.load_from(folder, read_only=False)  # the next writer opens it, the same values
        assert generation_of(rb.priorities("td")) == g
        rb.close()


def test_a_reader_sees_whole_generations_and_the_last_one_after_the_final_flush(tmp_path):
    folder = prepared(tmp_path)
    generations = 300
    proc = writer(folder, generations)
    reader = ReplayBuffer.load_from(folder)
    seen = []
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        reader.refresh()
        _, info = reader.sample(64, priority="td", alpha=1.0, beta=1.0)  # never a torn tree
        values = reader.priorities("td")
        g = generation_of(values)
        assert g is not None, values
        p = values.astype(np.float64)
        np.testing.assert_allclose(info.weight, (p[info.index] / p.min()) ** -1.0, rtol=1e-5)
        seen.append(g)
    assert proc.wait(timeout=300) == 0
    assert seen == sorted(seen)  # a reader never goes back to an older generation
    assert len(set(seen)) > 3, seen  # it did read while the writer wrote
    reader.refresh()
    np.testing.assert_array_equal(reader.priorities("td"), pattern(generations))
    counts = np.bincount(reader.sample(20000, priority="td", alpha=1.0)[1].index, minlength=N)
    assert counts.min() > 0
    reader.close()
