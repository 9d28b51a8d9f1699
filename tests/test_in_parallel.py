"""``trajstore._fs.in_parallel``: the commit's independent fsynced writes run at the same time."""

import threading

import pytest

from trajstore._fs import in_parallel


def test_results_in_order_and_calls_really_overlap():
    barrier = threading.Barrier(3, timeout=10)  # passes only if all three calls run at once

    def call(k):
        return lambda: (barrier.wait(), k * 10)[1]

    assert in_parallel(call(1), call(2), call(3)) == [10, 20, 30]
    assert in_parallel() == [] and in_parallel(lambda: 7) == [7]


def test_every_call_finishes_before_the_first_error_is_raised():
    done = []
    release = threading.Event()

    def slow():
        release.wait(10)
        done.append("slow")

    def fail(msg):
        def f():
            release.set()
            raise OSError(msg)
        return f

    with pytest.raises(OSError, match="first"):
        in_parallel(fail("first"), slow, fail("second"))
    assert done == ["slow"]


def test_nested_calls_on_a_pool_thread_run_inline():
    threads = []

    def inner():
        threads.append(threading.current_thread().name)

    def outer():  # on a pool thread: its own in_parallel must not wait on the pool
        in_parallel(inner, inner, inner)
        return threading.current_thread().name

    name = in_parallel(lambda: None, outer)[1]
    assert name.startswith("trajstore-sync") and threads == [name] * 3
