"""The routing rules of dict_storage_kwargs_from_space, one by one and in combination."""

import numpy as np
import pytest

from trajstore.errors import RoutingWarning, UnsupportedSpaceError
from trajstore.spaces import BoxSpace, DictSpace, TextSpace
from trajstore.storages._options import Option, positive_number
from trajstore.storages import (DictStorage, HDF5Storage, ImageStorage, MemmapStorage, SpaceStorage,
                                create_dict_storage_from_space, dict_storage_kwargs_from_space)


class StandInVideo(MemmapStorage):
    """Takes what ImageStorage takes and declares an fps option filled from metadata, like VideoStorage."""

    options = (Option("fps", 30, positive_number, "frame rate (Hz)", from_metadata=True),)
    check_space = ImageStorage.check_space


def image(h=8, w=6, c=3, dtype=np.uint8, **meta):
    return BoxSpace(0, 255, (h, w, c) if c else (h, w), dtype, metadata={"kind": "image", **meta})


def robot_space():
    return DictSpace({
        "observation": DictSpace({
            "front": image(layout="HWC", fps=15),
            "wrist": image(fps=30),
            "depth": BoxSpace(0, 10, (8, 6, 1), np.float32, metadata={"kind": "image"}),
            "joints": BoxSpace(-3, 3, (7,), np.float32),
        }),
        "action": BoxSpace(-1, 1, (7,), np.float32),
        "instruction": TextSpace(64),
    })


def test_seed_example_defaults():
    kwargs = dict_storage_kwargs_from_space(robot_space())
    assert set(kwargs) == {"storage_cls_map", "key_kwargs", "nested_separator"}
    assert kwargs["storage_cls_map"] == {"observation/front": ImageStorage, "observation/wrist": ImageStorage,
                                         "*": HDF5Storage}
    assert kwargs["key_kwargs"] == {}
    assert kwargs["nested_separator"] == "/"


@pytest.mark.parametrize("leaf", [
    image(c=1), image(c=4), image(c=None), image(dtype=np.float32), image(layout="CHW"),
    BoxSpace(0, 255, (4, 8, 6), np.uint8, metadata={"kind": "image", "layout": "CHW"}),
    BoxSpace(0, 1, (3, 8, 6), np.float32, metadata={"kind": "image", "layout": "CHW"}),
    image(layout="NHWC"),
])
def test_images_storage_cannot_take_go_to_default(leaf):
    space = DictSpace({"cam": leaf, "x": BoxSpace(0, 1, (2,))})
    with pytest.warns(RoutingWarning, match="leaf 'cam' has kind 'image' but ImageStorage cannot take it.*got .*"
                                            "default storage HDF5Storage.*key_storage_cls=.*'depth'"):
        kwargs = dict_storage_kwargs_from_space(space)
    assert kwargs["storage_cls_map"] == {"*": HDF5Storage}


def test_kind_mapped_to_none_does_not_warn(recwarn):
    kwargs = dict_storage_kwargs_from_space(robot_space(), kind_storage_cls={"image": None})
    assert kwargs["storage_cls_map"] == {"*": HDF5Storage}
    assert not recwarn.list


def depth(c=None, dtype=np.uint16):
    return BoxSpace(0, np.iinfo(dtype).max, (8, 6, c) if c else (8, 6), dtype, metadata={"kind": "depth"})


DEPTH_ROUTING = {"kind_storage_cls": {"image": ImageStorage, "depth": ImageStorage},
                 "kind_kwargs": {"depth": {"format": "PNG"}}}


@pytest.mark.parametrize("leaf", [depth(), depth(1), depth(dtype=np.uint8)])
def test_depth_camera_to_png(leaf, tmp_path):
    space = DictSpace({"depth": leaf, "rgb": image(), "x": BoxSpace(0, 1, (2,))})
    kwargs = dict_storage_kwargs_from_space(space, **DEPTH_ROUTING)
    assert kwargs["storage_cls_map"] == {"depth": ImageStorage, "rgb": ImageStorage, "*": HDF5Storage}
    assert kwargs["key_kwargs"] == {"depth": {"format": "PNG"}}
    storage = DictStorage.create(space, capacity=None, cache_path=tmp_path / "s", **kwargs)
    batch = space.sample(np.random.default_rng(3), batch_size=4)
    storage.extend(batch)
    storage.close()
    again = SpaceStorage.load_from(tmp_path / "s")
    np.testing.assert_array_equal(again.get(np.arange(4))["depth"], batch["depth"])  # PNG: exact
    assert again.storages["rgb"].get_config()["format"] == "JPEG"
    again.close()


def test_depth_camera_without_png_goes_to_default_with_a_warning():
    space = DictSpace({"depth": depth(), "x": BoxSpace(0, 1, (2,))})
    with pytest.warns(RoutingWarning, match="leaf 'depth' has kind 'depth'.*format='PNG'"):
        kwargs = dict_storage_kwargs_from_space(space, kind_storage_cls={"depth": ImageStorage})
    assert kwargs["storage_cls_map"] == {"*": HDF5Storage}


