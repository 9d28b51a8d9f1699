"""Both fixture bags (one uncompressed chunk, one zstd chunk) cut at many offsets: a cut either reads a prefix
of every topic's messages (the full bag's first ones, byte for byte, converted to the full import's first
samples) with a RosbagWarning naming the bag, or is refused with a FormatError / ValueError; nothing else is
raised. A cut after the last message reads every message.

Every offset of the summary section (from the Data End record to the end of the file) is scanned as the
import does first (that scan decides whether a bag is refused and where reading stops). What a cut after the
chunk reads depends only on the record it falls in, so each record after the chunk (message indexes,
metadata, data end, summary, footer) is then read whole (open, messages) at its first and last byte (as a
bare .mcap file and as a folder with metadata.yaml) and at a random one, and converted once per record kind.
A few hundred random offsets over the whole file are read whole too, some of them converted.
"""

import os
import random
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")
from typer.testing import CliRunner  # noqa: E402

from trajstore.cli.main import app  # noqa: E402
from trajstore.errors import FormatError  # noqa: E402
from trajstore.interop.rosbag import RosbagWarning, read_bag  # noqa: E402
from trajstore.interop.rosbag import _mcap_records, _source  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rosbag2_mcap"
CHUNK, MESSAGE_INDEX, DATA_END, FOOTER = 0x06, 0x07, 0x0F, 0x02
RANDOM_OFFSETS = 150  # per bag, read whole (open and messages)
CONVERTED = 12        # of them per bag, converted as the import does (values compared)


def records(data: bytes) -> list[tuple[int, int, int]]:
    """``(start, opcode, end)`` of every record of a whole MCAP file, up to its footer."""
    out, pos = [], 8
    while True:
        op, length = data[pos], struct.unpack_from("<Q", data, pos + 1)[0]
        out.append((pos, op, pos + 9 + length))
        pos += 9 + length
        if op == FOOTER:
            return out


class Bag:
    """A fixture bag, its full reading, and a copy to cut in place (bare .mcap file, or folder with
    metadata.yaml): cuts are made from the last offset down, each a truncation of the copy."""

    def __init__(self, b: int, root: Path):
        self.b = b
        self.data = (FIXTURE / f"episode_{b}" / f"episode_{b}.mcap").read_bytes()
        self.records = records(self.data)
        src = _source.open_bag(FIXTURE / f"episode_{b}")
        self.full: dict[str, list[tuple[int, bytes]]] = {}
        for topic, t, raw in src.messages():
            self.full.setdefault(topic, []).append((t, bytes(raw)))
        src.close()
        self.converted = read_bag(FIXTURE / f"episode_{b}")
        self.folder = root / f"folder_{b}"
        self.folder.mkdir()
        shutil.copyfile(FIXTURE / f"episode_{b}" / "metadata.yaml", self.folder / "metadata.yaml")
        self.in_folder = self.folder / f"episode_{b}.mcap"
        self.bare = root / f"bare_{b}.mcap"
        self.last_message_end = max(end for _, op, end in self.records if op == CHUNK)
        self.data_end = next(end for _, op, end in self.records if op == DATA_END)

    def cut(self, off: int, folder: bool) -> Path:
        """The bag cut to its first ``off`` bytes (the copy is rewritten when ``off`` is beyond it)."""
        path = self.in_folder if folder else self.bare
        if not path.exists() or path.stat().st_size < off:
            path.write_bytes(self.data)
        os.truncate(path, off)
        return self.folder if folder else path


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp("cuts")
    return [Bag(0, root), Bag(1, root)]


def read_cut(bag: Bag, off: int, folder: bool) -> dict[str, int] | None:
    """Open and read the bag cut at ``off`` as the import does; check it reads each topic's first messages
    (or is refused naming the file). Returns topic -> messages read, or None when refused."""
    path = bag.cut(off, folder)
    try:
        src = _source.open_bag(path)
    except FormatError as exc:
        assert str(path) in str(exc) and off < bag.last_message_end, (off, exc)
        return None
    try:
        got: dict[str, list[tuple[int, bytes]]] = {}
        for topic, t, raw in src.messages():
            got.setdefault(topic, []).append((t, bytes(raw)))
        assert src.problem, off  # a cut file is never taken as whole
        for topic, msgs in got.items():
            assert msgs == bag.full[topic][:len(msgs)], (off, topic)
        counts = {t: len(got.get(t, [])) for t in bag.full}
        every = counts == {t: len(m) for t, m in bag.full.items()}
        if off >= bag.last_message_end:
            assert every, (off, counts)
        # read whole: said so (and the episode not interrupted) only when it is known
        assert src.read_all() == (every and (folder or off >= bag.data_end)), (off, folder)
        if every and not src.read_all():
            assert all(n is None for n in src.lost().values())
        return counts
    finally:
        src.close()


