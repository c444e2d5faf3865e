"""Reads and writes into host memory: every buffer-protocol object, every
argument of KvikIO's API, the path report, and requests larger than a window."""

import array
import mmap
import time

import numpy as np
import pytest

import kvik

MiB = 1 << 20


def test_read_write_round_trip_numpy(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, 3 * MiB + 123, dtype=np.uint8)
    path = tmp_path / "f.bin"
    with kvik.CuFile(path, "w") as f:
        assert f.write(data) == data.nbytes
    assert path.read_bytes() == data.tobytes()
    out = np.zeros_like(data)
    with kvik.CuFile(str(path)) as f:
        assert f.nbytes() == data.nbytes
        assert f.read(out) == data.nbytes
    assert np.array_equal(out, data)


@pytest.mark.parametrize(
    "make",
    [
        lambda n: bytearray(n),
        lambda n: memoryview(bytearray(n)),
        lambda n: np.zeros(n // 4, dtype=np.float32),
        lambda n: np.zeros((n // 8, 2), dtype=np.int32, order="F"),
        lambda n: array.array("b", bytes(n)),
        lambda n: mmap.mmap(-1, n),
    ],
    ids=["bytearray", "memoryview", "float32", "fortran-2d", "array", "mmap"],
)
def test_any_writable_contiguous_buffer(data_file, make):
    path, data = data_file(8192)
    buf = make(8192)
    with kvik.CuFile(path) as f:
        assert f.read(buf) == 8192
    # The bytes in memory order (Fortran order for the Fortran array).
    assert np.asarray(memoryview(buf)).tobytes(order="A") == data.tobytes()


def test_sliced_buffers_read_into_the_slice_only(data_file):
    path, data = data_file(10_000)
    big = np.full(20_000, 0xAB, dtype=np.uint8)
    with kvik.CuFile(path) as f:
        assert f.read(big[3_000:13_000]) == 10_000
    assert np.array_equal(big[3_000:13_000], data)
    assert (big[:3_000] == 0xAB).all() and (big[13_000:] == 0xAB).all()
    view = memoryview(bytearray(12_000))[1_000:11_000]
    with kvik.CuFile(path) as f:
        assert f.read(view) == 10_000
    assert view.tobytes() == data.tobytes()


def test_size_and_file_offset(data_file):
    path, data = data_file(100_000)
    out = np.zeros(50_000, dtype=np.uint8)
    with kvik.CuFile(path) as f:
        assert f.read(out, size=1_000, file_offset=12_345) == 1_000
        assert f.pread(out, 777, 4_097).get() == 777
    assert np.array_equal(out[:777], data[4_097:4_874])
    assert np.array_equal(out[777:1_000], data[12_345 + 777 : 13_345])
    assert (out[1_000:] == 0).all()


def test_write_at_offset_and_pwrite(tmp_path):
    path = tmp_path / "f.bin"
    a = np.arange(1000, dtype=np.uint16)
    with kvik.CuFile(path, "w+") as f:
        assert f.pwrite(a, file_offset=10).get() == 2000
        assert f.write(b"xyz", file_offset=0) == 3
        assert f.write(bytearray(b"0123456789"), size=4, file_offset=2010) == 4
        back = np.zeros(1000, dtype=np.uint16)
        assert f.read(back, file_offset=10) == 2000
    assert np.array_equal(back, a)
    raw = path.read_bytes()
    assert raw[:3] == b"xyz" and raw[3:10] == b"\0" * 7 and raw[2010:] == b"0123"


def test_reads_stop_at_the_end_of_the_file(data_file):
    path, data = data_file(5_000)
    out = np.full(8_192, 7, dtype=np.uint8)
    with kvik.CuFile(path) as f:
        assert f.read(out) == 5_000
        assert f.pread(out, file_offset=4_000).get() == 1_000
        assert f.read(out, file_offset=9_999) == 0
    assert np.array_equal(out[:1_000], data[4_000:])


def test_empty_requests(data_file):
    path, _ = data_file(100)
    with kvik.CuFile(path) as f:
        assert f.read(bytearray()) == 0
        fut = f.pread(np.zeros(0, np.uint8))
        assert fut.get() == 0
        assert fut.report["requested_bytes"] == 0


def test_report_says_which_path_and_why(data_file):
    path, data = data_file(10 * MiB)
    kvik.defaults.set({"task_size": 4 * MiB, "num_threads": 2})
    with kvik.CuFile(path) as f:
        fut = f.pread(np.empty(10 * MiB, np.uint8))
        assert fut.get() == 10 * MiB
        report = fut.report
        assert f.last_report == report
    assert report["operation"] == "read"
    assert report["path"] == str(path)
    assert report["bytes"] == report["requested_bytes"] == 10 * MiB
    assert report["memory"] == {"kind": "host"}
    assert report["kvik"]["route"]["backend"] == "posix"
    assert report["kvik"]["route"]["reason"]["kind"] == "host_memory"
    assert report["kvik"]["execution"] == {"kind": "pool", "threads": 2}
    assert [(t["count"], t["size"]) for t in report["kvik"]["tasks"]] == [
        (2, 4 * MiB),
        (1, 2 * MiB),
    ]
    assert report["cufile"]["status"] == "not_called"
    assert report["windows"] == 1
    assert report["kvik"]["file"]["requested"] == kvik.defaults.get("compat_mode").name


def test_get_is_still_a_byte_count_and_report_waits_for_the_end(data_file):
    path, _ = data_file(MiB)
    with kvik.CuFile(path) as f:
        fut = f.pread(bytearray(MiB))
        n = fut.get()
        assert isinstance(n, int) and n == MiB
        assert fut.done()
        assert fut.get() == MiB, "get() can be called again"
        assert "kvik.IOFuture" in repr(fut)


def test_task_size_per_request(data_file):
    path, data = data_file(MiB)
    before = kvik.defaults.task_size()
    out = np.zeros(MiB, np.uint8)
    with kvik.CuFile(path) as f:
        fut = f.pread(out, task_size=64 * 1024)
        assert fut.get() == MiB
        assert fut.report["kvik"]["task_size"] == 64 * 1024
        assert task_count(fut.report) == 16
        assert f.read(out, task_size=256 * 1024) == MiB
        assert task_count(f.last_report) == 4
        f.read(out)
        assert f.last_report["kvik"]["task_size"] == before
    assert np.array_equal(out, data)
    assert kvik.defaults.task_size() == before


def test_task_size_per_request_does_not_truncate_a_file_opened_with_w(tmp_path):
    path = tmp_path / "w.bin"
    data = np.arange(4096, dtype=np.uint8)
    with kvik.CuFile(path, "w") as f:
        f.write(data)
        assert f.write(data, file_offset=4096, task_size=1024) == 4096
    assert path.read_bytes() == data.tobytes() * 2


def test_requests_larger_than_a_window(data_file):
    """4 KiB tasks on 1 thread: windows of 16 tasks; a 1 MiB read is 16 windows."""
    path, data = data_file(MiB + 100)
    kvik.defaults.set({"task_size": 4096, "num_threads": 1})
    window = 4096 * kvik._kvik.WINDOW_ROUNDS
    out = np.zeros(MiB, np.uint8)
    with kvik.CuFile(path) as f:
        fut = f.pread(out, file_offset=100)
        assert fut.get() == MiB
        report = fut.report
        assert report["windows"] == MiB // window
        assert report["requested_bytes"] == report["bytes"] == MiB
        assert task_count(report) == MiB // 4096
        assert report["kvik"]["tasks"][0]["first_file_offset"] == 100
        assert np.array_equal(out, data[100:])
        # Blocking reads and writes take the same path.
        out[:] = 0
        assert f.read(out, file_offset=100) == MiB
        assert f.last_report["windows"] == MiB // window
        assert np.array_equal(out, data[100:])


def test_windows_stop_at_the_end_of_the_file(data_file):
    path, data = data_file(300_000)
    kvik.defaults.set({"task_size": 4096, "num_threads": 1})
    out = np.zeros(MiB, np.uint8)
    with kvik.CuFile(path) as f:
        fut = f.pread(out)
        assert fut.get() == 300_000
        assert fut.report["bytes"] == 300_000
        # Windows after the one that met the end of the file are not issued,
        # except the one already in flight.
        assert fut.report["requested_bytes"] < MiB
    assert np.array_equal(out[:300_000], data)


def test_large_writes_in_windows(tmp_path):
    kvik.defaults.set({"task_size": 4096, "num_threads": 2})
    data = np.random.default_rng(3).integers(0, 256, MiB + 5, dtype=np.uint8)
    path = tmp_path / "big.bin"
    with kvik.CuFile(path, "w") as f:
        fut = f.pwrite(data)
        assert fut.get() == data.nbytes
        assert fut.report["windows"] > 1
    assert path.read_bytes() == data.tobytes()


def test_many_requests_in_flight(data_file):
    path, data = data_file(4 * MiB)
    outs = [np.zeros(64 * 1024, np.uint8) for _ in range(64)]
    with kvik.CuFile(path) as f:
        futs = [f.pread(o, file_offset=i * 64 * 1024) for i, o in enumerate(outs)]
        assert [fu.get() for fu in futs] == [64 * 1024] * 64
    assert np.array_equal(np.concatenate(outs), data)


def test_the_buffer_outlives_a_dropped_future(data_file):
    """A future dropped before its request finishes keeps the buffer alive."""
    import gc
    import weakref

    path, data = data_file(4 * MiB)
    kvik.defaults.set({"task_size": 4096, "num_threads": 1})
    out = np.zeros(4 * MiB, np.uint8)
    ref = weakref.ref(out)
    with kvik.CuFile(path) as f:
        f.pread(out)  # dropped at once
        del out
        gc.collect()
        # The read goes on into memory that is still there; a later request
        # on the same file finishes after it (one thread).
        f.read(np.zeros(1, np.uint8))
    # Nothing crashed; once the request ends the array can be freed.
    for _ in range(1000):
        gc.collect()
        if ref() is None:
            break
        kvik.defaults.get("task_size")  # lets pyo3 release queued references
        time.sleep(0.01)
    assert ref() is None


def test_closed_files(data_file):
    path, _ = data_file(10)
    f = kvik.CuFile(path)
    assert not f.closed
    fd = f.fileno()
    assert fd > 2
    f.close()
    assert f.closed
    f.close()  # twice is fine
    for call in (f.fileno, f.nbytes, lambda: f.read(bytearray(1)), lambda: f.pread(bytearray(1))):
        with pytest.raises(ValueError, match="closed file"):
            call()
    assert "closed" in repr(f)


def test_routing_is_reported_at_open(data_file):
    path, _ = data_file(10)
    with kvik.defaults.set("compat_mode", kvik.CompatMode.ON):
        with kvik.CuFile(path) as f:
            routing = f.routing
    assert routing["requested"] == "ON" and routing["effective"] == "ON"
    assert routing["device_backend"] == "posix"
    assert routing["decision"] == {"kind": "compat_on"}


def task_count(report):
    """The tasks of a path report (its runs of equal tasks, summed)."""
    return sum(run["count"] for run in report["kvik"]["tasks"])
