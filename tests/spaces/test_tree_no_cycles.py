"""Nesting and flattening leave no reference cycle: a batch's arrays are freed as soon as the caller
drops them, not when the cyclic GC next runs (a DataLoader worker otherwise holds tens of batches)."""

import gc
import weakref

import numpy as np

from trajstore.spaces import BoxSpace, DictSpace
from trajstore.spaces.tree import flatten, unflatten


def _space():
    return DictSpace({"observation": DictSpace({"state": BoxSpace(-1, 1, (3,), np.float32),
                                                "image": BoxSpace(0, 255, (4, 4, 3), np.uint8)}),
                      "action": BoxSpace(-1, 1, (2,), np.float32)})


def _freed_without_gc(make):
    gc.disable()
    try:
        arr = np.zeros((8, 3), np.float32)
        ref = weakref.ref(arr)
        result = make(arr)
        del arr, result
        return ref() is None
    finally:
        gc.enable()


def test_unflatten_frees_leaves_without_the_cyclic_gc():
    space = _space()
    nested = unflatten(space, [np.ones(3), np.ones((4, 4, 3)), np.ones(2)])
    assert nested["observation"]["state"].shape == (3,) and nested["action"].shape == (2,)
    assert _freed_without_gc(lambda a: unflatten(space, [a, np.ones((4, 4, 3)), np.ones(2)]))


def test_flatten_frees_leaves_without_the_cyclic_gc():
    space = _space()
    out = flatten(space, {"observation": {"state": 1, "image": 2}, "action": 3})
    assert out == [1, 2, 3]
    assert _freed_without_gc(lambda a: flatten(space, {"observation": {"state": a, "image": 0}, "action": 0}))
