"""StreamBuffer refuses bad input before anything is written, naming the stream (and the first bad index)."""

import warnings

import numpy as np
import pytest

from tests.streams.helpers import batch, frame, ft, joints, spaces
from trajstore.errors import InvalidValueError, StorageExistsError, UnknownLeafError
from trajstore.spaces import BoxSpace
from trajstore.streams import StreamBuffer


@pytest.fixture
def buf(tmp_path):
    with StreamBuffer.create(tmp_path / "b", streams=spaces()) as b:
        b.extend("joints", batch("joints", range(3)), [1.0, 1.1, 1.2])
        b.append("ft", ft(0), 1.0)
        yield b


def unchanged(buf, tmp_path):
    """Nothing of a refused call was written: the buffer and a reopen after flush hold the first samples."""
    assert buf.stream_length("joints") == 3 and buf.stream_length("ft") == 1 and buf.stream_length("wrist") == 0
    buf.flush()
    with StreamBuffer.load_from(tmp_path / "b") as reader:
        assert reader.timestamps("joints").tolist() == [1_000_000_000, 1_100_000_000, 1_200_000_000]
        np.testing.assert_array_equal(reader.read("joints", 0)[1], batch("joints", range(3)))
        assert reader.stream_length("ft") == 1 and reader.stream_length("wrist") == 0


@pytest.mark.parametrize("t,match", [
    (1.1, r"stream 'joints': timestamp 1100000000 ns is before the stream's last"),
    (float("nan"), "stream 'joints'.*finite"),
    (float("inf"), "stream 'joints'.*finite"),
    (np.float32("nan"), "stream 'joints'.*finite"),
    (True, "stream 'joints'.*float seconds or int nanoseconds"),
    ("1.5", "stream 'joints'.*float seconds or int nanoseconds"),
    (2 ** 63, "stream 'joints'.*int64"),
])
def test_append_bad_time(buf, tmp_path, t, match):
    with pytest.raises(InvalidValueError, match=match):
        buf.append("joints", joints(9), t)
    unchanged(buf, tmp_path)


@pytest.mark.parametrize("t,match", [
    ([1.3, 1.25, 1.4], r"stream 'joints': timestamp at index 1 \(1250000000 ns\) is before the one at index 0"),
    ([1.19, 1.3, 1.4], r"stream 'joints': timestamp at index 0 .* before the stream's last"),
    ([1.3, float("nan"), 1.4], "stream 'joints': timestamp at index 1 is nan"),
    ([1.3, 1.4], r"stream 'joints': timestamps must have shape \(3,\)"),
    (np.array([1, 2, 3], bool), "stream 'joints'.*dtype bool"),
])
def test_extend_bad_times(buf, tmp_path, t, match):
    with pytest.raises(InvalidValueError, match=match):
        buf.extend("joints", batch("joints", range(10, 13)), t)
    unchanged(buf, tmp_path)


def test_extend_int_ns_after_seconds(buf):
    buf.extend("joints", batch("joints", range(2)), np.array([1_200_000_000, 1_300_000_000], np.int64))
    assert buf.timestamps("joints")[-2:].tolist() == [1_200_000_000, 1_300_000_000]


@pytest.mark.parametrize("name,value,match", [
    ("joints", np.zeros(6, np.float32), r"^stream 'joints': expected shape \(7,\), got \(6,\)$"),
    ("wrist", np.zeros((24, 32), np.uint8), r"^stream 'wrist': expected shape \(24, 32, 3\), got \(24, 32\)$"),
    ("ft", {"force": np.zeros(3, np.float32)}, r"^stream 'ft': keys do not match the space: missing \['torque'\]"),
    ("ft", {"force": np.zeros(2, np.float32), "torque": np.zeros(3)},
     r"^stream 'ft': leaf 'force': expected shape \(3,\), got \(2,\)$"),
    ("joints", np.full(7, 5000, np.float32), r"^stream 'joints': value 5000.0 at index \(0,\) is outside"),
])
def test_wrong_values(buf, tmp_path, name, value, match):
    with pytest.raises(InvalidValueError, match=match) as caught:
        buf.append(name, value, 2.0)
    assert "'value" not in str(caught.value)  # the sub-buffer's leaf names stay inside
    unchanged(buf, tmp_path)


def test_wrong_batch(buf, tmp_path):
    with pytest.raises(InvalidValueError, match="stream 'joints'"):
        buf.extend("joints", np.zeros((2, 6), np.float32), [2.0, 2.1])
    with pytest.raises(InvalidValueError, match=r"^stream 'ft': leaf 'force': expected shape \(N, 3\), got \(2, 2\)"):
        buf.extend("ft", {"force": np.zeros((2, 2), np.float32), "torque": np.zeros((2, 3))}, [2.0, 2.1])
    with pytest.raises(InvalidValueError, match="stream 'ft'"):
        buf.extend("ft", {"force": np.zeros((2, 3), np.float32), "torque": np.zeros((3, 3))}, [2.0, 2.1])
    with pytest.raises(InvalidValueError, match="stream 'wrist'"):
        buf.extend("wrist", np.stack([frame(0)] * 2), [2.0, 2.1, 2.2])
    unchanged(buf, tmp_path)


