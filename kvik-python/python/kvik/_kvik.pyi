"""Type stubs for kvik's native module (kvik._kvik); kvik re-exports it."""

import os
from typing import Any, Optional, Union

from kvik._compat_mode import CompatMode

__version__: str
# Rounds of tasks in one window of a request (see CuFile.pread).
WINDOW_ROUNDS: int

_Path = Union[str, "os.PathLike[str]"]
# Host memory with the buffer protocol (bytearray, numpy.ndarray, memoryview, mmap,
# ...) or device memory with __cuda_array_interface__ or __dlpack__ (cupy.ndarray,
# torch.Tensor on CUDA, ...); contiguous, any dtype.
_Buffer = Any
# A path report: operation, path, file_offset, requested_bytes, bytes, memory,
# kvik (compat modes, backend and reason, file_reasons, threads, task_size,
# direct_io, tasks), cufile (status, and cuFile's counters when called), windows.
_Report = dict[str, Any]
_SettingValue = Union[CompatMode, str, int, bool]

class IOFuture:
    """A read or write running in the background."""

    def get(self) -> int:
        """Wait (GIL released; Ctrl-C cancels) and return the bytes moved."""
    def done(self) -> bool:
        """Whether the request has finished."""
    def cancel(self) -> bool:
        """Stop issuing pieces; whether the request was still running."""
    @property
    def report(self) -> Optional[_Report]:
        """The path report once the request has finished, else None."""

class CuFile:
    """A file for reads and writes into host or device memory (KvikIO's CuFile)."""

    def __init__(self, file: _Path, flags: str = "r") -> None: ...
    def close(self) -> None:
        """Close the file (running requests keep it open until they finish)."""
    @property
    def closed(self) -> bool: ...
    def fileno(self) -> int: ...
    def nbytes(self) -> int:
        """The file's size in bytes."""
    def __enter__(self) -> "CuFile": ...
    def __exit__(self, *exc_info: object) -> None: ...
    def pread(
        self,
        buf: _Buffer,
        size: Optional[int] = None,
        file_offset: int = 0,
        task_size: Optional[int] = None,
    ) -> IOFuture:
        """Read into `buf` in the background."""
    def pwrite(
        self,
        buf: _Buffer,
        size: Optional[int] = None,
        file_offset: int = 0,
        task_size: Optional[int] = None,
    ) -> IOFuture:
        """Write `buf` in the background."""
    def read(
        self,
        buf: _Buffer,
        size: Optional[int] = None,
        file_offset: int = 0,
        task_size: Optional[int] = None,
    ) -> int:
        """Read into `buf`; the bytes read (fewer only at the end of the file)."""
    def write(
        self,
        buf: _Buffer,
        size: Optional[int] = None,
        file_offset: int = 0,
        task_size: Optional[int] = None,
    ) -> int:
        """Write `buf`; the bytes written."""
    @property
    def last_report(self) -> Optional[_Report]:
        """The path report of the request on this file that finished last."""
    @property
    def routing(self) -> dict[str, Any]:
        """How device-memory requests on this file are served, and why."""

def check(path: Optional[_Path] = None) -> dict[str, Any]:
    """GDS readiness: every fact, and the verdict with its reasons."""

def plan(
    size: int,
    file_offset: int = 0,
    memory: str = "device",
    *,
    compat_mode: Optional[_SettingValue] = None,
    task_size: Optional[Union[int, str]] = None,
    gds_threshold: Optional[Union[int, str]] = None,
    registered: bool = False,
    config: Optional[_Path] = None,
) -> dict[str, Any]:
    """What a read would do here, without doing it."""

def get_setting(name: str) -> Union[str, int, bool, list[int]]: ...
def set_settings(values: dict[str, Any]) -> None: ...
def describe_settings() -> list[dict[str, Any]]: ...
def is_compat_mode_preferred() -> bool: ...
def validate_config(
    path: Optional[_Path], library: str, check_paths: bool
) -> dict[str, Any]: ...
