"""Two readers of a live buffer in one process: the second open joins HDF5's state of the first file
handle, whose dataset sizes are those of its last refresh; the second reader must see every committed
step anyway (before the fix: "trajstore.json records N steps but the storage holds M")."""

import subprocess
import sys

import numpy as np

from tests.replay_buffer.test_replay_buffer import batch, make
from trajstore.replay_buffer import ReplayBuffer

WRITER = """
import sys
from trajstore.replay_buffer import ReplayBuffer
from tests.replay_buffer.test_replay_buffer import batch

rb = ReplayBuffer.load_from(sys.argv[1], read_only=False)
for line in sys.stdin:
    k = int(line)
    rb.extend(batch(5, k))
    rb.end_episode()
    print(len(rb), flush=True)
rb.close()
"""


def test_a_second_reader_opened_later_sees_the_steps_committed_since(tmp_path):
    make(tmp_path).close()
    path = tmp_path / "rb"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write("0\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "5"
        first = ReplayBuffer.load_from(path)
        assert len(first) == 5
        for k in (1, 2):
            proc.stdin.write(f"{k}\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == str(5 * (k + 1))
        with ReplayBuffer.load_from(path) as second:  # the same data.h5, open in this process already
            assert len(second) == 15
            np.testing.assert_array_equal(second[10:15]["action"], batch(5, 2)["action"])
        assert first.refresh() and len(first) == 15
        np.testing.assert_array_equal(first[5:10]["action"], batch(5, 1)["action"])
        first.close()
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()[-2000:]
