"""The episode log (format 3): O(1) bytes per commit, equality across reopen, a crash between the
log append and the metadata commit, ring compaction, readers in other processes, migration."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.replay_buffer.log_backdoor import committed_records, meta
from trajstore.replay_buffer import ReplayBuffer
from trajstore.replay_buffer.episode_log import MIN_DEAD
from trajstore.replay_buffer.episodes import EpisodeTable
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

FIXTURES = Path(__file__).parents[1] / "format_fixtures"
SPACE_CODE = """
import numpy as np
from trajstore.spaces import BoxSpace, DictSpace
def space():
    return DictSpace({"observation": DictSpace({"x": BoxSpace(-1e9, 1e9, (2,), np.float32)}),
                      "ep": BoxSpace(0, 2**40, (), np.int64)})
def steps(episode, n):
    return {"observation": {"x": np.full((n, 2), episode, np.float32)}, "ep": np.full(n, episode, np.int64)}
"""
_ns: dict = {}
exec(SPACE_CODE, _ns)
space, steps = _ns["space"], _ns["steps"]


def make(path, capacity=None):
    return ReplayBuffer.create(DictStorage, space(), cache_path=path, capacity=capacity,
                               **dict_storage_kwargs_from_space(space()))


def record(rb, first, lengths, *, final_every=3):
    """Episodes ``first, first + 1, ...`` of ``lengths`` steps; every step's ``ep`` leaf is the episode id,
    the data is ``{"k": id, "tags": [...]}``, every ``final_every``-th has a final observation."""
    for k, n in enumerate(lengths, first):
        rb.extend(steps(k, n))
        final = {"x": np.array([k, -k], np.float32)} if k % final_every == 0 else None
        rb.end_episode(final, k=k, tags=["a", k % 2 == 0, None])


def described(rb):
    return [(e.id, e.start, e.stop, e.overwritten, e.done, e.interrupted, e.has_final_observation, e.data)
            for e in rb.episodes]


def log_files(folder):
    return sorted(p.name for p in Path(folder).iterdir() if p.name.startswith("episodes.") and p.suffix == ".log")


# -- O(1) bytes per commit ----------------------------------------------------------------------
def written_bytes() -> int:
    """Bytes this process passed to write(2)/pwrite(2) so far (Linux ``/proc/self/io`` ``wchar``)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts bytes with Linux /proc/self/io")
def test_an_end_episode_writes_the_same_bytes_with_20_or_800_episodes_stored(tmp_path):
    # Step values repeat (k % 4): the statistics file (bounded histograms) keeps one size.
    with make(tmp_path / "rb") as rb:
        def cost_of_ten(first):
            costs, sizes = [], []
            for k in range(first, first + 10):
                rb.extend(steps(k % 4, 5))
                before = written_bytes()
                rb.end_episode(k=k)
                costs.append(written_bytes() - before)
                sizes.append(os.path.getsize(tmp_path / "rb" / "trajstore.json"))
            return int(np.median(costs)), max(sizes)

        for k in range(10):
            rb.extend(steps(k % 4, 5))
            rb.end_episode(k=k)
        early, early_meta = cost_of_ten(10)
        for k in range(20, 800):
            rb.extend(steps(k % 4, 5))
            rb.end_episode(k=k)
        late, late_meta = cost_of_ten(800)
        log = meta(tmp_path / "rb")["episodes"]["log"]
        assert log["records"] == 810 and rb.num_episodes == 810
    # format 2 rewrote ~30 bytes more per stored episode at every commit: +24 KB here
    assert late_meta - early_meta <= 8  # digits of the counters
    assert late - early <= 1024, (early, late)  # HDF5 bookkeeping varies a little


def test_the_log_grows_by_one_record_per_episode_and_trajstore_json_names_its_length(tmp_path):
    with make(tmp_path / "rb") as rb:
        record(rb, 0, [3, 4])
        first = meta(tmp_path / "rb")["episodes"]["log"]
        record(rb, 2, [2])
        second = meta(tmp_path / "rb")["episodes"]["log"]
    line = (tmp_path / "rb" / first["file"]).read_bytes()[first["bytes"]:second["bytes"]]
    assert json.loads(line) == {"id": 2, "start": 7, "stop": 9, "final": -1, "interrupted": False,
                                "data": {"k": 2, "tags": ["a", True, None]}}
    assert second["records"] == first["records"] + 1 == 3 and second["skip"] == 0