def test_depth_forced_to_jpeg_is_refused():
    space = DictSpace({"depth": depth(), "x": BoxSpace(0, 1, (2,))})
    with pytest.raises(UnsupportedSpaceError, match="'depth' to ImageStorage.*format='PNG'"):
        dict_storage_kwargs_from_space(space, key_storage_cls={"depth": ImageStorage})
    kwargs = dict_storage_kwargs_from_space(space, key_storage_cls={"depth": ImageStorage},
                                            key_kwargs={"depth": {"format": "PNG"}})
    assert kwargs["storage_cls_map"]["depth"] is ImageStorage


def test_bad_options_do_not_change_the_route_create_refuses_them(tmp_path):
    space = DictSpace({"depth": depth(), "x": BoxSpace(0, 1, (2,))})
    kwargs = dict_storage_kwargs_from_space(space, kind_storage_cls={"depth": ImageStorage},
                                            kind_kwargs={"depth": {"format": "PNG", "quality": 80}})
    assert kwargs["storage_cls_map"]["depth"] is ImageStorage
    with pytest.raises(ValueError, match="key 'depth'.*JPEG only"):
        DictStorage.create(space, capacity=2, cache_path=tmp_path / "s", **kwargs)
    assert not (tmp_path / "s").exists()


def test_key_beats_kind_and_none_sends_to_default():
    kwargs = dict_storage_kwargs_from_space(robot_space(), key_storage_cls={
        "observation/front": None, "observation/joints": MemmapStorage})
    assert kwargs["storage_cls_map"] == {"observation/joints": MemmapStorage, "observation/wrist": ImageStorage,
                                         "*": HDF5Storage}


def test_kind_map_replaces_default_and_none_kind():
    kwargs = dict_storage_kwargs_from_space(robot_space(), kind_storage_cls={"image": None})
    assert kwargs["storage_cls_map"] == {"*": HDF5Storage}
    kwargs = dict_storage_kwargs_from_space(robot_space(), kind_storage_cls={"image": StandInVideo})
    assert kwargs["storage_cls_map"]["observation/front"] is StandInVideo


def test_fps_from_metadata_unless_given():
    kwargs = dict_storage_kwargs_from_space(robot_space(), kind_storage_cls={"image": StandInVideo},
                                            key_kwargs={"observation/wrist": {"fps": 60}})
    assert kwargs["key_kwargs"]["observation/front"] == {"fps": 15}
    assert kwargs["key_kwargs"]["observation/wrist"] == {"fps": 60}
    kwargs = dict_storage_kwargs_from_space(robot_space(), kind_storage_cls={"image": StandInVideo},
                                            kind_kwargs={"image": {"fps": 5}})
    assert kwargs["key_kwargs"]["observation/front"] == {"fps": 5}


def test_image_storage_gets_no_fps():
    kwargs = dict_storage_kwargs_from_space(robot_space())
    assert "observation/front" not in kwargs["key_kwargs"]


def test_kwargs_merge_order_kind_then_key():
    kwargs = dict_storage_kwargs_from_space(
        robot_space(), kind_kwargs={"image": {"format": "PNG", "quality": 80}},
        key_kwargs={"observation/wrist": {"quality": 70}, "*": {"compression": "gzip"}},
        default_kwargs={"compression": "lzf", "chunk_rows": 64})
    assert kwargs["key_kwargs"]["observation/front"] == {"format": "PNG", "quality": 80}
    assert kwargs["key_kwargs"]["observation/wrist"] == {"format": "PNG", "quality": 70}
    assert kwargs["key_kwargs"]["*"] == {"compression": "gzip", "chunk_rows": 64}


def test_kind_kwargs_do_not_follow_a_leaf_forced_elsewhere():
    kwargs = dict_storage_kwargs_from_space(robot_space(), kind_kwargs={"image": {"format": "PNG"}},
                                            key_storage_cls={"observation/front": MemmapStorage})
    assert "observation/front" not in kwargs["key_kwargs"]


def test_custom_separator_and_default_storage():
    kwargs = dict_storage_kwargs_from_space(robot_space(), nested_separator=".", default_storage_cls=MemmapStorage,
                                            key_storage_cls={"observation.joints": HDF5Storage})
    assert kwargs["storage_cls_map"] == {"observation.joints": HDF5Storage, "observation.front": ImageStorage,
                                         "observation.wrist": ImageStorage, "*": MemmapStorage}
    assert kwargs["nested_separator"] == "."


def test_sub_dict_key():
    kwargs = dict_storage_kwargs_from_space(robot_space(), key_storage_cls={"observation": HDF5Storage})
    assert kwargs["storage_cls_map"] == {"observation": HDF5Storage, "*": HDF5Storage}


