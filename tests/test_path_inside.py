"""``trajstore._fs.path_inside``: a path a file names, kept inside the folder it was read from."""

import os

import pytest

from trajstore._fs import path_inside
from trajstore.errors import FormatError


@pytest.fixture
def root(tmp_path):
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "root" / "sub" / "a.bin").write_bytes(b"a")
    (tmp_path / "secret.bin").write_bytes(b"s")
    return tmp_path / "root"


def test_a_path_inside_is_root_joined_unresolved(root):
    assert path_inside(root, "sub/a.bin", "what") == root / "sub" / "a.bin"
    assert path_inside(root, "sub/./missing.bin", "what") == root / "sub" / "missing.bin"  # existence not checked
    (root / "link.bin").symlink_to(root / "sub" / "a.bin")
    (root / "rel-link").symlink_to("sub")
    assert path_inside(root, "link.bin", "what") == root / "link.bin"
    assert path_inside(root, "rel-link/a.bin", "what") == root / "rel-link" / "a.bin"


def test_a_root_behind_a_symlink_is_fine(root, tmp_path):
    (tmp_path / "alias").symlink_to(root)
    assert path_inside(tmp_path / "alias", "sub/a.bin", "what").read_bytes() == b"a"


@pytest.mark.parametrize("rel", ["../secret.bin", "sub/../../secret.bin", "..", "", "sub/a\0.bin"])
def test_dotdot_empty_and_nul_are_refused(root, rel):
    with pytest.raises(FormatError, match=r"^images: the path .* leads outside .*root"):
        path_inside(root, rel, "images")


def test_absolute_paths_are_refused(root, tmp_path):
    for rel in (str(tmp_path / "secret.bin"), str(root / "sub" / "a.bin"), "/etc/passwd"):
        with pytest.raises(FormatError, match=r"leads outside"):
            path_inside(root, rel, "images")


def test_symlinks_leaving_the_root_are_refused(root, tmp_path):
    (root / "out.bin").symlink_to(tmp_path / "secret.bin")
    (root / "out-dir").symlink_to(tmp_path)
    (root / "sub" / "up").symlink_to("../..")
    (root / "dangling").symlink_to(tmp_path / "nothing-here")
    for rel in ("out.bin", "out-dir/secret.bin", "sub/up/secret.bin", "dangling"):
        with pytest.raises(FormatError, match=r"leads outside .* through a symlink \(to "):
            path_inside(root, rel, "images")


def test_a_symlink_loop_is_not_followed_forever(root):
    (root / "loop").symlink_to("loop")
    try:
        path = path_inside(root, "loop", "images")
    except FormatError:
        return
    assert not path.is_file() and os.path.islink(path)


def test_check_tree_inside_finds_a_symlink_out_at_any_depth(root, tmp_path):
    from trajstore._fs import check_tree_inside

    (root / "sub" / "deeper").mkdir()
    (root / "sub" / "deeper" / "ok").symlink_to("../a.bin")
    check_tree_inside(root, "store")  # a symlink that stays inside is fine
    (root / "sub" / "deeper" / "out").symlink_to(tmp_path / "secret.bin")
    with pytest.raises(FormatError, match=r"^store: the path 'sub/deeper/out' leads outside .* through a symlink"):
        check_tree_inside(root, "store")


def test_check_tree_inside_does_not_follow_a_symlinked_folder(root, tmp_path):
    from trajstore._fs import check_tree_inside

    (tmp_path / "other").mkdir()
    (root / "dir-out").symlink_to(tmp_path / "other")
    with pytest.raises(FormatError, match=r"'dir-out' leads outside"):
        check_tree_inside(root, "store")
