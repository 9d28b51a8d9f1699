"""Folders of two ALOHA episodes (raw frames, or the JPEG-compressed variant) with the ``out`` path beside."""

import pytest

from tests.interop_aloha import episodes as E


@pytest.fixture
def raw(tmp_path):
    E.raw_folder(tmp_path / "src", (0, 1))
    return tmp_path / "src", tmp_path / "out"


@pytest.fixture
def jpeg(tmp_path):
    E.compressed_folder(tmp_path / "src", (0, 1))
    return tmp_path / "src", tmp_path / "out"
