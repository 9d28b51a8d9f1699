"""Routing decides whether a storage takes a leaf from the leaf: an option the storage does not
declare (or a value it refuses) is an error naming the option and the leaf, never a reason to
route the leaf elsewhere."""

import warnings

import numpy as np
import pytest

from trajstore.errors import RoutingWarning
from trajstore.spaces import BoxSpace, DictSpace
from trajstore.storages import DictStorage, HDF5Storage, ImageStorage, dict_storage_kwargs_from_space

STRAY = {"quality": 90, "fps": 5}  # fps is a video option; ImageStorage does not declare it


def _space(shape, dtype=np.uint8):
    return DictSpace({"cam": BoxSpace(0, 255, shape, dtype, metadata={"kind": "image"}),
                      "x": BoxSpace(0, 1, (2,), np.float32)})


def _route(space, **routing):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RoutingWarning)
        return dict_storage_kwargs_from_space(space, **routing)["storage_cls_map"]


@pytest.mark.parametrize("shape", [(8, 6, 1), (8, 6), (8, 6, 3)])
def test_a_stray_option_does_not_change_the_route_it_is_refused(shape):
    space = _space(shape)
    plain = _route(space, kind_kwargs={"image": {"quality": 90}})
    # A single-channel frame is not JPEG's: it goes to the default storage; an RGB frame to ImageStorage.
    assert plain == ({"cam": ImageStorage, "*": HDF5Storage} if shape[-1:] == (3,) else {"*": HDF5Storage})
    stray = r"leaf 'cam': ImageStorage got an unexpected keyword 'fps'; it takes format, quality"
    with pytest.raises(TypeError, match=stray):
        dict_storage_kwargs_from_space(space, kind_kwargs={"image": STRAY})


def test_a_depth_frame_with_png_and_a_stray_option_is_refused_not_rerouted():
    space = _space((8, 6), np.uint16)
    assert _route(space, kind_kwargs={"image": {"format": "PNG"}}) == {"cam": ImageStorage, "*": HDF5Storage}
    with pytest.raises(TypeError, match=r"leaf 'cam': .*unexpected keyword 'fps'"):
        dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"format": "PNG", "fps": 5}})


def test_a_bad_value_is_refused_naming_the_leaf_and_option():
    space = _space((8, 6, 1))
    with pytest.raises(ValueError, match=r"leaf 'cam'.*option quality"):
        dict_storage_kwargs_from_space(space, kind_kwargs={"image": {"quality": 500}})


def test_a_key_routed_leaf_with_a_stray_option_is_refused():
    space = _space((8, 6, 3))
    with pytest.raises(TypeError, match=r"leaf 'cam': .*unexpected keyword 'fps'"):
        dict_storage_kwargs_from_space(space, key_storage_cls={"cam": ImageStorage}, key_kwargs={"cam": {"fps": 5}})


def test_create_names_the_key_and_option_when_given_directly(tmp_path):
    space = _space((8, 6, 3))
    with pytest.raises(TypeError, match=r"key 'cam': ImageStorage got an unexpected keyword 'fps'"):
        DictStorage.create(space, capacity=None, cache_path=tmp_path / "s",
                           storage_cls_map={"cam": ImageStorage, "*": HDF5Storage}, key_kwargs={"cam": STRAY})
    assert not (tmp_path / "s").exists()
