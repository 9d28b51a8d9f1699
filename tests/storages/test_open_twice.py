"""One folder opened twice in one process: a reader and a writer of the same ``data.h5``.

HDF5 keeps one file state per process (``trajstore.storages.hdf5._handles``): a reader joins an
open writer; a writer cannot open a file that only readers hold. Such a refusal is an
``AlreadyOpenError`` naming the file, raised before any lock file is made; never a
``FormatError`` that calls the file damaged. Closing the first object lets the second open, and
the data reads back.
"""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys
import threading
import warnings

import h5py
import numpy as np
import pytest

from trajstore.errors import AlreadyOpenError, FormatError, LockedError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import (DictStorage, HDF5Storage, ImageStorage, MemmapStorage, VideoStorage,
                                dict_storage_kwargs_from_space)
from trajstore.storages.hdf5 import DATA_FILE


def step_space():
    return DictSpace({"state": BoxSpace(-1e6, 1e6, (3,), np.float32), "reward": BoxSpace(-1e6, 1e6, (), np.float32)})


def step(i):
    return {"state": np.full(3, i, np.float32), "reward": np.float32(-i)}


def make_buffer(path, n=5):
    space = step_space()
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, **dict_storage_kwargs_from_space(space))
    for i in range(n):
        rb.append(step(i))
    rb.end_episode()
    rb.close()
    return path


def assert_steps(rb, values):
    got = rb[:]
    np.testing.assert_array_equal(got["state"][:, 0], np.asarray(values, np.float32))
    np.testing.assert_array_equal(got["reward"], -np.asarray(values, np.float32))


def append_and_read_back(folder, n):
    """Open a writer of a buffer of steps 0..n-1, append step n, and read all back in a new reader."""
    with ReplayBuffer.load_from(folder, read_only=False) as writer:
        assert_steps(writer, range(n))
        writer.append(step(n))
        writer.end_episode()
    with ReplayBuffer.load_from(folder) as again:
        assert_steps(again, range(n + 1))


def files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def data_file(folder):
    found = sorted(folder.rglob(DATA_FILE))
    assert len(found) == 1, found
    return found[0]


def assert_already_open(excinfo, folder, how="for reading"):
    message = str(excinfo.value)
    assert type(excinfo.value) is AlreadyOpenError and not isinstance(excinfo.value, FormatError)
    assert isinstance(excinfo.value, LockedError)  # except LockedError keeps working
    assert "damaged" not in message.replace("not damaged", "")
    assert str(data_file(folder)) in message and f"already open {how}" in message and "in this process" in message


