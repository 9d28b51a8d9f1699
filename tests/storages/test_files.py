"""The storage file contract: each storage declares its payload files, :func:`list_files` classifies a
folder by those declarations (as the old name pattern of remote/layout.py did for every built-in
layout), a storage opens from an explicit payload source, and the old import paths still work."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.storages.blob_storage import INDEX_FILE, BlobStorage, blob_name
from trajstore.damage import DamagedBufferWarning
from trajstore.errors import FormatError, UnknownTypeError
from trajstore.replay_buffer import ReplayBuffer
from trajstore.spaces import BinarySpace, BoxSpace, DictSpace
from trajstore.storages import (DictStorage, HDF5Storage, ImageStorage, MemmapStorage, SpaceStorage, VideoStorage,
                                dict_storage_kwargs_from_space)
from trajstore.storages._payload import payload_under
from trajstore.storages.files import PAYLOAD, SMALL, classify, list_files, referenced_payload
from trajstore.testing.storage import StorageTests

pytest.importorskip("av")

#: The pattern remote/layout.py used before storages declared their files (image chunks, video segments).
OLD_PATTERN = re.compile(r"(?:^|/)(?:chunks/\d{6,}\.bin|segments/\d{8,}\.mp4)$")
H, W = 16, 24
SPACE = DictSpace({
    "observation": DictSpace({
        "rgb": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "image"}),  # JPEG chunks
        "depth": BoxSpace(0, 65535, (H, W), np.uint16, metadata={"kind": "depth"}),  # 16-bit PNG chunks
        "wrist": BoxSpace(0, 255, (H, W, 3), np.uint8, metadata={"kind": "video", "fps": 10}),  # H.264
        "joints": BoxSpace(-10, 10, (4,), np.float32),  # HDF5, compressed
    }),
    "chunks": BoxSpace(-1, 1, (2,), np.float32),  # memmap, in a folder named like the image storage's
    "blob": BoxSpace(0, 255, (3, 5), np.uint8),  # the test storage's layout
    "terminated": BinarySpace(()),
})


def _step(n: int) -> dict:
    y, x = np.mgrid[0:H, 0:W]
    img = np.stack([(x * 5 + y * 3 + n * 7 + 20 * c) % 256 for c in range(3)], -1).astype(np.uint8)
    return {"observation": {"rgb": img, "depth": (img[..., 0].astype(np.uint16) * 250), "wrist": img[::-1].copy(),
                            "joints": np.full(4, (n % 100) / 20, np.float32)},
            "chunks": np.array([np.sin(n), np.cos(n)], np.float32), "blob": np.full((3, 5), n % 256, np.uint8),
            "terminated": n % 6 == 5}


def _buffer(path: Path, capacity: int | None = None, steps: int = 18) -> None:
    kwargs = dict_storage_kwargs_from_space(
        SPACE, kind_storage_cls={"image": ImageStorage, "depth": ImageStorage, "video": VideoStorage},
        kind_kwargs={"depth": {"format": "PNG", "chunk_bytes": 4096}, "image": {"chunk_bytes": 4096},
                     "video": {"segment_frames": 4}},
        key_storage_cls={"chunks": MemmapStorage, "blob": BlobStorage},
        default_storage_cls=HDF5Storage, default_kwargs={"compression": "gzip"})
    with ReplayBuffer.create(DictStorage, SPACE, cache_path=path, capacity=capacity, **kwargs) as rb:
        for n in range(steps):
            rb.append(_step(n))
            if n % 6 == 5:
                rb.end_episode(final_observation=_step(n + 100)["observation"])


@pytest.mark.parametrize("capacity", [None, 8])
def test_every_builtin_layout_is_classified_as_the_old_name_pattern_did(tmp_path, capacity):
    _buffer(tmp_path / "rb", capacity)
    files = list_files(tmp_path / "rb")
    kinds = {f.relpath: f.kind for f in files}
    builtin = {p: k for p, k in kinds.items() if not p.startswith("storage/blob/")}
    assert builtin == {p: PAYLOAD if OLD_PATTERN.search(p) else SMALL for p in builtin}
    payload = sorted(p for p, k in builtin.items() if k == PAYLOAD)
    for leaf in ("observation.rgb/chunks/", "observation.depth/chunks/", "observation.wrist/segments/"):
        assert any(p.startswith(f"storage/{leaf}") for p in payload), leaf  # each payload layout is there
    for leaf in ("rgb/chunks/", "depth/chunks/"):
        assert any(p.startswith(f"final_observations/{leaf}") for p in payload), leaf
    for small in ("trajstore.json", "storage/storage.json", "storage/observation.rgb/index.log",
                  "storage/observation.wrist/index.log", "storage/chunks/data.bin", "storage/@rest/data.h5"):
        assert kinds[small] == SMALL, small
    # Each file is owned by the storage folder it lies in; the buffer's own files by none.
    owner = {f.relpath: f.storage for f in files}
    assert owner["trajstore.json"] is None and owner["storage/storage.json"] == "storage"
    assert owner["storage/observation.rgb/chunks/000000.bin"] == "storage/observation.rgb"


def test_a_storage_of_its_own_layout_declares_its_payload(tmp_path):
    _buffer(tmp_path / "rb")
    kinds = {f.relpath: f.kind for f in list_files(tmp_path / "rb")}
    blobs = {p: k for p, k in kinds.items() if p.startswith("storage/blob/")}
    assert blobs[f"storage/blob/{INDEX_FILE}"] == SMALL and blobs["storage/blob/storage.json"] == SMALL
    data = sorted(p for p in blobs if p.endswith(".dat"))
    assert len(data) >= 2 and all(blobs[p] == PAYLOAD for p in data)  # one blob per block written
    assert not any(OLD_PATTERN.search(p) for p in data)  # a name pattern would have called them small
    # What the indexes point to: every blob, and every live chunk and segment.
    referenced = set(referenced_payload(tmp_path / "rb"))
    assert {p for p in referenced if p.startswith("storage/blob/")} == set(data)
    assert referenced == {p for p, k in kinds.items() if k == PAYLOAD}


def test_referenced_payload_reads_the_small_files_only(tmp_path):
    _buffer(tmp_path / "rb", capacity=8)
    small = tmp_path / "small"
    for f in list_files(tmp_path / "rb"):
        if f.kind == SMALL:
            (small / f.relpath).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp_path / "rb" / f.relpath, small / f.relpath)
    assert referenced_payload(small) == referenced_payload(tmp_path / "rb")
    kinds = {f.relpath: f.kind for f in list_files(tmp_path / "rb")}
    assert set(referenced_payload(small)) <= {p for p, k in kinds.items() if k == PAYLOAD}


def test_classify_names_a_bad_or_unknown_descriptor():
    paths = ["storage.json", "chunks/000000.bin"]
    with pytest.raises(UnknownTypeError, match="no-such-storage"):
        classify(paths, lambda rel: json.dumps({"type": "no-such-storage"}).encode(), "here")
    with pytest.raises(FormatError, match="here/storage.json is not a storage descriptor"):
        classify(paths, lambda rel: b"{not json", "here")
    kinds = classify(paths, lambda rel: json.dumps({"type": "image"}).encode(), "here")
    assert [(f.relpath, f.kind, f.storage) for f in kinds] == [("storage.json", SMALL, ""),
                                                               ("chunks/000000.bin", PAYLOAD, "")]


class FolderSource:
    """A PayloadSource serving another folder's files, counting what it was asked."""

    def __init__(self, root: Path):
        self.root, self.asked = root, []

    def exists(self, relpath):
        self.asked.append(("exists", relpath))
        return (self.root / relpath).is_file()

    def size(self, relpath):
        return (self.root / relpath).stat().st_size

    def read_ranges(self, relpaths, starts, stops):
        self.asked.extend(("range", p) for p in relpaths)
        return [(self.root / p).read_bytes()[a:b] for p, a, b in zip(relpaths, starts, stops)]

    def local_copy(self, relpath):
        self.asked.append(("copy", relpath))
        return self.root / relpath


