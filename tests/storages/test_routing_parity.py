"""dict_storage_kwargs_from_space gives UniEnv 0.0.1b16's layout for the same call.

Each expected value is what ``unienv_data.storages.dict_storage_kwargs_from_space`` returned for
the same space and arguments, written out by hand (UniEnv is not a test dependency), with
UniEnv's ImageStorage / HDF5Storage standing for ours.
"""

import warnings

import numpy as np
import pytest

from trajstore.errors import RoutingWarning
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage, ImageStorage, SpaceStorage, dict_storage_kwargs_from_space


def cam(**meta):
    return BoxSpace(0, 255, (8, 6, 3), np.uint8, metadata={"kind": "image", **meta})


def state():
    return BoxSpace(0, 1, (2,), np.float32)


def route(space, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these calls warns
        return dict_storage_kwargs_from_space(space, **kwargs)


# 1. "*" is always there ---------------------------------------------------------------------------
def test_star_always_in_the_map():
    got = route(DictSpace({"cam": cam(layout="HWC")}))
    assert got["storage_cls_map"] == {"cam": ImageStorage, "*": HDF5Storage}
    assert got["key_kwargs"] == {}


def test_star_with_no_leaf_stores_nothing_and_reopens(tmp_path):
    space = DictSpace({"obs": DictSpace({"cam": cam(), "wrist": cam()})})
    storage = DictStorage.create(space, capacity=None, cache_path=tmp_path / "s",
                                 **route(space, kind_kwargs={"image": {"format": "PNG"}},
                                         default_kwargs={"compression": "gzip"}))
    assert list(storage.storages) == ["obs/cam", "obs/wrist"]
    batch = space.sample(np.random.default_rng(0), batch_size=3)
    storage.extend(batch)
    storage.close()
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["obs.cam", "obs.wrist", "storage.json",
                                                                  "writer.lock"]
    again = SpaceStorage.load_from(tmp_path / "s")
    assert len(again) == 3 and list(again.storages) == ["obs/cam", "obs/wrist"]
    np.testing.assert_array_equal(again.get(2)["obs"]["wrist"], batch["obs"]["wrist"][2])
    again.close()


def test_options_of_an_empty_star_are_still_checked(tmp_path):
    space = DictSpace({"cam": cam()})
    with pytest.raises(ValueError, match="key '\\*'.*compression"):
        DictStorage.create(space, capacity=2, cache_path=tmp_path / "s",
                           **route(space, default_kwargs={"compression": "zstd"}))
    assert not (tmp_path / "s").exists()


# 2. key_kwargs of a leaf that goes to the default storage: ignored (with a warning here) --------------
def test_key_kwargs_of_a_default_leaf_are_ignored():
    space = DictSpace({"cam": cam(), "action": state()})
    with pytest.warns(RoutingWarning, match="key_kwargs\\['action'\\] is ignored: 'action' goes to the default "
                                            "storage HDF5Storage"):
        got = dict_storage_kwargs_from_space(space, key_kwargs={"action": {"compression": "gzip"},
                                                                "cam": {"quality": 80}})
    assert got["storage_cls_map"] == {"cam": ImageStorage, "*": HDF5Storage}
    assert got["key_kwargs"] == {"cam": {"quality": 80}}


def test_key_kwargs_of_a_leaf_forced_to_default():
    space = DictSpace({"cam": cam(), "action": state()})
    with pytest.warns(RoutingWarning, match="key_kwargs\\['cam'\\] is ignored"):
        got = dict_storage_kwargs_from_space(space, key_storage_cls={"cam": None}, key_kwargs={"cam": {"quality": 80}})
    assert got["storage_cls_map"] == {"*": HDF5Storage}
    assert got["key_kwargs"] == {}


# 3. default_kwargs / key_kwargs["*"] when no leaf goes to the default storage -------------------------
def test_star_kwargs_kept_when_star_has_no_leaf():
    space = DictSpace({"cam": cam()})
    got = route(space, key_kwargs={"*": {"compression": "gzip"}})
    assert got["storage_cls_map"] == {"cam": ImageStorage, "*": HDF5Storage}
    assert got["key_kwargs"] == {"*": {"compression": "gzip"}}
    got = route(space, default_kwargs={"compression": "lzf", "chunk_rows": 64},
                key_kwargs={"*": {"compression": "gzip"}})
    assert got["key_kwargs"] == {"*": {"compression": "gzip", "chunk_rows": 64}}


# 4. a layout in lower case is HWC ----------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["hwc", "Hwc"])
def test_lower_case_layout(layout):
    space = DictSpace({"cam": cam(layout=layout), "x": state()})
    assert route(space)["storage_cls_map"] == {"cam": ImageStorage, "*": HDF5Storage}
    got = route(space, key_storage_cls={"cam": ImageStorage})
    assert got["storage_cls_map"] == {"cam": ImageStorage, "*": HDF5Storage} and got["key_kwargs"] == {}
    got = route(space, kind_kwargs={"image": {"format": "PNG"}})
    assert got["key_kwargs"] == {"cam": {"format": "PNG"}}


def test_lower_case_layout_stores(tmp_path):
    space = DictSpace({"cam": cam(layout="hwc"), "x": state()})
    storage = DictStorage.create(space, capacity=2, cache_path=tmp_path / "s", **route(space))
    assert isinstance(storage.storages["cam"], ImageStorage)
    storage.close()


# The deliberate difference ---------------------------------------------------------------------------
def test_kind_kwargs_stay_with_the_kind_storage():
    """UniEnv: {"cam": HDF5Storage, "*": HDF5Storage}, key_kwargs {"cam": {"quality": 80}} (create then fails)."""
    space = DictSpace({"cam": cam(), "x": state()})
    got = route(space, kind_kwargs={"image": {"quality": 80}}, key_storage_cls={"cam": HDF5Storage})
    assert got["storage_cls_map"] == {"cam": HDF5Storage, "*": HDF5Storage}
    assert got["key_kwargs"] == {}
