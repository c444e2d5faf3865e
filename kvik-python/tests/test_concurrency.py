"""The GIL is released during I/O, futures can be waited on from any thread,
and a long request stops between windows when cancelled or on Ctrl-C.

The long requests read a sparse file (no disk) with 512-byte tasks on one
thread: a 1 GiB request is two million tasks, seconds of work, so a cancel
issued within milliseconds lands long before the end. The buffers are
``numpy.empty``: only the pages a read reaches are ever touched.
"""

import concurrent.futures
import os
import signal
import threading
import time

import numpy as np
import pytest

import kvik

GiB = 1 << 30
SENTINEL = 0xAB


@pytest.fixture
def slow_read(sparse_file):
    """A file and a buffer for a read that takes seconds."""
    kvik.defaults.set({"task_size": 512, "num_threads": 1})
    path = sparse_file(GiB)
    buf = np.empty(GiB, dtype=np.uint8)
    buf[-4096:] = SENTINEL
    return path, buf


def test_cancel_stops_a_request_between_windows(slow_read):
    path, buf = slow_read
    with kvik.CuFile(path) as f:
        fut = f.pread(buf)
        assert fut.cancel() is True
        with pytest.raises(concurrent.futures.CancelledError, match="cancelled after"):
            fut.get()
        assert fut.done()
        assert fut.cancel() is False, "a finished request cannot be cancelled"
        report = fut.report
        assert report["bytes"] < GiB
        # At most the windows in flight when cancel() came ran.
        window = 512 * kvik._kvik.WINDOW_ROUNDS
        assert report["requested_bytes"] <= 2 * window
        assert (buf[-4096:] == SENTINEL).all(), "nothing was read past the cancel"
        # The file and the pool serve the next request.
        assert f.read(buf[:4096]) == 4096


def test_cancel_after_the_end_changes_nothing(data_file):
    path, data = data_file(10_000)
    with kvik.CuFile(path) as f:
        fut = f.pread(bytearray(10_000))
        assert fut.get() == 10_000
        assert fut.cancel() is False
        assert fut.get() == 10_000


def send_sigint_after(seconds):
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_stops_a_blocking_read(slow_read):
    path, buf = slow_read
    with kvik.CuFile(path) as f:
        timer = send_sigint_after(0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                f.read(buf)
        finally:
            timer.cancel()
        assert (buf[-4096:] == SENTINEL).all(), "the read stopped before its end"
        report = f.last_report
        assert 0 < report["bytes"] < GiB
        assert f.read(buf[:4096]) == 4096


def test_ctrl_c_stops_a_wait_on_a_future(slow_read):
    path, buf = slow_read
    with kvik.CuFile(path) as f:
        fut = f.pread(buf)
        timer = send_sigint_after(0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                fut.get()
        finally:
            timer.cancel()
        assert fut.done(), "the waiter returned only once the windows in flight ended"
        with pytest.raises(concurrent.futures.CancelledError):
            fut.get()
        assert (buf[-4096:] == SENTINEL).all()


def test_the_gil_is_released_while_waiting(slow_read):
    """A thread waits on a long request; this thread can still run Python and
    cancel it. If get() held the GIL, cancel() could only run after the
    request had ended on its own."""
    path, buf = slow_read
    with kvik.CuFile(path) as f:
        fut = f.pread(buf)
        waiting = threading.Event()
        outcome = {}

        def wait():
            waiting.set()
            try:
                outcome["bytes"] = fut.get()
            except concurrent.futures.CancelledError as e:
                outcome["cancelled"] = str(e)

        waiter = threading.Thread(target=wait)
        waiter.start()
        waiting.wait()
        time.sleep(0.05)  # the waiter is inside get() now
        assert fut.cancel() is True, "this thread ran while the other waited"
        waiter.join(timeout=60)
        assert not waiter.is_alive()
        assert "cancelled" in outcome, outcome


def test_blocking_reads_release_the_gil(slow_read):
    """A blocking read in one thread; this one runs Python meanwhile."""
    path, buf = slow_read
    kvik.defaults.set("task_size", 4096)
    with kvik.CuFile(path) as f:
        done = threading.Event()
        reader = threading.Thread(target=lambda: (f.read(buf[: 256 << 20]), done.set()))
        reader.start()
        ticks = 0
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)
        reader.join()
        assert ticks > 1


def test_futures_can_be_waited_on_from_any_thread(data_file):
    path, data = data_file(4 << 20)
    with kvik.CuFile(path) as f:
        outs = [np.zeros(1 << 20, np.uint8) for _ in range(4)]
        futs = [f.pread(o, file_offset=i << 20) for i, o in enumerate(outs)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            # Two waiters per future.
            counts = list(pool.map(lambda fu: fu.get(), futs + futs))
    assert counts == [1 << 20] * 8
    assert np.array_equal(np.concatenate(outs), data)


def test_threads_share_a_file(data_file):
    path, data = data_file(8 << 20)
    with kvik.CuFile(path) as f:

        def read(i):
            out = np.zeros(1 << 20, np.uint8)
            assert f.read(out, file_offset=i << 20) == 1 << 20
            return out

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            parts = list(pool.map(read, range(8)))
    assert np.array_equal(np.concatenate(parts), data)
