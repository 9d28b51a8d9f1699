"""MemmapStorage against the shared conformance suite, with np.fromfile as the back door."""

import numpy as np

from trajstore.spaces import BoxSpace
from trajstore.storages.memmap import DATA_FILE, MemmapStorage
from trajstore.testing.storage import StorageTests


class TestMemmapStorage(StorageTests):
    storage_cls = MemmapStorage

    def make_space(self):
        return BoxSpace(-100, 100, (3, 2), np.int16)

    def back_door_read(self, storage, positions):
        raw = np.fromfile(storage.cache_path / DATA_FILE, dtype="<i2").reshape(-1, 3, 2)
        return raw[positions]

