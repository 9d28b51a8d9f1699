"""A misspelt keyword is answered with the closest known name, at every level that takes keywords."""

import numpy as np
import pytest

from trajstore._suggest import check_keywords, did_you_mean, suggests_keywords
from trajstore.errors import UnknownLeafError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage, ImageStorage, dict_storage_kwargs_from_space
from trajstore.streams import StreamBuffer

RB_DICT_TAKES = ("it takes cache_path, capacity, multiprocessing, check_bounds, priorities, storage_cls_map, key_kwargs, "
                 "nested_separator")


def _space():
    return DictSpace({"cam": BoxSpace(0, 255, (8, 6, 3), np.uint8, metadata={"kind": "image"}),
                      "x": BoxSpace(0, 1, (2,), np.float32)})


def _message(call):
    with pytest.raises(TypeError) as info:
        call()
    return str(info.value)


def test_did_you_mean_picks_the_closest_name_or_none():
    assert did_you_mean("capacty", ["cache_path", "capacity", "check_bounds"]) == "capacity"
    assert did_you_mean("Capacity", ["capacity"]) == "capacity"  # letter case is ignored
    assert did_you_mean("zzz", ["capacity", "cache_path"]) is None


def test_check_keywords_names_each_unknown_one_with_its_suggestion():
    check_keywords({"a": 1}, ["a", "b"], passed_to="f")  # all known: nothing raised
    with pytest.raises(TypeError) as info:
        check_keywords({"capacty": 1, "zzz": 2, "a": 3}, ["a", "capacity"], passed_to="f")
    assert str(info.value) == ("f got unexpected keywords 'capacty' (did you mean 'capacity'?), 'zzz'; "
                               "it takes a, capacity")


def test_replay_buffer_create_suggests_its_own_keyword_over_the_storage_s(tmp_path):
    space = _space()
    message = _message(lambda: ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", capacty=100,
                                                   **dict_storage_kwargs_from_space(space)))
    assert message == ("ReplayBuffer.create got an unexpected keyword 'capacty' (did you mean 'capacity'?); "
                       + RB_DICT_TAKES)
    assert not (tmp_path / "rb").exists()


def test_replay_buffer_create_suggests_the_storage_s_keyword(tmp_path):
    space = _space()
    message = _message(lambda: ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb",
                                                   key_kwarg={}, storage_cls_map={"*": HDF5Storage}))
    assert message == ("ReplayBuffer.create got an unexpected keyword 'key_kwarg' (did you mean 'key_kwargs'?); "
                       + RB_DICT_TAKES)
    message = _message(lambda: ReplayBuffer.create(HDF5Storage, space, chunk_row=8))
    assert message == ("ReplayBuffer.create got an unexpected keyword 'chunk_row' (did you mean 'chunk_rows'?); "
                       "it takes cache_path, capacity, multiprocessing, check_bounds, priorities, compression, chunk_rows")


def test_load_from_suggests(tmp_path):
    space = _space()
    ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(space)).close()
    message = _message(lambda: ReplayBuffer.load_from(tmp_path / "rb", read_onyl=False))
    assert message == ("ReplayBuffer.load_from got an unexpected keyword 'read_onyl' (did you mean 'read_only'?); "
                       "it takes cache_path, read_only, multiprocessing, storage_options, cache_dir, payload, left_open")
    with ReplayBuffer.load_from(tmp_path / "rb", read_only=True) as rb:  # the decorated method still works
        assert rb.read_only and len(rb) == 0


def test_storages_create_suggest(tmp_path):
    space = _space()
    message = _message(lambda: DictStorage.create(space, capacty=3, **dict_storage_kwargs_from_space(space)))
    assert message == ("DictStorage.create got an unexpected keyword 'capacty' (did you mean 'capacity'?); "
                       "it takes capacity, cache_path, multiprocessing, storage_cls_map, key_kwargs, nested_separator")
    message = _message(lambda: HDF5Storage.create(DictSpace({"x": space["x"]}), compresion="gzip"))
    assert message == ("HDF5Storage.create got an unexpected keyword 'compresion' (did you mean 'compression'?); "
                       "it takes capacity, cache_path, multiprocessing, compression, chunk_rows")


def test_routing_names_the_leaf_and_suggests_the_option():
    message = _message(lambda: dict_storage_kwargs_from_space(_space(), kind_kwargs={"image": {"qualty": 90}}))
    assert message.startswith("leaf 'cam': ImageStorage got an unexpected keyword 'qualty' (did you mean 'quality'?); "
                              "it takes format, quality, ")
    message = _message(lambda: dict_storage_kwargs_from_space(_space(), kind_kwarg={"image": {}}))
    assert message.startswith("dict_storage_kwargs_from_space got an unexpected keyword 'kind_kwarg' "
                              "(did you mean 'kind_kwargs'?); it takes space, kind_storage_cls, ")