def test_a_buffer_opens_from_the_payload_source_it_is_given(tmp_path):
    _buffer(tmp_path / "rb")
    mirror = tmp_path / "mirror"  # the small files only, as a published copy's mirror holds them
    for f in list_files(tmp_path / "rb"):
        if f.kind == SMALL:
            (mirror / f.relpath).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp_path / "rb" / f.relpath, mirror / f.relpath)
    # No source: the folder's own payload files, all missing. The open works and reports them; a read
    # of a frame names the missing file; a writer refuses the folder.
    with pytest.warns(DamagedBufferWarning, match="payload file"):
        bare = ReplayBuffer.load_from(mirror)
    with bare:
        assert bare.damaged.episodes == tuple(e.id for e in bare.episodes)
        assert {p.part for p in bare.damaged.parts} >= {"observation/rgb", "observation/depth", "observation/wrist"}
        with pytest.raises(FormatError, match="payload file is missing|No such file"):  # BlobStorage: its own
            bare[0]
        with pytest.raises(FormatError, match=r"observation.rgb/chunks/\d+\.bin: payload file is missing"):
            bare.storage.parts()["observation/rgb"][0]
    with pytest.raises(FormatError, match="writer refuses"):
        ReplayBuffer.load_from(mirror, read_only=False)
    source = FolderSource(tmp_path / "rb")
    with ReplayBuffer.load_from(tmp_path / "rb") as local, ReplayBuffer.load_from(mirror, payload=source) as rb:
        for a, b in zip(local[np.arange(18)].values(), rb[np.arange(18)].values()):
            if isinstance(a, dict):
                for k in a:
                    np.testing.assert_array_equal(a[k], b[k])
            else:
                np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(local.final_observation(1)["rgb"], rb.final_observation(1)["rgb"])
    asked = {p for _, p in source.asked}
    assert "storage/blob/" + blob_name(1) in asked and "storage/observation.rgb/chunks/000000.bin" in asked
    assert any(p.startswith("storage/observation.wrist/segments/") for p in asked)
    assert any(p.startswith("final_observations/") for p in asked)  # the final observations' prefix
    assert all(not p.endswith((".log", ".json", ".h5", ".idx")) for p in asked)  # small files are local
    with pytest.raises(ValueError, match="opens read-only"):
        SpaceStorage.load_from(tmp_path / "rb" / "storage", read_only=False, payload=source)


