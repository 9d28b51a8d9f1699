"""Storages: where the slots of each leaf live. One module per storage, one contract.

See :class:`SpaceStorage` for the contract and :mod:`trajstore.storages.metadata_routing`
for how a :class:`~trajstore.spaces.DictSpace` is split across storages by metadata;
:func:`list_files` says which files of a folder are payload and which are small, by each storage's
declaration (:mod:`trajstore.storages.files`). The frames storages live in :mod:`trajstore.storages.frames`.
"""

from trajstore.storages.base import STORAGE_TYPES, SpaceStorage
from trajstore.storages.dict import DictStorage
from trajstore.storages.files import FolderFile, list_files
from trajstore.storages.hdf5 import HDF5Storage
from trajstore.storages.frames import ImageStorage, VideoStorage  # PyAV is imported on first use only
from trajstore.storages.memmap import MemmapStorage
from trajstore.storages.metadata_routing import create_dict_storage_from_space, dict_storage_kwargs_from_space

__all__ = ["STORAGE_TYPES", "SpaceStorage", "DictStorage", "HDF5Storage", "ImageStorage", "MemmapStorage",
           "VideoStorage", "dict_storage_kwargs_from_space", "create_dict_storage_from_space", "FolderFile",
           "list_files"]
