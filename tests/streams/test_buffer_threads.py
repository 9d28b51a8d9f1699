"""StreamBuffer reads from one thread while another records: every read sees a consistent state and
never breaks the recording thread."""

import threading

import numpy as np

from trajstore.spaces import BoxSpace
from trajstore.streams import StreamBuffer

SAMPLES = 1500


def record(buf, errors):
    """Stream 'b' holds value k at k * 1000 ns, 'a' holds (k, -k); appends, extends, flushes, episodes."""
    try:
        k = 1
        while k < SAMPLES:
            if k % 7 == 3:
                ks = np.arange(k, k + 5)
                buf.extend("b", ks.astype(np.float64), ks * 1000)
                buf.extend("a", np.stack([ks, -ks], axis=1).astype(np.float32), ks * 1000)
                k += 5
                continue
            buf.append("b", float(k), k * 1000)
            buf.append("a", np.array([k, -k], np.float32), k * 1000)
            if k % 97 == 0:
                buf.flush()
            if k % 211 == 0:
                buf.end_episode(k=k)
            k += 1
    except BaseException as exc:  # noqa: BLE001 - the test reports it
        errors.append(exc)


def check_reads(buf):
    n = buf.stream_length("b")
    t = buf.timestamps("b")
    assert len(t) >= n and np.all(t[1:] > t[:-1])
    eps = buf.episodes
    k = len(eps) - 1
    tb, vb = buf.read("b", k)
    np.testing.assert_array_equal(vb * 1000, tb)
    if eps[k].done:
        assert len(tb) == eps[k].streams["b"].count
    ta, va = buf.read("a", k)
    np.testing.assert_array_equal(va[:, 0] * 1000, ta)
    np.testing.assert_array_equal(buf.timestamps("a", k)[:len(ta)], ta)  # the open episode may have grown
    if n:
        vals = buf.read_samples("b", np.array([0, n - 1, n // 2]))
        np.testing.assert_array_equal(vals, [0.0, float(t[n - 1] // 1000), float(t[n // 2] // 1000)])
    view = buf.aligned(anchor="a")
    last = view[len(view) - 1]
    assert float(last["b"]) * 1000 == int(last["timestamp"])


def test_reads_while_another_thread_records(tmp_path):
    space = {"a": BoxSpace(-1e9, 1e9, (2,), np.float32), "b": BoxSpace(-1e9, 1e9, (), np.float64)}
    buf = StreamBuffer.create(tmp_path / "b", space)
    buf.append("a", np.zeros(2, np.float32), 0)  # so that a first view has a step
    buf.append("b", 0.0, 0)
    writer_errors: list[BaseException] = []
    thread = threading.Thread(target=record, args=(buf, writer_errors))
    reader_errors = []
    thread.start()
    try:
        reads = 0
        while thread.is_alive() or reads < 3:
            try:
                check_reads(buf)
            except BaseException as exc:  # noqa: BLE001
                reader_errors.append(exc)
                break
            reads += 1
    finally:
        thread.join()
    assert not writer_errors, repr(writer_errors[0])
    assert not reader_errors, repr(reader_errors[0])
    buf.end_episode()
    total = buf.stream_length("b")
    assert total >= SAMPLES
    np.testing.assert_array_equal(buf.read_samples("b", np.arange(total)) * 1000, buf.timestamps("b"))
    buf.close()
    again = StreamBuffer.load_from(tmp_path / "b")
    assert again.stream_length("a") == total
    np.testing.assert_array_equal(again.timestamps("a"), buf_times := again.timestamps("b"))
    assert buf_times[0] == 0 and np.all(np.diff(buf_times) == 1000)
    again.close()


def test_reader_refresh_while_another_thread_reads(tmp_path):
    space = {"b": BoxSpace(-1e9, 1e9, (), np.float64)}
    writer = StreamBuffer.create(tmp_path / "b", space)
    reader = StreamBuffer.load_from(tmp_path / "b")
    errors = []

    def reads():
        try:
            for _ in range(300):
                n = reader.stream_length("b")
                t = reader.timestamps("b")
                assert len(t) >= n
                if n:
                    np.testing.assert_array_equal(reader.read_samples("b", np.arange(n)) * 1000, t[:n])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=reads)
    thread.start()
    for k in range(300):
        writer.append("b", float(k), k * 1000)
        if k % 10 == 9:
            writer.flush()
            reader.refresh()
    thread.join()
    writer.close()
    reader.close()
    assert not errors, repr(errors[0])