# -- equality across reopen ---------------------------------------------------------------------
READ_EPISODES = SPACE_CODE + """
import sys, json
from trajstore.replay_buffer import ReplayBuffer
with ReplayBuffer.load_from(sys.argv[1]) as rb:
    print(json.dumps([[e.id, e.start, e.stop, e.overwritten, e.done, e.interrupted, e.has_final_observation, e.data]
                      for e in rb.episodes]))
"""


@pytest.mark.parametrize("capacity", [None, 40])
def test_episodes_and_their_data_are_equal_across_reopen(tmp_path, capacity):
    folder = tmp_path / "rb"
    with make(folder, capacity) as rb:
        record(rb, 0, [3, 5, 4, 6, 2, 7, 5, 3, 4])
        rb.extend(steps(9, 3))
        rb.end_episode(interrupted=True, k=9)
        record(rb, 10, [4, 4])
        rb.extend(steps(12, 2))  # left open
        want, finals = described(rb), [rb.final_observation(k) for k in range(rb.num_episodes)]
        steps_before = rb[:]
    with ReplayBuffer.load_from(folder) as rb:
        assert described(rb) == want
        np.testing.assert_array_equal(rb[:]["ep"], steps_before["ep"])
        for k, final in enumerate(finals):
            got = rb.final_observation(k)
            assert (got is None) == (final is None)
            if final is not None:
                np.testing.assert_array_equal(got["x"], final["x"])
        # every held step belongs to the episode its leaf names
        for k in range(rb.num_episodes):
            assert set(rb.get_episode(k)["ep"].tolist()) == {rb.episode(k).id}
    out = subprocess.run([sys.executable, "-c", READ_EPISODES, str(folder)], capture_output=True, text=True,
                         check=True)
    assert [tuple(e) for e in json.loads(out.stdout)] == want  # a fresh process, from the folder alone
    with ReplayBuffer.load_from(folder, read_only=False) as rb:  # the open fragment becomes interrupted
        assert described(rb)[:-1] == want[:-1]
        assert described(rb)[-1][:6] == want[-1][:4] + (False, True)
    if capacity is None:
        assert [r["id"] for r in committed_records(folder)] == list(range(13))


# -- a crash between the log append and the metadata commit -------------------------------------
KILLED_BEFORE_COMMIT = SPACE_CODE + """
import os, signal, sys
import trajstore.replay_buffer.commit as module
from trajstore.replay_buffer import ReplayBuffer
from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

real = module.write_meta
def write_meta(folder, space_, storage_type, ring, episodes, *args, **kwargs):
    if episodes["next_id"] == 4:  # the log holds episode 3, trajstore.json does not name it yet
        os.kill(os.getpid(), signal.SIGKILL)
    real(folder, space_, storage_type, ring, episodes, *args, **kwargs)
module.write_meta = write_meta

capacity = None if sys.argv[2] == "none" else int(sys.argv[2])
rb = ReplayBuffer.create(DictStorage, space(), cache_path=sys.argv[1], capacity=capacity,
                         **dict_storage_kwargs_from_space(space()))
for k in range(5):
    rb.extend(steps(k, 3))
    rb.end_episode(k=k)
"""


