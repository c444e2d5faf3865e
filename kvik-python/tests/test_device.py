"""Device memory: CuPy arrays and PyTorch CUDA tensors (skipped, saying so,
without a GPU), and the parts of the device-memory protocols that need no GPU:
__cuda_array_interface__ checks and DLPack."""

import numpy as np
import pytest

import kvik
from conftest import random_bytes

MiB = 1 << 20
SIZES = [1, 4095, 4096, 1_000_003, 16 * MiB + 12_345]


class FakeCudaArray:
    """An object that claims device memory (pointing at host memory)."""

    def __init__(self, host, shape=None, strides=None, readonly=False, typestr="|u1"):
        self.host = host
        self.__cuda_array_interface__ = {
            "data": (host.ctypes.data, readonly),
            "shape": shape or host.shape,
            "strides": strides,
            "typestr": typestr,
            "version": 3,
        }


def test_cuda_array_interface_is_checked_before_the_gpu(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100)
    host = np.zeros(100, np.uint8)
    with kvik.CuFile(path) as f:
        with pytest.raises(ValueError, match="not contiguous"):
            f.read(FakeCudaArray(host, shape=(50,), strides=(2,)))
        with pytest.raises(TypeError, match="read-only"):
            f.read(FakeCudaArray(host, readonly=True))
        with pytest.raises(ValueError, match="item size"):
            f.read(FakeCudaArray(host, typestr="<x"))
        # Host memory dressed as device memory is refused, with or without CUDA.
        with pytest.raises((RuntimeError, ValueError), match="CUDA|device memory"):
            f.read(FakeCudaArray(host))


class DLPackOnly:
    """Host memory that speaks DLPack and not the buffer protocol (as a PyTorch
    CPU tensor)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_host_memory(data_file):
    path, data = data_file(10_000)
    out = np.zeros(2_500, np.float32)
    with kvik.CuFile(path) as f:
        assert f.read(DLPackOnly(out)) == 10_000
        assert f.pread(DLPackOnly(out[:100]), file_offset=400).get() == 400
    assert np.array_equal(out[100:].view(np.uint8), data[400:])
    assert np.array_equal(out[:100].view(np.uint8), data[400:800])
    with kvik.CuFile(path) as f:
        with pytest.raises(ValueError, match="not contiguous"):
            f.read(DLPackOnly(np.zeros(100, np.float32)[::2]))


# ---- CuPy ---------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_cupy_whole_array(cupy, data_file, n):
    path, data = data_file(n)
    buf = cupy.empty(n, dtype=cupy.uint8)
    with kvik.CuFile(path) as f:
        assert f.read(buf) == n
        report = f.last_report
    assert cupy.asnumpy(buf).tobytes() == data.tobytes()
    assert report["memory"]["kind"] == "device"


def test_cupy_slices_keep_the_rest(cupy, data_file):
    n = 3 * MiB + 7
    path, data = data_file(n)
    big = cupy.full(n + 10_000, 0xAB, dtype=cupy.uint8)
    with kvik.CuFile(path) as f:
        assert f.pread(big[4_093 : 4_093 + n]).get() == n
    host = cupy.asnumpy(big)
    assert host[4_093 : 4_093 + n].tobytes() == data.tobytes()
    assert (host[:4_093] == 0xAB).all() and (host[4_093 + n :] == 0xAB).all()


def test_cupy_float32_and_2d(cupy, data_file):
    path, data = data_file(4 * MiB)
    a = cupy.empty(MiB, dtype=cupy.float32)
    b = cupy.empty((512, 512), dtype=cupy.float64, order="F")
    with kvik.CuFile(path) as f:
        assert f.read(a) == 4 * MiB
        assert f.read(b, size=2 * MiB, file_offset=123) == 2 * MiB
    assert cupy.asnumpy(a).view(np.uint8).tobytes() == data.tobytes()
    assert cupy.asnumpy(b).tobytes(order="F") == data[123 : 123 + 2 * MiB].tobytes()
    with kvik.CuFile(path) as f:
        with pytest.raises(ValueError, match="not contiguous"):
            f.read(cupy.empty((64, 64), cupy.float32)[:, ::2])


def test_cupy_write_then_read_back(cupy, tmp_path):
    data = random_bytes(5 * MiB + 1, seed=11)
    dev = cupy.asarray(data)
    path = tmp_path / "from_gpu.bin"
    with kvik.CuFile(path, "w") as f:
        assert f.write(dev[1:]) == 5 * MiB
    assert path.read_bytes() == data[1:].tobytes()


def test_cupy_through_dlpack(cupy, data_file):
    path, data = data_file(MiB)
    buf = cupy.zeros(MiB, cupy.uint8)
    with kvik.CuFile(path) as f:
        assert f.read(DLPackOnly(buf)) == MiB
    assert cupy.asnumpy(buf).tobytes() == data.tobytes()


def test_cupy_large_reads_in_windows(cupy, data_file):
    path, data = data_file(8 * MiB)
    kvik.defaults.set({"task_size": 64 * 1024, "num_threads": 2})
    buf = cupy.empty(8 * MiB, cupy.uint8)
    with kvik.CuFile(path) as f:
        fut = f.pread(buf)
        assert fut.get() == 8 * MiB
        assert fut.report["windows"] > 1
    assert cupy.asnumpy(buf).tobytes() == data.tobytes()


# ---- PyTorch ------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_torch_whole_tensor(torch, data_file, n):
    path, data = data_file(n)
    t = torch.empty(n, dtype=torch.uint8, device="cuda")
    with kvik.CuFile(path) as f:
        assert f.read(t) == n
    assert t.cpu().numpy().tobytes() == data.tobytes()


def test_torch_slices_and_float32(torch, data_file):
    n = 2 * MiB
    path, data = data_file(n + 4096)
    big = torch.full((n // 4 + 2048,), -1.0, dtype=torch.float32, device="cuda")
    view = big[1024 : 1024 + n // 4]
    with kvik.CuFile(path) as f:
        assert f.read(view, file_offset=4096) == n
    assert view.cpu().numpy().view(np.uint8).tobytes() == data[4096:].tobytes()
    assert (big[:1024] == -1).all().item() and (big[1024 + n // 4 :] == -1).all().item()
    with kvik.CuFile(path) as f:
        with pytest.raises(ValueError, match="not contiguous"):
            # (A transpose is dense, column-major, and accepted like a
            # Fortran-ordered CuPy array; every other column is not.)
            f.read(torch.empty((64, 64), device="cuda")[:, ::2])


def test_torch_write(torch, tmp_path):
    data = random_bytes(MiB + 3, seed=5)
    t = torch.from_numpy(data).cuda()
    path = tmp_path / "torch.bin"
    with kvik.CuFile(path, "w") as f:
        assert f.pwrite(t).get() == data.nbytes
    assert path.read_bytes() == data.tobytes()


def test_torch_cpu_tensors_through_dlpack(data_file):
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed")
    path, data = data_file(4096)
    t = torch.zeros(1024, dtype=torch.float32)
    with kvik.CuFile(path) as f:
        assert f.read(t) == 4096
    assert t.numpy().view(np.uint8).tobytes() == data.tobytes()