def test_a_misspelt_leaf_key_is_suggested():
    with pytest.raises(UnknownLeafError) as info:
        dict_storage_kwargs_from_space(_space(), key_storage_cls={"cma": ImageStorage})
    assert "(at 'cma'; did you mean 'cam'? keys there: ['cam', 'x'])" in str(info.value)


def test_dict_storage_key_kwargs_key_is_suggested(tmp_path):
    with pytest.raises(ValueError) as info:
        DictStorage.create(_space(), cache_path=tmp_path / "s", storage_cls_map={"cam": ImageStorage, "*": HDF5Storage},
                           key_kwargs={"cma": {"quality": 90}})
    assert str(info.value).endswith("(did you mean 'cma' -> 'cam'?)")


def test_stream_buffer_suggests(tmp_path):
    streams = {"joints": BoxSpace(-1, 1, (3,), np.float32)}
    message = _message(lambda: StreamBuffer.create(tmp_path / "sb", streams, check_bound=True))
    assert message.startswith("StreamBuffer.create got an unexpected keyword 'check_bound' (did you mean "
                              "'check_bounds'?); it takes cache_path, streams, check_bounds, multiprocessing, "
                              "kind_storage_cls, ")
    assert not (tmp_path / "sb").exists()
    message = _message(lambda: StreamBuffer.load_from(tmp_path / "sb", readonly=True))
    assert message == ("StreamBuffer.load_from got an unexpected keyword 'readonly' (did you mean 'read_only'?); "
                       "it takes cache_path, read_only, multiprocessing")


def test_the_decorator_keeps_the_signature_and_docstring():
    @suggests_keywords
    def f(a, *, bee=1):
        """Doc."""
        return a + bee

    import inspect
    assert f(1, bee=2) == 3 and f.__doc__ == "Doc." and list(inspect.signature(f).parameters) == ["a", "bee"]
    with pytest.raises(TypeError, match=r"got an unexpected keyword 'be' \(did you mean 'bee'\?\); it takes a, bee"):
        f(1, be=2)


# -- OS errors of background writes name the leaf in the message itself ----------------------------------

def _nested_space():
    return DictSpace({"observation": DictSpace({
        "pixels": BoxSpace(0, 255, (8, 6, 3), np.uint8, metadata={"kind": "image"}),
        "state": BoxSpace(-1, 1, (3,), np.float32)}), "action": BoxSpace(-1, 1, (2,), np.float32)})


def _step(k):
    return {"observation": {"pixels": np.full((8, 6, 3), k, np.uint8), "state": np.full(3, k / 10, np.float32)},
            "action": np.full(2, k / 10, np.float32)}


@pytest.mark.parametrize("storage_cls, named", [
    (ImageStorage, "leaf 'observation/pixels': ImageStorage at {path}/storage/"),
    (HDF5Storage, "leaves 'observation/state', 'action' of storage '*': HDF5Storage at {path}/storage/"),
])
def test_a_full_disk_on_the_write_behind_thread_names_the_leaf(tmp_path, monkeypatch, storage_cls, named):
    import errno
    import os

    path = tmp_path / "rb"
    space = _nested_space()
    rb = ReplayBuffer.create(DictStorage, space, cache_path=path, **dict_storage_kwargs_from_space(space))
    rb.append(_step(0))
    rb.end_episode()
    original = storage_cls._write

    def disk_full(self, sel, leaves):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/disk/chunk.bin")

    monkeypatch.setattr(storage_cls, "_write", disk_full)
    rb.append(_step(1))  # staged, then written behind: the error comes at the next call
    with pytest.raises(OSError) as info:
        rb.flush()
    error = info.value
    assert error.errno == errno.ENOSPC and error.filename == "/disk/chunk.bin"
    assert str(error).startswith(f"[Errno {errno.ENOSPC}] No space left on device (writing {named.format(path=path)}")
    assert str(error).endswith("): '/disk/chunk.bin'")
    assert type(error.__cause__) is OSError and str(error.__cause__) == (f"[Errno {errno.ENOSPC}] No space left on "
                                                                         "device: '/disk/chunk.bin'")
    monkeypatch.setattr(storage_cls, "_write", original)
    rb.close()  # the held step is written once the disk has room
    with ReplayBuffer.load_from(path) as back:
        assert len(back) == 2 and back[1]["action"].tolist() == pytest.approx([0.1, 0.1])


def test_an_os_error_without_errno_names_the_leaf_too(tmp_path, monkeypatch):
    space = _nested_space()
    rb = ReplayBuffer.create(DictStorage, space, cache_path=tmp_path / "rb", **dict_storage_kwargs_from_space(space))
    monkeypatch.setattr(ImageStorage, "_write", lambda self, sel, leaves: (_ for _ in ()).throw(OSError("disk gone")))
    rb.append(_step(0))
    with pytest.raises(OSError) as info:
        rb.flush()
    assert info.value.errno is None
    assert str(info.value).startswith("disk gone (writing leaf 'observation/pixels': ImageStorage at ")
    monkeypatch.undo()
    rb.close()