@pytest.mark.parametrize("capacity", [None, 12])
def test_a_writer_killed_between_the_log_append_and_the_metadata_commit(tmp_path, capacity):
    folder = tmp_path / "rb"
    proc = subprocess.run([sys.executable, "-c", KILLED_BEFORE_COMMIT, str(folder), str(capacity or "none")],
                          capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-3000:]
    entry = meta(folder)["episodes"]["log"]
    log = folder / entry["file"]
    tail = log.read_bytes()[entry["bytes"]:]
    assert json.loads(tail)["id"] == 3  # the uncommitted record is there...
    with open(log, "ab") as f:
        f.write(b'{"id":4,"start":12,"sto')  # ...and a torn one after it
    with ReplayBuffer.load_from(folder) as reader:  # ...but no reader sees them
        assert [(e.id, e.data) for e in reader.episodes] == [(k, {"k": k}) for k in range(3)]
        assert reader.total_steps == 9
    with ReplayBuffer.load_from(folder, read_only=False) as rb:
        assert log.stat().st_size == entry["bytes"]  # the writer truncated the tail
        assert [e.id for e in rb.episodes] == [0, 1, 2]
        rb.extend(steps(3, 4))
        rb.end_episode(k=3, again=True)
        record(rb, 4, [2])
    with ReplayBuffer.load_from(folder) as rb:
        eps = rb.episodes
        want = [(k, {"k": k}, 3) for k in range(3)] + [(3, {"k": 3, "again": True}, 4),
                                                      (4, {"k": 4, "tags": ["a", True, None]}, 2)]
        assert [(e.id, e.data, e.stop - e.start) for e in eps] == want[-len(eps):]
        assert len(eps) == (5 if capacity is None else 4)  # a ring of 12 steps lost episode 0
        assert set(rb.get_episode(-2)["ep"].tolist()) == {3}
    assert [r["id"] for r in committed_records(folder)] == [e[0] for e in want[-len(eps):]]


def test_a_log_shorter_than_committed_is_a_format_error(tmp_path):
    from trajstore.errors import FormatError

    with make(tmp_path / "rb") as rb:
        record(rb, 0, [3, 3])
    entry = meta(tmp_path / "rb")["episodes"]["log"]
    os.truncate(tmp_path / "rb" / entry["file"], entry["bytes"] - 5)
    with pytest.raises(FormatError, match="episodes.000000.log holds"):
        ReplayBuffer.load_from(tmp_path / "rb")
    (tmp_path / "rb" / entry["file"]).unlink()
    with pytest.raises(FormatError, match="episode log.*does not exist"):
        ReplayBuffer.load_from(tmp_path / "rb")


# -- ring compaction ----------------------------------------------------------------------------
def test_ring_compaction_keeps_exactly_the_live_episodes(tmp_path):
    folder = tmp_path / "rb"
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 5, 400).tolist()
    stops = np.cumsum(lengths)
    generations = set()
    with make(folder, capacity=30) as rb:
        reader = ReplayBuffer.load_from(folder, multiprocessing=True)
        for k, n in enumerate(lengths):
            record(rb, k, [n])
            first = int(stops[k]) - min(30, int(stops[k]))
            live = [j for j in range(k + 1) if stops[j] > first]  # the model: episodes with a held step
            assert [e.id for e in rb.episodes] == live
            records = committed_records(folder, kept_only=False)
            dead = len(records) - len(live)
            assert dead <= max(len(live), MIN_DEAD - 1)  # compacted before the dead outnumber the live
            assert [r["id"] for r in committed_records(folder)] == live
            assert log_files(folder) == [meta(folder)["episodes"]["log"]["file"]]  # the old file is gone
            generations.add(log_files(folder)[0])
            if k % 7 == 0:
                reader.refresh()  # a reader that follows the writer across compactions
                assert described(reader) == described(rb)
        want = described(rb)
    reader.refresh()
    assert described(reader) == want
    reader.close()
    assert len(generations) >= 4
    with ReplayBuffer.load_from(folder) as rb:
        assert described(rb) == want
        assert [rb.episode(k).data for k in range(rb.num_episodes)] == [
            {"k": e[0], "tags": ["a", e[0] % 2 == 0, None]} for e in want]
        for k, ep in enumerate(rb.episodes):
            assert set(rb.get_episode(k)["ep"].tolist()) == {ep.id}


