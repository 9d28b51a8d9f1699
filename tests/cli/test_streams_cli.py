"""`trajstore info | episodes | verify` on a stream buffer folder: streams with their measured rates and
spans, and verify finding timestamps that a damaged file put out of order (exit 1)."""

import json

import h5py
import numpy as np
import pytest

from tests.cli.stream_buffers import T1, joint_values, make_stream_buffer, run
from trajstore.errors import FormatError
from trajstore.ops import describe_streams, summarize_stream_episodes, verify_stream_buffer
from trajstore.ops.stream_info import is_stream_folder
from trajstore.streams import StreamBuffer


@pytest.fixture(scope="module")
def sbuf(tmp_path_factory):
    return make_stream_buffer(tmp_path_factory.mktemp("streams") / "sb")


@pytest.fixture
def fresh(tmp_path):
    return make_stream_buffer(tmp_path / "sb")


def timestamp_file(path, stream):
    return path / "streams" / stream / "storage" / "@rest" / "data.h5"


def test_describe_measures_each_stream(sbuf):
    d = describe_streams(sbuf)
    assert is_stream_folder(sbuf) and not is_stream_folder(sbuf / "streams" / "wrist")
    assert (d.episodes, d.complete_episodes, d.interrupted_episodes, d.open_episode) == (2, 2, 0, False)
    assert d.duration_s == pytest.approx(2 * 0.998)  # joints: 0 .. 998 ms in each episode
    by = {s.name: s for s in d.streams}
    assert list(by) == ["wrist", "joints", "gripper"]
    wrist, joints, gripper = by["wrist"].rates, by["joints"].rates, by["gripper"].rates
    assert (wrist.samples, joints.samples, gripper.samples) == (59, 1000, 101)
    assert wrist.rate_hz == pytest.approx(30.0, rel=1e-6) and wrist.median_period_s == pytest.approx(1 / 30, rel=1e-6)
    assert wrist.jitter_p99_s == pytest.approx(1e-9)  # ns rounding of i * 1e9 / 30
    assert (wrist.gaps, wrist.max_gap_episode) == (1, 1)
    assert wrist.max_gap_s == pytest.approx(2 / 30, abs=1e-9) and wrist.max_gap_at_s == pytest.approx(11 / 30, abs=1e-9)
    assert wrist.max_gap_at_ns == T1 + round(11e9 / 30)
    assert joints.rate_hz == pytest.approx(500.0) and joints.jitter_std_s == 0 and joints.gaps == 0
    assert gripper.rate_hz == pytest.approx(50.0) and gripper.duplicates == 1 and gripper.gaps == 0
    assert by["wrist"].leaves[0].storage == "ImageStorage" and by["wrist"].leaves[0].shape == (24, 32, 3)
    assert by["joints"].leaves[0].key == "joints" and by["joints"].leaves[0].dtype == "float32"
    assert all(s.nbytes > 0 for s in d.streams)