def test_unknown_stream(buf, tmp_path):
    with pytest.raises(UnknownLeafError, match="no stream named 'camera'.*'wrist', 'joints', 'ft'"):
        buf.append("camera", frame(0), 1.0)
    with pytest.raises(UnknownLeafError):
        buf.timestamps("camera")
    unchanged(buf, tmp_path)


def test_end_episode_refusals(buf, tmp_path):
    with pytest.raises(InvalidValueError, match="'seed'"):
        buf.end_episode(seed=np.zeros(2))
    with pytest.raises(InvalidValueError, match="interrupted"):
        buf.end_episode(interrupted="no")
    assert buf.num_episodes == 1 and not buf.episode(0).done
    unchanged(buf, tmp_path)
    buf.end_episode(task="t")
    with pytest.raises(ValueError, match="no sample"):
        buf.end_episode(task="again")
    buf.end_episode()  # nothing to end: nothing happens
    assert buf.num_episodes == 1 and buf.episode(0).data == {"task": "t"}


@pytest.mark.parametrize("name", ["", "a/b", "..", "timestamp", "is_pad", "cam era", 3])
def test_bad_stream_names(tmp_path, name):
    with pytest.raises(InvalidValueError, match="stream name"):
        StreamBuffer.create(tmp_path / "b", streams={name: BoxSpace(0, 1, (2,))})
    assert not (tmp_path / "b").exists()


def test_create_refusals(tmp_path):
    with pytest.raises(TypeError, match="non-empty mapping"):
        StreamBuffer.create(tmp_path / "b", streams={})
    with pytest.raises(TypeError, match="stream 'x'.*Space"):
        StreamBuffer.create(tmp_path / "b", streams={"x": np.zeros(2)})
    with pytest.raises(TypeError):
        StreamBuffer.create(tmp_path / "b", streams={"x": BoxSpace(0, 1, (2,))}, no_such_option=1)
    assert not (tmp_path / "b").exists()
    StreamBuffer.create(tmp_path / "b", streams={"x": BoxSpace(0, 1, (2,))}).close()
    with pytest.raises(StorageExistsError):
        StreamBuffer.create(tmp_path / "b", streams={"x": BoxSpace(0, 1, (2,))})


def test_constructor_on_instance(buf, tmp_path):
    with pytest.raises(TypeError, match="constructor"):
        buf.load_from(tmp_path / "b")


I64 = np.iinfo(np.int64)


@pytest.mark.parametrize("t,match", [
    (np.array([1, I64.min]), r"stream 'b': timestamp at index 1 \(-9223372036854775808 ns\) is before the one at"),
    (np.array([I64.max, I64.min]), r"stream 'b': timestamp at index 1 .* is before the one at index 0"),
    ([-1, 2 ** 63], r"stream 'b': timestamp at index 1 \(9223372036854775808 ns\) does not fit int64"),
    ([-2 ** 63 - 1, 0], r"stream 'b': timestamp at index 0 .* does not fit int64"),
])
def test_extend_refuses_at_the_int64_edges(tmp_path, t, match):
    with StreamBuffer.create(tmp_path / "b", {"b": BoxSpace(-10, 10, (), np.float64)}) as b:
        with pytest.raises(InvalidValueError, match=match):
            b.extend("b", np.array([1.0, 2.0]), t)
        assert b.stream_length("b") == 0


def test_extend_at_the_int64_edges_and_float16_seconds(tmp_path):
    with StreamBuffer.create(tmp_path / "b", {"b": BoxSpace(-10, 10, (), np.float64)}) as b:
        b.extend("b", np.array([1.0, 2.0, 3.0]), np.array([I64.min, 0, I64.max]))
        b.end_episode()
        b.extend("b", np.array([1.0, 2.0]), [I64.min, I64.max])  # a list of ints is nanoseconds
        b.end_episode()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow warning from float16
            b.extend("b", np.array([1.0, 2.0]), np.array([1.5, 2.0], np.float16))
            with pytest.raises(InvalidValueError, match="stream 'b': timestamp at index 1 is inf"):
                b.extend("b", np.array([1.0, 2.0]), np.array([3.0, np.inf], np.float16))
        assert b.timestamps("b").tolist() == [I64.min, 0, I64.max, I64.min, I64.max, 1_500_000_000, 2_000_000_000]


def test_long_stream_names(tmp_path):
    with pytest.raises(InvalidValueError, match="stream name 'xxxxxxxxxxxxxxxxxxxx'... is 300 characters long"):
        StreamBuffer.create(tmp_path / "b", streams={"ok": BoxSpace(0, 1, ()), "x" * 300: BoxSpace(0, 1, ())})
    assert not (tmp_path / "b").exists()
    with StreamBuffer.create(tmp_path / "b", streams={"y" * 100: BoxSpace(0, 1, ())}) as buf:
        buf.append("y" * 100, 0.5, 0)
        buf.end_episode()
    with StreamBuffer.load_from(tmp_path / "b") as buf:
        assert buf.read("y" * 100, 0)[1].tolist() == [0.5]