def test_forced_storage_that_cannot_take_the_leaf():
    with pytest.raises(UnsupportedSpaceError, match="observation/depth.*ImageStorage"):
        dict_storage_kwargs_from_space(robot_space(), key_storage_cls={"observation/depth": ImageStorage})


def test_unknown_keys():
    with pytest.raises(KeyError, match="observation/nope"):
        dict_storage_kwargs_from_space(robot_space(), key_storage_cls={"observation/nope": None})
    with pytest.raises(KeyError, match="observation/nope"):
        dict_storage_kwargs_from_space(robot_space(), key_kwargs={"observation/nope": {"x": 1}})


def test_key_kwargs_of_a_sub_dict_that_is_not_a_layout_key():
    with pytest.warns(RoutingWarning, match="key_kwargs\\['observation'\\] is ignored.*not a key of the layout.*"
                                            "'\\*', 'observation/front', 'observation/wrist'"):
        kwargs = dict_storage_kwargs_from_space(robot_space(), key_kwargs={"observation": {"quality": 80}})
    assert kwargs["key_kwargs"] == {}


def test_not_a_dict_space():
    with pytest.raises(TypeError, match="DictSpace"):
        dict_storage_kwargs_from_space(BoxSpace(0, 1, (2,)))


def test_file_writing_storage_needs_cache_path():
    with pytest.raises(ValueError, match="observation/front.*ImageStorage.*cache_path"):
        create_dict_storage_from_space(robot_space(), capacity=4)


def test_all_default_works_in_memory():
    storage = create_dict_storage_from_space(robot_space(), capacity=4, kind_storage_cls={})
    value = robot_space().sample(np.random.default_rng(0))
    storage.set(1, value)
    got = storage.get(1)
    assert robot_space().contains(got)
    np.testing.assert_array_equal(got["observation"]["front"], value["observation"]["front"])
    assert got["instruction"] == value["instruction"]
    storage.close()


def test_end_to_end_folder_layout(tmp_path):
    space = robot_space()
    storage = create_dict_storage_from_space(space, capacity=None, cache_path=tmp_path / "s",
                                             kind_kwargs={"image": {"format": "PNG"}})
    batch = space.sample(np.random.default_rng(1), batch_size=5)
    storage.extend(batch)
    storage.close()
    again = SpaceStorage.load_from(tmp_path / "s")
    assert isinstance(again, DictStorage)
    assert {k: type(s) for k, s in again.storages.items()} == {
        "observation/front": ImageStorage, "observation/wrist": ImageStorage, "*": HDF5Storage}
    got = again.get(np.array([4, 0]))
    np.testing.assert_array_equal(got["observation"]["wrist"], batch["observation"]["wrist"][[4, 0]])  # PNG: exact
    np.testing.assert_array_equal(got["observation"]["depth"], batch["observation"]["depth"][[4, 0]])
    assert list(got["instruction"]) == list(batch["instruction"][[4, 0]])
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "@rest", "observation.front", "observation.wrist", "storage.json", "writer.lock"]
    again.close()


def test_seed_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from trajstore.replay_buffer import ReplayBuffer
    from trajstore.storages import DictStorage, dict_storage_kwargs_from_space

    obs_space = robot_space()
    rb = ReplayBuffer.create(
        DictStorage, obs_space,
        cache_path="cache/rb", capacity=None,
        **dict_storage_kwargs_from_space(obs_space),
    )
    rb.extend(obs_space.sample(np.random.default_rng(0), batch_size=3))
    rb.close()
    assert {k: type(s).__name__ for k, s in rb.storage.storages.items()} == {
        "observation/front": "ImageStorage", "observation/wrist": "ImageStorage", "*": "HDF5Storage"}
    assert (tmp_path / "cache" / "rb" / "trajstore.json").is_file()


def test_video_routing_takes_fps_from_metadata(tmp_path):
    pytest.importorskip("av")
    from trajstore.storages import VideoStorage

    space = robot_space()
    storage = create_dict_storage_from_space(space, cache_path=tmp_path / "s",
                                             kind_storage_cls={"image": VideoStorage},
                                             key_kwargs={"observation/wrist": {"crf": 30}})
    fps = {k: s.get_config().get("fps") for k, s in storage.storages.items()}
    assert fps == {"observation/front": 15, "observation/wrist": 30, "*": None}
    assert storage.storages["observation/wrist"].get_config()["crf"] == 30
    batch = space.sample(np.random.default_rng(2), batch_size=4)
    storage.extend(batch)
    storage.flush()
    assert storage.get(2)["observation"]["front"].shape == (8, 6, 3)
    storage.close()


def test_star_key_is_reserved():
    space = DictSpace({"*": image(), "x": BoxSpace(0, 1, (2,))})
    with pytest.raises(ValueError, match="reserved"):
        dict_storage_kwargs_from_space(space)
    with pytest.raises(ValueError, match="reserved"):
        DictStorage.create(space, capacity=2, storage_cls_map={"x": MemmapStorage, "*": HDF5Storage})