def test_info_prints_the_rates_and_json(sbuf):
    r = run("info", sbuf)
    assert r.exit_code == 0, r.output
    assert "stream buffer, 3 streams, 2 episodes (2 complete, 0 interrupted)" in r.output
    first_table = r.output.split("└")[0]
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in first_table.splitlines() if line.startswith("│")}
    # jitter in ms, fixed notation (the wrist's is 1 ns rounding: 0.000 ms)
    assert rows["wrist"][:7] == ["59", "2", "30", "33.333", "0.000", "0.000", "1"]
    assert rows["wrist"][7] == "66.7 ms, ep 1 at 0.367 s"
    assert rows["joints"][:7] == ["1,000", "2", "500", "2.000", "0.000", "0.000", "0"]
    assert rows["gripper"][:7] == ["101", "2", "50", "20.000", "0.000", "0.000", "0"] and rows["gripper"][8] == "1"
    assert "ImageStorage" in r.output and "HDF5Storage" in r.output
    r = run("info", sbuf, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["kind"] == "streams" and d["episodes"] == 2
    assert [(s["name"], s["samples"], s["rates"]["gaps"]) for s in d["streams"]] == [
        ("wrist", 59, 1), ("joints", 1000, 0), ("gripper", 101, 0)]
    assert d["streams"][1]["rates"]["median_period_s"] == pytest.approx(0.002)


def test_info_table_fits_120_columns_with_millisecond_jitter(tmp_path, monkeypatch):
    # jitter of a few ms printed as us with 3 significant digits was "2.86e+03", cut to "5.78e+…" in its column
    from rich.console import Console

    import trajstore.cli.streams as cli_streams
    from trajstore.spaces import BoxSpace

    rng = np.random.default_rng(0)
    period = 33_333_333 + rng.integers(-3_000_000, 3_000_000, 99)
    t = np.concatenate([[0], np.cumsum(period)])
    with StreamBuffer.create(tmp_path / "sb", streams={"camera.compressed": BoxSpace(-1, 1, (), np.float64),
                                                       "joint_states.effort": BoxSpace(-1, 1, (), np.float64)}) as buf:
        buf.extend("camera.compressed", np.zeros(100), t)
        buf.extend("joint_states.effort", np.zeros(100), np.arange(100) * 10_000_000)
        buf.end_episode()
    console = Console(width=120, record=True, file=open(tmp_path / "out.txt", "w"))
    monkeypatch.setattr(cli_streams, "console", console)
    cli_streams.info(str(tmp_path / "sb"), False)
    text = console.export_text()
    table = text.split("└")[0]
    assert max(len(line) for line in text.splitlines()[1:]) <= 120  # the tables (line 0: the path, unwrapped)
    assert "…" not in table and "e+" not in table
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in table.splitlines() if line.startswith("│")}
    rates = describe_streams(tmp_path / "sb").streams[0].rates
    assert rows["camera.compressed"][4:6] == [f"{rates.jitter_std_s * 1e3:.3f}", f"{rates.jitter_p99_s * 1e3:.3f}"]
    assert 1.0 < rates.jitter_std_s * 1e3 < 3.0 and "joint_states.effort" in rows


def test_episodes_show_each_streams_span(sbuf):
    with StreamBuffer.load_from(sbuf) as buf:
        s = summarize_stream_episodes(buf)
    assert [(r.id, r.task, r.success) for r in s.rows] == [(0, "pick", True), (1, "place", False)]
    assert [r.streams["wrist"].samples for r in s.rows] == [30, 29]
    assert [(r.streams["joints"].start, r.streams["joints"].stop) for r in s.rows] == [(0, 500), (500, 1000)]
    assert s.rows[1].streams["gripper"].first_ns == T1 and s.rows[1].streams["gripper"].last_ns == T1 + 980_000_000
    assert [r.streams["wrist"].gaps for r in s.rows] == [0, 1]
    assert s.rows[0].duration_s == pytest.approx(0.998)
    r = run("episodes", sbuf)
    assert r.exit_code == 0, r.output
    lines = [line for line in r.output.splitlines() if line.startswith("│")]
    assert [c.strip() for c in lines[0].split("│")[1:-1]] == ["0", "pick", "True", "no", "0.998", "30 @ 30",
                                                              "500 @ 500", "50 @ 50"]
    assert [c.strip() for c in lines[1].split("│")[1:-1]] == ["1", "place", "False", "no", "0.998", "29 @ 30 (1)",
                                                              "500 @ 500", "51 @ 50"]
    assert "2 episodes; samples: wrist 59, joints 1000, gripper 101" in r.output
    d = json.loads(run("episodes", sbuf, "--json").output)
    assert d["rows"][1]["streams"]["wrist"] == {"start": 30, "stop": 59, "samples": 29, "first_ns": T1,
                                                "last_ns": T1 + round(29e9 / 30), "rate_hz": pytest.approx(30.0),
                                                "gaps": 1}


def test_a_whole_stream_buffer_verifies(sbuf):
    report = verify_stream_buffer(sbuf)
    assert report.ok, report.problems
    assert report.episodes == 2 and report.samples == 1160
    assert [(s.name, s.samples, s.timestamps_checked) for s in report.streams] == [
        ("wrist", 59, True), ("joints", 1000, True), ("gripper", 101, True)]
    assert report.streams[0].buffer.steps == 59  # the sub-buffer was verified as any buffer folder
    r = run("verify", sbuf, "--no-progress")
    assert r.exit_code == 0, r.output
    assert "ok: 3 streams, 2 episodes, 1,160 samples checked; timestamps ordered" in r.output