def convert_cut(bag: Bag, off: int, folder: bool) -> None:
    """The bag cut at ``off`` converted as the import does: each topic's values are the full import's first
    samples, and a RosbagWarning names the bag; or a FormatError / ValueError (nothing else)."""
    path = bag.cut(off, folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = read_bag(path)
        except (FormatError, ValueError) as exc:
            assert str(exc) and off < bag.last_message_end, (off, exc)
            return
    msgs = [str(w.message) for w in caught if issubclass(w.category, RosbagWarning)]
    assert any(m.startswith(f"{path}: ") and ("only a readable prefix" in m or "every message was read" in m)
               for m in msgs), (off, msgs)
    for name, part in got.items():
        full = bag.converted[name]
        n = len(part.t_ns)
        assert 0 < n <= len(full.t_ns)
        np.testing.assert_array_equal(part.t_ns, full.t_ns[:n])
        values = part.values if isinstance(part.values, dict) else {"": part.values}
        expected = full.values if isinstance(full.values, dict) else {"": full.values}
        assert values.keys() == expected.keys()
        for k in values:
            np.testing.assert_array_equal(values[k], expected[k][:n], err_msg=f"{off} {name} {k}")
    if off >= bag.last_message_end:
        assert {k: len(v.t_ns) for k, v in got.items()} == {k: len(v.t_ns) for k, v in bag.converted.items()}


@pytest.mark.parametrize("b", [0, 1])
def test_every_cut_after_the_chunk(bags, b):
    bag = bags[b]
    tail = [r for r in bag.records if r[0] >= bag.last_message_end]
    assert {op for _, op, _ in tail} >= {MESSAGE_INDEX, DATA_END, 0x03, 0x04, 0x08, 0x0B, 0x0E, FOOTER}
    # every offset of the summary section: the scan made before anything is read neither refuses the file nor
    # reads past the cut
    summary = next(s for s, op, _ in tail if op == DATA_END)
    for off in range(len(bag.data) - 1, summary - 1, -1):
        path = bag.cut(off, False)
        gen = _mcap_records.scan(path)
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                found = stop.value
                break
        start = next((s for s, _, end in tail if s <= off < end), off)  # `off` itself: cut in the magic
        assert (found.complete, found.readable_bytes, found.data_end) == (False, start, off >= bag.data_end), off
    # each record after the chunk cut at its first byte, its last byte and one between: every message read
    rng = random.Random(b)
    every = {t: len(m) for t, m in bag.full.items()}
    kinds = set()
    for start, op, end in tail + [(len(bag.data) - 8, "magic", len(bag.data))]:
        for off, folder in sorted({(end - 1, False), (end - 1, True), (rng.randrange(start, end), bool(start % 2)),
                                   (start, False), (start, True)}, reverse=True):
            assert read_cut(bag, off, folder) == every
        if op not in kinds:  # converted: the full import's values
            kinds.add(op)
            convert_cut(bag, rng.randrange(start, end), folder=bool(start % 2))


@pytest.mark.parametrize("b", [0, 1])
def test_random_cuts(bags, b):
    bag = bags[b]
    rng = random.Random(100 + b)
    ends = {len(bag.data) - 1, len(bag.data) - 10, bag.last_message_end, bag.last_message_end - 1}
    offs = sorted(set(rng.sample(range(len(bag.data)), RANDOM_OFFSETS)) | {0, 1, 8, 9, 20, 43, 52, 200} | ends,
                  reverse=True)
    outcomes = {"refused": 0, "prefix": 0, "all": 0}
    for off in offs:
        counts = read_cut(bag, off, folder=bool(off % 2))
        key = "refused" if counts is None else "all" if counts == {t: len(m) for t, m in bag.full.items()} \
            else "prefix"
        outcomes[key] += 1
    assert min(outcomes.values()) > 0, outcomes  # the offsets reach all three outcomes
    for off in sorted(rng.sample(offs, CONVERTED), reverse=True):
        convert_cut(bag, off, folder=bool(off % 2))


def test_cli_cut_in_the_metadata_record_and_in_the_footer(tmp_path):
    """The two cuts first reported refused: inside the Metadata record after the chunk's message indexes,
    inside the footer."""
    data = (FIXTURE / "episode_0" / "episode_0.mcap").read_bytes()
    runner = CliRunner()
    for off, said in [(827036, "ends without its MCAP summary"),
                      (833171, "is cut short in the MCAP summary section, after the last message")]:
        (tmp_path / f"x{off}.mcap").write_bytes(data[:off])
        result = runner.invoke(app, ["import", "rosbag", "--no-progress", str(tmp_path / f"x{off}.mcap"),
                                     str(tmp_path / f"out{off}")])
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output and said in result.output
        assert "imported 1 bag (5 streams, 789 samples)" in result.output


def test_cut_in_the_header_record_says_why_there_is_no_topic(tmp_path):
    mcap = tmp_path / "rec.mcap"
    mcap.write_bytes((FIXTURE / "episode_0" / "episode_0.mcap").read_bytes()[:20])
    with pytest.raises(FormatError, match=r"no topic in .*rec.mcap \(rec.mcap ends without its MCAP summary "
                                          r"\(the recording was cut short\)\)"):
        read_bag(mcap)
