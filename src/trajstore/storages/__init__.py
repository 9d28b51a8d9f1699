"""Storages: where the slots of each leaf live. One module per storage, one contract.

See :class:`SpaceStorage` for the contract and :mod:`trajstore.storages.metadata_routing`
for how a :class:`~trajstore.spaces.DictSpace` is split across storages by metadata.
"""

from trajstore.storages.base import STORAGE_TYPES, SpaceStorage
from trajstore.storages.memmap import MemmapStorage

__all__ = ["STORAGE_TYPES", "SpaceStorage", "MemmapStorage"]