# -- the buffer ---------------------------------------------------------------------------------
def test_a_writer_opened_while_a_reader_is_open_is_refused_and_leaves_no_file(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    before = files(folder)
    reader = ReplayBuffer.load_from(folder)
    with pytest.raises(AlreadyOpenError) as excinfo:
        ReplayBuffer.load_from(folder, read_only=False)
    assert_already_open(excinfo, folder)
    assert files(folder) == before
    assert_steps(reader, range(5))  # the reader is unharmed
    reader.close()
    append_and_read_back(folder, 5)  # closed: now the writer opens


def test_a_reader_opened_while_a_writer_is_open_works_and_follows_it(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    writer = ReplayBuffer.load_from(folder, read_only=False)
    reader = ReplayBuffer.load_from(folder)
    assert_steps(reader, range(5))
    writer.append(step(5))
    writer.end_episode()
    writer.flush()
    reader.refresh()
    assert_steps(reader, range(6))
    writer.close()
    assert_steps(reader, range(6))  # the writer's close detached it; it reopened on use
    # The file is no longer held by a writer's state here: a new writer of this process is refused
    # while the reader is open, and opens once it is closed.
    with pytest.raises(AlreadyOpenError):
        ReplayBuffer.load_from(folder, read_only=False)
    reader.close()
    append_and_read_back(folder, 6)


def test_a_storage_reader_inside_a_buffer_refuses_the_buffer_writer_and_the_other_way(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    sub = data_file(folder).parent
    before = files(folder)
    part = HDF5Storage.load_from(sub)
    with pytest.raises(AlreadyOpenError) as excinfo:
        ReplayBuffer.load_from(folder, read_only=False)
    assert_already_open(excinfo, folder)
    part.close()
    reader = ReplayBuffer.load_from(folder)
    with pytest.raises(AlreadyOpenError) as excinfo:
        HDF5Storage.load_from(sub, read_only=False)
    assert_already_open(excinfo, folder)
    assert files(folder) == before  # no writer.lock in the storage folders
    reader.close()
    with HDF5Storage.load_from(sub, read_only=False) as part:
        assert len(part) == 5


# -- storages opened on their own ----------------------------------------------------------------
@pytest.mark.parametrize("storage_cls", [HDF5Storage, DictStorage])
def test_storage_reader_then_writer(tmp_path, storage_cls):
    space = step_space()
    kwargs = dict_storage_kwargs_from_space(space) if storage_cls is DictStorage else {}
    s = storage_cls.create(space, cache_path=tmp_path / "s", **kwargs)
    s.extend({"state": np.arange(12, dtype=np.float32).reshape(4, 3), "reward": np.arange(4, dtype=np.float32)})
    s.close()
    before = files(tmp_path / "s")
    reader = storage_cls.load_from(tmp_path / "s")
    with pytest.raises(AlreadyOpenError) as excinfo:
        storage_cls.load_from(tmp_path / "s", read_only=False)
    assert_already_open(excinfo, tmp_path / "s")
    assert files(tmp_path / "s") == before
    reader.close()
    with storage_cls.load_from(tmp_path / "s", read_only=False) as writer:
        writer.extend({"state": np.full((1, 3), 7, np.float32), "reward": np.ones(1, np.float32)})
        also = storage_cls.load_from(tmp_path / "s")  # the other order works
        np.testing.assert_array_equal(also[:]["reward"], [0, 1, 2, 3, 1])
    np.testing.assert_array_equal(also[4]["state"], [7, 7, 7])  # reopened on use after the writer closed
    also.close()


def test_an_h5py_handle_of_the_user_gives_already_open_not_damaged(tmp_path):
    s = HDF5Storage.create(BoxSpace(-9, 9, (2,), np.float32), cache_path=tmp_path / "s")
    s.extend(np.ones((3, 2), np.float32))
    s.close()
    with h5py.File(tmp_path / "s" / DATA_FILE, "r", locking=False):  # not known to trajstore's registry
        with pytest.raises(AlreadyOpenError) as excinfo:
            HDF5Storage.load_from(tmp_path / "s", read_only=False)
        assert_already_open(excinfo, tmp_path / "s")
    with h5py.File(tmp_path / "s" / DATA_FILE, "r"):  # HDF5's file locking on: the flags differ
        with pytest.raises(AlreadyOpenError) as excinfo:
            HDF5Storage.load_from(tmp_path / "s")
        assert_already_open(excinfo, tmp_path / "s", how="with other settings")
    with HDF5Storage.load_from(tmp_path / "s", read_only=False) as writer:
        np.testing.assert_array_equal(writer[:], np.ones((3, 2)))


def test_readers_of_an_old_format_file_in_one_process_share_its_mode(tmp_path):
    from tests.storages.test_hdf5 import write_old_format

    value = np.arange(8, dtype=np.float32).reshape(4, 2)
    write_old_format(tmp_path / "s", BoxSpace(-9, 9, (2,), np.float32), value)
    plain = HDF5Storage.load_from(tmp_path / "s")  # no SWMR mode
    swmr = HDF5Storage.load_from(tmp_path / "s", multiprocessing=True)  # would ask for SWMR mode
    np.testing.assert_array_equal(swmr[:], value)
    swmr.refresh()
    np.testing.assert_array_equal(plain[:], value)
    plain.close()
    swmr.close()


# -- a reader that outlives the writer it joined -------------------------------------------------
WRITER_IN_ANOTHER_PROCESS = r"""
import sys, numpy as np
from trajstore.storages import HDF5Storage
w = HDF5Storage.load_from(sys.argv[1], read_only=False)
w.extend(np.arange(1000, 3000, dtype=np.float32)[:, None] * np.ones(64, np.float32))
w.flush()
print("flushed", flush=True)
sys.stdin.readline()
w.extend(np.arange(3000, 3500, dtype=np.float32)[:, None] * np.ones(64, np.float32))
w.close()
"""


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_a_reader_that_joined_a_closed_writer_never_writes_the_file(tmp_path, compression):
    """Without the detach, the reader kept the writer's state and its close wrote a stale superblock
    into the file while another process was writing it: that writer's next open failed (addr overflow)."""
    path = tmp_path / "s"
    rows = lambda a, b: np.arange(a, b, dtype=np.float32)[:, None] * np.ones(64, np.float32)  # noqa: E731
    s = HDF5Storage.create(BoxSpace(-1e9, 1e9, (64,), np.float32), cache_path=path, compression=compression)
    s.extend(rows(0, 1000))
    reader = HDF5Storage.load_from(path)  # joins the writer's state
    s.close()
    np.testing.assert_array_equal(reader[998:1000], rows(998, 1000))
    child = subprocess.Popen([sys.executable, "-c", WRITER_IN_ANOTHER_PROCESS, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "flushed"
        before = (path / DATA_FILE).read_bytes()[:512]
        reader.close()
        assert (path / DATA_FILE).read_bytes()[:512] == before  # the superblock is the live writer's
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=120) == 0
    finally:
        child.kill()
    with HDF5Storage.load_from(path, read_only=False) as writer:
        writer.extend(rows(3500, 4000))
    with HDF5Storage.load_from(path) as again:
        np.testing.assert_array_equal(again[:], rows(0, 4000))


# -- other storages: a reader and a writer of one folder in one process both work -------------
@pytest.mark.parametrize("storage_cls", [MemmapStorage, ImageStorage, VideoStorage])
def test_other_storages_open_a_reader_and_a_writer_in_either_order(tmp_path, storage_cls):
    if storage_cls is VideoStorage:
        pytest.importorskip("av")
    space = BoxSpace(0, 255, (8, 8, 3), np.uint8)
    frames = np.random.default_rng(0).integers(0, 256, (6, 8, 8, 3), dtype=np.uint8)
    options = {"format": "PNG"} if storage_cls is ImageStorage else {}
    s = storage_cls.create(space, cache_path=tmp_path / "s", **options)
    s.extend(frames[:3])
    s.close()
    reader = storage_cls.load_from(tmp_path / "s")
    with storage_cls.load_from(tmp_path / "s", read_only=False) as writer:
        writer.extend(frames[3:])
        writer.flush()
        late = storage_cls.load_from(tmp_path / "s")
        assert len(late) == 6
        if storage_cls is not VideoStorage:  # video is lossy
            np.testing.assert_array_equal(late[:], frames)
        late.close()
    reader.refresh()
    assert len(reader) == 6
    if storage_cls is not VideoStorage:
        np.testing.assert_array_equal(reader[:3], frames[:3])
    reader.close()


# -- the old module paths ----------------------------------------------------------------------
@pytest.mark.parametrize("old, new", [("trajstore.storages._hdf5_files", "trajstore.storages.hdf5._files"),
                                      ("trajstore.storages._hdf5_recovery", "trajstore.storages.hdf5._recovery")])
def test_old_module_paths_warn_and_re_export(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    moved = importlib.import_module(new)
    public = [name for name in vars(moved) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(moved, name) for name in public)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import trajstore.storages.hdf5 as package
    assert package.HDF5Storage is HDF5Storage and package.DATA_FILE == "data.h5"


def test_a_storage_writer_refused_by_the_buffer_writer_leaves_no_lock_file(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    sub = data_file(folder).parent
    with ReplayBuffer.load_from(folder, read_only=False) as writer:
        before = files(folder)
        for storage_cls, path in [(HDF5Storage, sub), (DictStorage, sub.parent)]:
            with pytest.raises(LockedError) as excinfo:
                storage_cls.load_from(path, read_only=False)
            assert type(excinfo.value) is LockedError and str(folder) in str(excinfo.value)
        assert files(folder) == before  # the buffer's lock was tried first: no writer.lock was made below it
        writer.append(step(5))


def test_a_reader_dropped_without_close_holds_nothing(tmp_path):
    folder = make_buffer(tmp_path / "rb")
    reader = ReplayBuffer.load_from(folder)
    assert_steps(reader, range(5))
    del reader
    gc.collect()
    append_and_read_back(folder, 5)


def test_a_writer_closing_while_a_joined_reader_reads_in_another_thread(tmp_path):
    """The writer's close swaps the reader's file out under the reader's own lock: the reading thread
    never meets a closed HDF5 handle (which would surface as an error of a damaged file). Wide rows
    read at every third slot take one h5py call per row, so a close can fall between two of them."""
    path = tmp_path / "s"
    space = DictSpace({k: BoxSpace(-1e9, 1e9, (1024,), np.float32) for k in "abc"})
    HDF5Storage.create(space, cache_path=path).close()
    slots = np.arange(0, 90, 3)
    failures, reads = [], [0]
    for rnd in range(10):
        writer = HDF5Storage.load_from(path, read_only=False)
        writer.extend({k: np.full((90, 1024), i, np.float32) for i, k in enumerate("abc")})
        reader = HDF5Storage.load_from(path)  # joins the writer
        stop = threading.Event()

        def read_until_stopped():
            while not stop.is_set():
                try:
                    got = reader[slots]
                    reads[0] += 1
                    assert [float(got[k][0, 0]) for k in "abc"] == [0, 1, 2]
                except Exception as exc:  # noqa: BLE001 - recorded, asserted below
                    failures.append(repr(exc))
                    return

        thread = threading.Thread(target=read_until_stopped)
        thread.start()
        while reads[0] <= 2 * rnd:  # some reads before the close (counted, never timed)
            threading.Event().wait(0.001)
        writer.close()
        stop.set()
        thread.join()
        reader.close()
    assert failures == []
