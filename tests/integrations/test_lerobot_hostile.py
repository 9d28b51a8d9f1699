"""LeRobot import of hostile datasets: nothing outside the dataset folder is read (``..``, absolute
paths, symlinks out of it), declared sizes are checked before anything is allocated, and every case
is a FormatError naming the file; the CLI prints one line and exits 2."""

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("av")
import pyarrow.parquet as pq  # noqa: E402
from PIL import Image  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from trajstore.cli.main import app  # noqa: E402
from trajstore.errors import FormatError  # noqa: E402
from trajstore.interop.lerobot import import_lerobot  # noqa: E402
from trajstore.replay_buffer import ReplayBuffer  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "lerobot_v3_sim"
DATA = "data/chunk-000/file-000.parquet"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"


def run(src, out, **kwargs):
    return import_lerobot(src, out, progress=False, camera="png", **kwargs)


@pytest.fixture
def src(tmp_path) -> Path:
    """A copy of the fixture two folders below ``tmp_path`` (so ``../../x`` is ``tmp_path / x``)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "a" / "src"))


def nothing_made(tmp_path) -> None:
    assert not (tmp_path / "rb").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def edit_info(src: Path, edit) -> None:
    info = json.loads((src / "meta/info.json").read_text())
    edit(info)
    (src / "meta/info.json").write_text(json.dumps(info))


def edit_episodes(src: Path, column: str, values: list) -> None:
    table = pq.read_table(src / EPISODES)
    i = table.column_names.index(column)
    pq.write_table(table.set_column(i, column, pa.array(values, table.schema.field(column).type)), src / EPISODES)


def wrist_png(tmp_path) -> Path:
    """A PNG of the wrist camera's size (32 x 32 RGB) outside the dataset: what a hostile cell points at."""
    buf = io.BytesIO()
    Image.fromarray(np.full((32, 32, 3), 77, np.uint8)).save(buf, format="PNG")
    path = tmp_path / "outside.png"
    path.write_bytes(buf.getvalue())
    return path


def point_wrist_cells_at(src: Path, path: str) -> None:
    """Every wrist image cell becomes ``{"bytes": None, "path": path}``."""
    table = pq.read_table(src / DATA)
    i = table.column_names.index("observation.images.wrist")
    cells = pa.array([{"bytes": None, "path": path}] * table.num_rows, table.schema.field(i).type)
    pq.write_table(table.set_column(i, table.schema.field(i), cells), src / DATA)


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_image_cell_path_outside_the_dataset_is_not_read(tmp_path, src, how):
    outside = wrist_png(tmp_path)
    if how == "symlink":
        (src / "inside.png").symlink_to(outside)
    rel = {"dotdot": "../../outside.png", "absolute": str(outside), "symlink": "inside.png"}[how]
    point_wrist_cells_at(src, rel)
    with pytest.raises(FormatError, match=r"image 'observation.images.wrist': the path .* leads outside"):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)


def test_image_cell_path_inside_the_dataset_is_read(tmp_path, src):
    """The same cells pointing at a file of the dataset (through a symlink that stays inside) import."""
    (src / "images").mkdir()
    shutil.move(wrist_png(tmp_path), src / "images" / "wrist.png")
    (src / "link.png").symlink_to(src / "images" / "wrist.png")
    point_wrist_cells_at(src, "link.png")
    run(src, tmp_path / "rb")
    with ReplayBuffer.load_from(tmp_path / "rb") as rb:
        assert (rb.get_episode(1)["observation"]["images"]["wrist"] == 77).all()


@pytest.mark.parametrize("which", [DATA, EPISODES, "meta/tasks.parquet", "meta/info.json",
                                   "videos/observation.images.front/chunk-000/file-000.mp4"])
def test_symlinked_file_outside_the_dataset_is_refused(tmp_path, src, which):
    outside = tmp_path / Path(which).name
    shutil.move(src / which, outside)
    (src / which).symlink_to(outside)
    with pytest.raises(FormatError, match=r"leads outside .* through a symlink"):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)


def test_symlinked_folder_outside_the_dataset_is_refused(tmp_path, src):
    shutil.move(src / "data", tmp_path / "data")
    (src / "data").symlink_to(tmp_path / "data")
    with pytest.raises(FormatError, match=r"info.json: the path template .*: the path "
                                          r"'data/chunk-000/file-000.parquet' leads outside"):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)


def test_symlink_to_a_file_inside_the_dataset_is_followed(tmp_path, src):
    shutil.move(src / DATA, src / "data" / "real.parquet")
    (src / DATA).symlink_to("../real.parquet")
    assert run(src, tmp_path / "rb").steps == 36


@pytest.mark.parametrize("template, message", [
    ("../data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", r"leads outside"),
    ("/etc/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", r"leads outside"),
    ("data/chunk-{chunk_index:03d}/file-{file_index:>1000000000}.parquet", r"asks for the format '>1000000000'"),
    ("data/chunk-{chunk_index:03d}/file-{file_index:.1000000000f}.parquet", r"asks for the format"),
    ("data/chunk-{chunk_index:03d}/file-{file_index:{chunk_index}}.parquet", r"asks for the format"),
    ("data/{file_index.__class__}/file.parquet", r"names the field \{file_index.__class__\}"),
    ("data/{episode_index}.parquet", r"names the field \{episode_index\}"),
    ("data/{chunk_index", r"is not a path template"),
])
def test_hostile_data_path_template(tmp_path, src, template, message):
    edit_info(src, lambda info: info.update(data_path=template))
    with pytest.raises(FormatError, match=message) as caught:
        run(src, tmp_path / "rb")
    assert "info.json" in str(caught.value) and len(str(caught.value)) < 2000
    nothing_made(tmp_path)