def test_payload_under_prefixes_once_however_deep():
    source = FolderSource(Path("/nowhere"))
    inner = payload_under(payload_under(source, "storage"), "observation.rgb/")
    inner.exists("chunks/000001.bin")
    assert source.asked == [("exists", "storage/observation.rgb/chunks/000001.bin")]
    assert payload_under(None, "storage") is None


class TestBlobStorage(StorageTests):
    """The test storage is a correct storage: the conformance suite, with a back door into its blobs."""

    storage_cls = BlobStorage

    def back_door_read(self, storage, positions):
        table = np.frombuffer((storage.cache_path / INDEX_FILE).read_bytes(), "<i8").reshape(-1, 3)
        out = []
        for blob, offset, length in table[positions]:
            data = (storage.cache_path / blob_name(int(blob))).read_bytes()[offset:offset + length]
            out.append(np.frombuffer(data, storage.space.dtype).reshape(storage.space.shape))
        return np.array(out, storage.space.dtype).reshape(len(out), *storage.space.shape)


OLD_PATHS = ["image", "video", "_image_codec", "_video_codec", "_slot_index", "_frame_space"]


@pytest.mark.parametrize("name", OLD_PATHS)
def test_old_import_paths_warn_and_are_the_moved_modules(name):
    code = (f"import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            f"try:\n    import trajstore.storages.{name}\nexcept DeprecationWarning as w:\n    print(w)\n"
            f"warnings.simplefilter('ignore')\n"
            f"import trajstore.storages.{name} as old, trajstore.storages.frames.{name} as new\n"
            f"print(old is new)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == (f"trajstore.storages.{name} moved to trajstore.storages.frames.{name}; import it from there "
                      f"(trajstore.storages.{name} goes away in trajstore 0.3)") and out[1] == "True"


def test_the_storages_and_the_buffer_import_nothing_of_remote():
    """The upward import is gone: the buffer asks the URL opener registry (trajstore._openers) and
    storages take a payload source at open; neither names trajstore.remote in an import."""
    import ast

    root = Path(__file__).resolve().parents[2] / "src" / "trajstore"
    offenders = []
    for package in ("storages", "replay_buffer", "spaces"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                offenders += [f"{path.relative_to(root)}:{node.lineno}" for n in names
                              if n == "trajstore.remote" or n.startswith("trajstore.remote.")]
    assert offenders == []
    code = ("import sys, trajstore.replay_buffer, trajstore.storages\n"
            "print(sorted(m for m in sys.modules if m.startswith('trajstore.remote')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