# -- readers in other processes -----------------------------------------------------------------
FOLLOWER = SPACE_CODE + """
import sys, time
from trajstore.errors import StaleReadError
from trajstore.replay_buffer import ReplayBuffer
rb = ReplayBuffer.load_from(sys.argv[1], multiprocessing=True)
states, deadline, rng = set(), time.monotonic() + 120, np.random.default_rng(0)
while time.monotonic() < deadline:
    rb.refresh()
    eps = rb.episodes
    ids = [e.id for e in eps if e.done]
    assert ids == list(range(ids[0], ids[0] + len(ids))) if ids else True, ids
    for e in eps:
        if e.done:
            assert e.data == {"k": e.id, "tags": ["a", e.id % 2 == 0, None]}, (e, e.data)
            assert e.stop - e.start <= 1 + e.id % 4 and (e.stop - e.start == 1 + e.id % 4 or e.overwritten), e
    done = [e for e in eps if e.done]
    if done:  # the steps of one episode, read under this view (a read may refresh it: read one only)
        e = done[int(rng.integers(len(done)))]
        try:
            assert set(rb.get_at(slice(e.start, e.stop))["ep"].tolist()) == {e.id}, e
        except StaleReadError:
            pass  # the ring moved on while we read: fine, never torn
    states.add(rb.total_steps)
    if eps and eps[-1].done and eps[-1].id == int(sys.argv[2]):
        break
print(len(states), eps[-1].id, flush=True)
"""


@pytest.mark.parametrize("capacity", [None, 25])
def test_a_reader_in_another_process_follows_the_writer(tmp_path, capacity):
    folder = tmp_path / "rb"
    last = 299
    with make(folder, capacity) as rb:
        record(rb, 0, [1])
        proc = subprocess.Popen([sys.executable, "-c", FOLLOWER, str(folder), str(last)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            record(rb, 1, [1 + k % 4 for k in range(1, last + 1)])
            out, err = proc.communicate(timeout=150)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err[-3000:]
    states, seen_last = map(int, out.split())
    assert seen_last == last and states >= 2


# -- older folders ------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_an_older_folder_is_read_as_it_is_and_migrated_by_a_writer(tmp_path, version):
    folder = tmp_path / "rb"
    shutil.copytree(FIXTURES / version / "png_memmap_ring", folder)
    old = json.loads((folder / "trajstore.json").read_text())
    with ReplayBuffer.load_from(folder) as rb:
        want = described(rb)
    assert log_files(folder) == [] and meta(folder) == old  # reading changes nothing
    (folder / "episodes.000000.log").write_bytes(b"left by a migration that crashed")
    (folder / "episodes.000001.log").write_bytes(b"")
    with ReplayBuffer.load_from(folder, read_only=False) as rb:
        assert meta(folder)["format_version"] == 3 and log_files(folder) == ["episodes.000000.log"]
        migrated = described(rb)
        assert migrated == want or migrated[:-1] == want[:-1]  # a v1 fixture's open tail is closed as interrupted
        records = committed_records(folder)  # global step numbers (the first kept episode's start was overwritten)
        first = rb.total_steps - len(rb)
        assert [(r["id"], max(r["start"], first) - first, r["stop"] - first) for r in records] == [
            (e.id, e.start, e.stop) for e in rb.episodes]
        assert [r["data"] for r in records] == [e.data for e in rb.episodes]
    with ReplayBuffer.load_from(folder) as rb:
        assert described(rb) == migrated


# -- the table's snapshots ----------------------------------------------------------------------
def test_snapshots_do_not_see_later_changes_and_a_stale_table_appends_into_a_copy():
    table = EpisodeTable()
    for k in range(20):
        table.on_extend(3 * k)
        table.end_episode(3 * k + 3, data={"k": k})
    snap = table.snapshot()
    table.on_extend(60)
    table.end_episode(64, data={"k": 20})
    table.drop_before(30)
    assert len(snap) == 20 and snap.ids.tolist() == list(range(20)) and snap.stops[-1] == 60
    assert table.ids.tolist() == list(range(10, 21))
    rows, data = table.closed_after(18)
    assert rows[0].tolist() == [19, 20] and data == [{"k": 19}, {"k": 20}]
    # `snap` is older than `table`, which used the shared columns after it: appending copies
    extra = np.array([[20], [60], [62], [-1], [0]], np.int64)
    other = snap.with_appended(extra, [{"x": 1}])
    assert other.stops.tolist()[-2:] == [60, 62] and table.stops.tolist()[-1] == 64
    assert table.episode_at(-1, 0, 64).data == {"k": 20} and other.episode_at(-1, 0, 62).data == {"x": 1}
    with pytest.raises(ValueError, match="inconsistent"):
        table.with_appended(np.array([[21], [64], [64], [-1], [0]], np.int64), [None])  # an empty episode