@pytest.mark.parametrize("key, shape, message", [
    ("observation.state", [100000, 100000], r"feature 'observation.state': shape \[100000, 100000\] is 10000000000 "
                                            r"values per frame"),
    ("observation.images.wrist", [100000, 100000, 3], r"feature 'observation.images.wrist': shape .* values per"),
    ("observation.images.front", [30000, 30000, 3], r"feature 'observation.images.front': shape .* values per"),
    # under the cap but more than the parquet file holds: found from its footer, before reading a value
    ("observation.state", [4000, 4000], r"file-000.parquet holds 144 values of column 'observation.state', fewer "
                                        r"than its 36 rows of shape \[4000, 4000\] need \(576000000\)"),
])
def test_declared_shape_is_checked_before_allocating(tmp_path, src, key, shape, message):
    edit_info(src, lambda info: info["features"][key].update(shape=shape))
    with pytest.raises(FormatError, match=message):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)


@pytest.mark.parametrize("lengths, message", [
    ([2**40, 9, 15], r"episode 0: .*meta/episodes/chunk-000/file-000.parquet gives it length 1099511627776, but its "
                     r"data file .*file-000.parquet has 36 rows"),
    ([12, 9, 16], r"episode 2: .* gives it length 16, .* has 36 rows for the episodes it holds \(37 frames claimed\)"),
])
def test_episode_length_is_checked_against_the_data_file(tmp_path, src, lengths, message):
    edit_episodes(src, "length", lengths)
    with pytest.raises(FormatError, match=message):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)


@pytest.mark.parametrize("column, values, message", [
    ("episode_index", [0, None, 2], r"file-000.parquet column 'episode_index' holds a value that is not an integer"),
    ("data/file_index", [0, None, 0], r"column 'data/file_index' holds a value that is not an integer"),
    ("videos/observation.images.front/from_timestamp", [0.0, float("nan"), 2.1],
     r"column 'videos/observation.images.front/from_timestamp' holds a value that is not a finite number"),
])
def test_episode_table_values_are_typed(tmp_path, src, column, values, message):
    edit_episodes(src, column, values)
    with pytest.raises(FormatError, match=message):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)


def test_cli_prints_one_line_and_exits_2(tmp_path, src):
    edit_episodes(src, "length", [2**40, 9, 15])
    result = CliRunner().invoke(app, ["import", "lerobot", str(src), str(tmp_path / "rb"), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: LeRobot episode 0:") and result.output.count("\n") == 1
    assert "Traceback" not in result.output
    nothing_made(tmp_path)


def test_hostile_files_do_not_change_the_real_import(tmp_path):
    """Control: the untouched fixture imports all 36 frames (the cases above fail for their edit only)."""
    assert run(FIXTURE, tmp_path / "rb").steps == 36
    assert not os.path.islink(FIXTURE / DATA)


def test_a_footer_declaring_more_rows_than_the_file_can_hold_is_refused(tmp_path, src, monkeypatch):
    """The data file's footer is trusted only as far as its size allows (MAX_ROWS_PER_BYTE rows a byte)."""
    from trajstore.interop.lerobot import _bounds

    size = (src / DATA).stat().st_size
    monkeypatch.setattr(_bounds, "MAX_ROWS_PER_BYTE", 35 / size)  # as if the file were too small for 36 rows
    with pytest.raises(FormatError, match=rf"file-000.parquet declares 36 rows in {size} bytes"):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header says ``width`` x ``height`` RGB, holding far fewer pixels."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def test_an_embedded_image_of_another_size_is_refused_before_decoding(tmp_path, src, monkeypatch):
    """A PNG whose header says 9000 x 9000 (a 243 MB frame): refused from its header, never decoded."""
    import PIL.PngImagePlugin

    decoded = []
    real_load = PIL.PngImagePlugin.PngImageFile.load
    monkeypatch.setattr(PIL.PngImagePlugin.PngImageFile, "load", lambda im: decoded.append(im) or real_load(im))
    table = pq.read_table(src / DATA)
    i = table.column_names.index("observation.images.wrist")
    cells = pa.array([{"bytes": png_claiming(9000, 9000), "path": None}] * table.num_rows, table.schema.field(i).type)
    pq.write_table(table.set_column(i, table.schema.field(i), cells), src / DATA)
    with pytest.raises(FormatError, match=r"file-000.parquet\) frame 0: image 'observation.images.wrist' is "
                                          r"9000 x 9000, info.json says \(32, 32, 3\)"):
        run(src, tmp_path / "rb")
    assert decoded == []
    nothing_made(tmp_path)


@pytest.mark.parametrize("edit, message", [
    (lambda info: info["features"]["observation.images.wrist"].update(names=float("nan")),
     r"feature 'observation.images.wrist': names must be JSON without NaN or infinity"),
    (lambda info: info.update(fps=float("nan")), r"info.json: fps must be a positive finite number, got nan"),
    (lambda info: info.update(fps=float("inf")), r"info.json: fps must be a positive finite number, got inf"),
])
def test_info_json_numbers_that_json_has_not(tmp_path, src, edit, message):
    """Python's json reads NaN and Infinity; info.json values holding them are refused."""
    edit_info(src, edit)
    with pytest.raises(FormatError, match=message):
        run(src, tmp_path / "rb")
    nothing_made(tmp_path)