def test_timestamps_put_out_of_order_in_the_file_are_found(fresh):
    with h5py.File(timestamp_file(fresh, "joints"), "r+") as f:
        t = f["timestamp"]
        t[507] = t[505]  # episode 1, sample 7: earlier than sample 6
    report = verify_stream_buffer(fresh)
    assert not report.ok
    [p] = report.problems
    assert p.where.endswith("streams/joints")
    assert p.what.startswith("stream 'joints', episode 1: timestamps out of order: sample 7 at "
                             f"{T1 + 10_000_000} ns is before sample 6 at {T1 + 12_000_000} ns")
    assert [s.problems for s in report.streams] == [0, 1, 0]
    r = run("verify", fresh, "--no-progress")
    assert r.exit_code == 1, r.output
    assert "stream 'joints', episode 1: timestamps out of order: sample 7" in r.output
    assert "DAMAGED: 1 problem(s)" in r.output
    d = json.loads(run("verify", fresh, "--json", "--no-progress").output)
    assert d["ok"] is False and d["streams"][1]["problems"] == 1


def test_timestamps_out_of_order_at_the_int64_edge_are_found_where_they_are(fresh):
    # sample 7 set to int64.min: `np.diff` would wrap (a huge positive period) and blame sample 8 instead
    low = np.iinfo(np.int64).min
    with h5py.File(timestamp_file(fresh, "joints"), "r+") as f:
        f["timestamp"][507] = low
    report = verify_stream_buffer(fresh)
    [p] = report.problems
    assert p.what == (f"stream 'joints', episode 1: timestamps out of order: sample 7 at {low} ns is before "
                      f"sample 6 at {T1 + 12_000_000} ns (1 decrease(s) in the episode)")
    r = run("info", fresh)
    assert r.exit_code == 0, r.output
    with StreamBuffer.load_from(fresh) as buf:
        from trajstore.streams.rates import stream_rates

        rates = stream_rates(buf, "joints")
    assert (rates.non_monotonic, rates.first_non_monotonic) == (1, (1, 7))


def test_a_damaged_payload_of_a_stream_is_reported_as_its_sub_buffer_is(fresh):
    chunks = sorted((fresh / "streams" / "wrist" / "storage" / "value" / "chunks").glob("*.bin"))
    chunks[0].write_bytes(chunks[0].read_bytes()[:100])  # truncated: frames past byte 100 are lost
    report = verify_stream_buffer(fresh)
    assert not report.ok
    assert any("streams/wrist/storage/value" in p.where for p in report.problems)
    # the stream buffer itself then refuses to open (its reads of the damaged stream fail); the other
    # streams' timestamps are still checked, from their own sub-buffers
    assert any("does not open as a stream buffer" in p.what for p in report.problems)
    assert [s.timestamps_checked for s in report.streams] == [False, True, True]
    assert [s.samples for s in report.streams] == [0, 1000, 101]
    r = run("verify", fresh, "--no-progress")
    assert r.exit_code == 1 and "DAMAGED" in r.output


def test_disordered_timestamps_are_found_when_another_stream_is_damaged(fresh):
    chunks = sorted((fresh / "streams" / "wrist" / "storage" / "value" / "chunks").glob("*.bin"))
    chunks[0].write_bytes(chunks[0].read_bytes()[:100])
    with h5py.File(timestamp_file(fresh, "gripper"), "r+") as f:
        f["timestamp"][3] = 0  # episode 0, sample 3: before sample 2 (40 ms)
    report = verify_stream_buffer(fresh)
    [order] = [p for p in report.problems if "out of order" in p.what]
    # without the stream buffer's log the episode is named by its position in the sub-buffer
    assert order.what.startswith("stream 'gripper', episode 0 of its sub-buffer: timestamps out of order: "
                                 "sample 3 at 0 ns is before sample 2 at 40000000 ns")


