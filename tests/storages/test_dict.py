"""DictStorage: conformance over memmap sub-storages, layout keys, safe folder names."""

import numpy as np
import pytest

from trajstore.errors import UnsupportedSpaceError
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages.base import SpaceStorage
from trajstore.storages.dict import DictStorage
from trajstore.storages.memmap import DATA_FILE, MemmapStorage
from trajstore.testing.storage import StorageTests


def nested_space():
    return DictSpace({
        "observation": DictSpace({"joints": BoxSpace(-1, 1, (3,), np.float32),
                                  "gripper": BoxSpace(0, 1, (), np.float32)}),
        "action": BoxSpace(-1, 1, (2,), np.float32),
        "done": BinarySpace(),
    })


class TestDictStorage(StorageTests):
    storage_cls = DictStorage

    def make_space(self):
        return nested_space()

    def create_kwargs(self):
        return {"storage_cls_map": {"observation/joints": MemmapStorage, "action": MemmapStorage,
                                    "*": _MemmapDict}}

    def back_door_read(self, storage, positions):
        def leaf(folder, dtype, shape=()):
            return np.fromfile(storage.cache_path / folder / DATA_FILE, dtype).reshape(-1, *shape)[positions]

        return {"observation": {"joints": leaf("observation.joints", "<f4", (3,)),
                                "gripper": leaf("@rest/observation.gripper", "<f4")},
                "action": leaf("action", "<f4", (2,)), "done": leaf("@rest/done", "?")}



from trajstore.storages.base import STORAGE_TYPES  # noqa: E402


@STORAGE_TYPES.register("test-memmap-dict")
class _MemmapDict(DictStorage):
    """A DictStorage of memmaps, one per leaf: a stand-in for a tensor store taking a whole DictSpace."""

    @classmethod
    def prepare(cls, space, **kwargs):
        sep = "\x1f"  # a separator no test key contains
        leaves = {p: MemmapStorage for p, _ in space.leaves(sep)}
        return super().prepare(space, storage_cls_map=leaves, nested_separator=sep, **kwargs)


def test_folder_names_are_safe_and_readable(tmp_path):
    space = DictSpace({"cam..1": DictSpace({"rgb/x": BoxSpace(0, 1, (1,))}), "a b": BoxSpace(0, 1, (1,))})
    with pytest.raises(ValueError, match=r"key 'cam\.\.1' .* contains the nested_separator '\.'"):
        DictStorage.create(space, capacity=2, cache_path=tmp_path / "s", nested_separator=".",
                           storage_cls_map={"*": _MemmapDict})
    with pytest.raises(ValueError, match=r"key 'rgb/x' \(under 'cam\.\.1'\)"):
        DictStorage.create(space, capacity=2, storage_cls_map={"*": _MemmapDict})
    storage = DictStorage.create(space, capacity=2, cache_path=tmp_path / "t", nested_separator="|",
                                 storage_cls_map={"cam..1|rgb/x": MemmapStorage, "a b": MemmapStorage})
    names = sorted(p.name for p in (tmp_path / "t").iterdir())
    assert names == ["a%20b", "cam%2E%2E1.rgb%2Fx", "storage.json", "writer.lock"]
    storage.set(0, {"cam..1": {"rgb/x": [0.5]}, "a b": [0.25]})
    storage.close()
    again = SpaceStorage.load_from(tmp_path / "t")
    assert again.get(0)["cam..1"]["rgb/x"][0] == np.float32(0.5)
    again.close()


@pytest.mark.parametrize("key,match", [
    ("observation/../action", r"'\.\.'"), ("/action", "empty"), ("observation//joints", "empty"),
    ("nope", "not in the space"), ("observation/joints/x", "not in the space"),
])
def test_bad_keys_are_refused_before_writing(tmp_path, key, match):
    with pytest.raises(ValueError, match=match):
        DictStorage.create(nested_space(), capacity=2, cache_path=tmp_path / "s",
                           storage_cls_map={key: MemmapStorage, "*": _MemmapDict})
    assert not (tmp_path / "s").exists()


