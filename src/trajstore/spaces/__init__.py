"""Spaces: what one step of data looks like. NumPy only, no I/O.

A step is described by a (nested) :class:`DictSpace` whose leaves carry JSON metadata::

    DictSpace({
        "pixels": BoxSpace(0, 255, (96, 96, 3), np.uint8,
                           metadata={"kind": "image", "layout": "HWC", "fps": 10}),
        "agent_pos": BoxSpace(0, 512, (2,), np.float32),
    })
"""

from trajstore.spaces.base import SPACE_TYPES, Space, space_from_json
from trajstore.spaces.binary import BinarySpace
from trajstore.spaces.box import BoxSpace
from trajstore.spaces import tree
from trajstore.spaces.dict import DictSpace, check_batch_size
from trajstore.spaces.gymnasium import from_gymnasium
from trajstore.spaces.metadata import SpaceMetadata
from trajstore.spaces.text import TextSpace
from trajstore.spaces.tree import map_leaves

__all__ = [
    "SPACE_TYPES", "Space", "SpaceMetadata", "BoxSpace", "BinarySpace", "TextSpace", "DictSpace",
    "space_from_json", "from_gymnasium", "map_leaves", "check_batch_size", "tree",
]