def test_a_log_that_disagrees_with_a_sub_buffer_is_found(fresh):
    log = fresh / "episodes.log"
    text = log.read_bytes()
    # move one camera sample from episode 0 to episode 1 in the log (same length: the log still reads)
    ep1 = b'"joints":500,"gripper":51'
    edited = text.replace(b'"wrist":30,', b'"wrist":29,').replace(b'"wrist":29,' + ep1, b'"wrist":30,' + ep1)
    assert len(edited) == len(text) and edited != text
    log.write_bytes(edited)
    report = verify_stream_buffer(fresh)
    assert [p.what for p in report.problems] == [
        "stream 'wrist': the sub-buffer's episodes have [30, 29] samples, the log's spans with samples [29, 30]"]
    r = run("verify", fresh, "--no-progress")
    assert r.exit_code == 1 and "the log's spans with samples [29, 30]" in r.output


def test_an_open_episode_is_shown_open_and_verifies(fresh):
    with StreamBuffer.load_from(fresh, read_only=False) as buf:
        buf.extend("joints", joint_values(range(3)), [20.0, 20.002, 20.004])
        buf.flush()  # committed, no end_episode: a reader sees it open
        d = describe_streams(fresh)
        assert (d.episodes, d.complete_episodes, d.open_episode) == (3, 2, True)
        r = run("episodes", fresh)
        assert r.exit_code == 0, r.output
        last = [line for line in r.output.splitlines() if line.startswith("│")][-1]
        assert [c.strip() for c in last.split("│")[1:-1]] == ["2", "-", "-", "open", "0.004", "0 @ -", "3 @ 500",
                                                              "0 @ -"]
        report = verify_stream_buffer(fresh)
        assert report.ok, report.problems
        assert report.episodes == 3 and report.samples == 1163


def test_verify_refuses_a_reference_and_a_folder_without_streams_json(fresh, tmp_path):
    r = run("verify", fresh, "--reference", tmp_path / "x.npz")
    assert r.exit_code == 2 and "stream buffer" in r.output
    with pytest.raises(FormatError, match="not a stream buffer folder"):
        verify_stream_buffer(tmp_path)


def test_a_replay_buffer_folder_is_still_described_as_one(tmp_path):
    from tests.cli.buffers import make_buffer

    path = make_buffer(tmp_path / "rb")
    assert not is_stream_folder(path)
    r = run("info", path)
    assert r.exit_code == 0 and "stream buffer" not in r.output and "27 steps" in r.output


def test_stats_of_a_stream_buffer_are_each_streams(sbuf):
    r = run("stats", sbuf)
    assert r.exit_code == 0, r.output
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in r.output.splitlines() if line.startswith("│")]
    gripper = next(row for row in rows if row[0] == "gripper")
    # gripper: value = its time in s from the episode start, 50 + 51 samples (0 .. 0.98 s, 0.48 twice)
    assert gripper[1:4] == ["()", "-", "101"] and gripper[4:6] == ["0", "0.98"]
    assert any(row[0] == "wrist" and row[2] == "channel 0" for row in rows)
    d = json.loads(run("stats", sbuf, "--json").output)
    assert list(d) == ["wrist", "joints", "gripper"]
    with StreamBuffer.load_from(sbuf) as buf:
        want = buf.stats()["gripper"]["gripper"]
    assert d["gripper"]["gripper"]["mean"] == pytest.approx(float(np.asarray(want.mean).reshape(-1)[0]))
    assert np.asarray(d["joints"]["joints"]["count"]).reshape(-1).tolist() == [1000] * 7


def test_preview_of_a_stream_buffer_says_what_to_run(sbuf, tmp_path):
    r = run("preview", sbuf, "--episode", "0", "--out", tmp_path / "p.png")
    assert r.exit_code == 2
    text = " ".join(r.output.split())
    assert text.startswith(f"error: {sbuf} is a stream buffer: `trajstore preview` shows an episode of a replay buffer")
    assert f"`trajstore info {sbuf}`" in text and f"`trajstore export zarr {sbuf} OUT.zarr --anchor" in text
    assert "StreamBuffer.load_from" not in text and not (tmp_path / "p.png").exists()