def test_overlapping_and_missing_keys(tmp_path):
    with pytest.raises(ValueError, match="claimed by both"):
        DictStorage.create(nested_space(), capacity=2, storage_cls_map={
            "observation": _MemmapDict, "observation/joints": MemmapStorage, "*": _MemmapDict})
    with pytest.raises(ValueError, match=r"\['done'\] have no storage"):
        DictStorage.create(nested_space(), capacity=2, storage_cls_map={
            "observation": _MemmapDict, "action": MemmapStorage})


def test_sub_storage_that_cannot_take_its_part(tmp_path):
    with pytest.raises(UnsupportedSpaceError, match="key 'observation'"):
        DictStorage.create(nested_space(), capacity=2, storage_cls_map={"observation": MemmapStorage,
                                                                       "*": _MemmapDict})


def test_sub_dict_key_and_custom_separator(tmp_path):
    storage = DictStorage.create(nested_space(), capacity=4, cache_path=tmp_path / "s", nested_separator=":",
                                 storage_cls_map={"observation": _MemmapDict, "*": _MemmapDict})
    assert list(storage.storages) == ["observation", "*"]
    value = nested_space().sample(np.random.default_rng(0), batch_size=4)
    storage.set(slice(None), value)
    np.testing.assert_array_equal(storage.get(2)["observation"]["joints"], value["observation"]["joints"][2])
    assert [p.name for p in sorted((tmp_path / "s").iterdir())] == ["@rest", "observation", "storage.json", "writer.lock"]
    storage.close()


def test_failed_write_leaves_every_leaf(tmp_path):
    storage = DictStorage.create(nested_space(), capacity=3, cache_path=tmp_path / "s",
                                 storage_cls_map={"observation/joints": MemmapStorage, "action": MemmapStorage,
                                                  "*": _MemmapDict})
    good = nested_space().sample(np.random.default_rng(0), batch_size=3)
    storage.set(slice(None), good)
    bad = nested_space().sample(np.random.default_rng(1), batch_size=3)
    bad["done"] = np.array([0, 1, 5])  # last leaf in write order is bad
    with pytest.raises(ValueError, match="done"):
        storage.set(slice(None), bad)
    np.testing.assert_array_equal(storage.get(slice(None))["observation"]["joints"], good["observation"]["joints"])
    storage.close()


def test_colliding_and_empty_spaces_are_refused(tmp_path):
    with pytest.raises(ValueError, match="contains the nested_separator"):
        DictStorage.create(DictSpace({"a/b": BoxSpace(0, 1, ()), "a": DictSpace({"b": BoxSpace(0, 1, ())})}),
                           capacity=2, storage_cls_map={"*": _MemmapDict})
    with pytest.raises(ValueError, match="no leaves"):
        DictStorage.create(DictSpace({}), capacity=2, storage_cls_map={"*": _MemmapDict})
    with pytest.raises(ValueError, match="no leaves"):
        DictStorage.create(DictSpace({"a": DictSpace({})}), capacity=2, storage_cls_map={"*": _MemmapDict})


def test_long_keys_get_short_unique_folder_names(tmp_path):
    a, b = "😀" * 30 + "a", "😀" * 30 + "b"
    space = DictSpace({a: BoxSpace(0, 1, (1,)), b: BoxSpace(0, 1, (1,))})
    storage = DictStorage.create(space, capacity=2, cache_path=tmp_path / "s",
                                 storage_cls_map={a: MemmapStorage, b: MemmapStorage})
    storage.set(0, {a: [0.25], b: [0.5]})
    storage.close()
    names = [p.name for p in (tmp_path / "s").iterdir() if p.is_dir()]
    assert len(names) == 2 and all(len(n.encode()) <= 200 for n in names)
    again = SpaceStorage.load_from(tmp_path / "s")
    assert again.get(0)[b][0] == np.float32(0.5)
    again.close()
