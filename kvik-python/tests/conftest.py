"""Shared fixtures for kvik's pytest suite.

Tests that need a GPU (CuPy, PyTorch) skip with the reason when there is none;
``KVIK_REQUIRE_GPU=1`` turns those skips into failures. Settings changed by a
test are put back after it.
"""

import os
import pathlib

import numpy as np
import pytest

import kvik

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "cufile-config" / "fixtures"


def skip_without(reason: str) -> None:
    """Skip (saying why), or fail under KVIK_REQUIRE_GPU=1."""
    if os.environ.get("KVIK_REQUIRE_GPU") == "1":
        pytest.fail(f"KVIK_REQUIRE_GPU=1, but {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def restore_settings():
    """Every test starts and ends with the same settings."""
    names = [d["name"] for d in kvik.defaults.describe()]
    before = {name: kvik.defaults.get(name) for name in names}
    yield
    kvik.defaults.set(before)


def random_bytes(n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


@pytest.fixture
def data_file(tmp_path):
    """A function making a file of `n` random bytes; returns (path, bytes)."""

    def make(n: int, name: str = "data.bin", seed: int = 7):
        data = random_bytes(n, seed)
        path = tmp_path / name
        path.write_bytes(data.tobytes())
        return path, data

    return make


@pytest.fixture
def sparse_file(tmp_path):
    """A function making a sparse file of `n` zero bytes (no disk used)."""

    def make(n: int, name: str = "sparse.bin"):
        path = tmp_path / name
        with open(path, "wb") as f:
            f.truncate(n)
        return path

    return make


@pytest.fixture(scope="session")
def cupy():
    try:
        import cupy
    except ImportError as e:
        skip_without(f"CuPy is not installed ({e})")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError without a driver
        skip_without(f"CuPy finds no CUDA GPU ({e})")
    if count == 0:
        skip_without("CuPy finds no CUDA GPU")
    return cupy


@pytest.fixture(scope="session")
def torch():
    try:
        import torch
    except ImportError as e:
        skip_without(f"PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        skip_without("PyTorch finds no CUDA GPU")
    return torch
