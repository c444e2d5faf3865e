"""Errors reach Python as the exceptions users expect, with the Rust context
(operation, path, errno) in the message."""

import errno
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import kvik


def test_missing_file_is_file_not_found(tmp_path):
    path = tmp_path / "nope.bin"
    with pytest.raises(FileNotFoundError) as e:
        kvik.CuFile(path)
    assert e.value.errno == errno.ENOENT
    assert e.value.filename == str(path)
    assert str(path) in str(e.value) and "mode r" in str(e.value)


def test_directory_is_is_a_directory_error(tmp_path):
    with pytest.raises(IsADirectoryError) as e:
        kvik.CuFile(tmp_path)
    assert e.value.errno == errno.EISDIR


def test_permission_denied_is_permission_error(tmp_path):
    if os.geteuid() == 0:
        # root may open any file for writing; sysfs still refuses a 0444 attribute.
        path = "/sys/kernel/uevent_seqnum"
        if not os.path.exists(path):
            pytest.skip(f"running as root, and {path} is missing to provoke EACCES")
    else:
        path = tmp_path / "locked.bin"
        path.write_bytes(b"x")
        path.chmod(0)
    with pytest.raises(PermissionError) as e:
        kvik.CuFile(path, "r+")
    assert e.value.errno in (errno.EACCES, errno.EPERM)
    assert str(path) in str(e.value)


def test_other_os_errors_keep_their_errno(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError) as e:
        kvik.CuFile(tmp_path / "file" / "below")
    assert e.value.errno == errno.ENOTDIR
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    with pytest.raises(OSError) as e:
        kvik.CuFile(loop)
    assert e.value.errno == errno.ELOOP


@pytest.mark.parametrize("mode", ["a", "rb", "x", ""])
def test_bad_modes_are_value_errors(tmp_path, mode):
    with pytest.raises(ValueError, match="open mode"):
        kvik.CuFile(tmp_path / "f", mode)


def test_wrong_direction_is_unsupported_operation(tmp_path):
    path = tmp_path / "f.bin"
    with kvik.CuFile(path, "w") as f:
        with pytest.raises(io.UnsupportedOperation, match="opened with mode w"):
            f.read(bytearray(10))
    with kvik.CuFile(path, "r") as f:
        with pytest.raises(io.UnsupportedOperation, match="opened with mode r"):
            f.pwrite(b"abc").get()


def test_requests_past_the_largest_offset_are_value_errors(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x")
    with kvik.CuFile(path) as f:
        with pytest.raises(ValueError, match="largest file offset"):
            f.read(bytearray(10), file_offset=2**63 - 5)


def test_memory_problems(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100)
    with kvik.CuFile(path) as f:
        with pytest.raises(TypeError, match="read-only"):
            f.read(b"immutable")
        ro = np.zeros(10, np.uint8)
        ro.flags.writeable = False
        with pytest.raises(TypeError, match="read-only"):
            f.read(ro)
        with pytest.raises(ValueError, match="not contiguous"):
            f.read(np.zeros(20, np.uint8)[::2])
        with pytest.raises(ValueError, match="larger than the buffer"):
            f.read(bytearray(10), size=11)
        with pytest.raises(TypeError, match="not memory kvik can use"):
            f.read("a string")
        with pytest.raises(TypeError, match="not memory kvik can use"):
            f.read(12)


def test_writes_from_read_only_memory(tmp_path):
    ro = np.arange(10, dtype=np.uint8)
    ro.flags.writeable = False
    with kvik.CuFile(tmp_path / "f.bin", "w") as f:
        assert f.write(ro) == 10
        assert f.write(b"bytes are fine too", file_offset=10) == 18


def test_compat_off_without_cufile_is_a_runtime_error(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x")
    if kvik.check()["verdict"]["kind"] != "posix_only":
        pytest.skip("cuFile is usable here: compat mode OFF opens")
    with kvik.defaults.set("compat_mode", kvik.CompatMode.OFF):
        with pytest.raises(RuntimeError, match="compat mode is OFF") as e:
            kvik.CuFile(path)
    assert str(path) in str(e.value)


def test_bad_environment_is_a_value_error_naming_the_variable(tmp_path):
    """KVIKIO_* variables are read as KvikIO reads them, and junk is refused."""
    code = (
        "import kvik, sys\n"
        "try:\n"
        "    kvik.defaults.get('task_size')\n"
        "except ValueError as e:\n"
        "    print('ValueError:', e)\n"
        "    sys.exit(0)\n"
        "sys.exit(1)\n"
    )
    env = dict(os.environ, KVIKIO_TASK_SIZE="4x", KVIKIO_COMPAT_MODE="maybe")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'KVIKIO_TASK_SIZE="4x" is invalid' in out.stdout
    assert 'KVIKIO_COMPAT_MODE="maybe" is invalid' in out.stdout
