"""kvik: KvikIO's Python API on kvik-rs.

Read and write files to GPU memory (CuPy arrays, PyTorch CUDA tensors, anything
with ``__cuda_array_interface__`` or DLPack) and host memory (anything with the
buffer protocol) through NVIDIA GPUDirect Storage (cuFile) when it has a direct
path, and through a fast CPU-staged path when it does not — and say which path
every request took, and why.

Moving from KvikIO is one line::

    import kvik as kvikio

    with kvikio.CuFile("/data/weights.bin", "r") as f:
        n = f.read(array)            # a CuPy array, a numpy array, a torch tensor, ...
        print(f.last_report)         # the path report of that read (a dict)

Beyond KvikIO: ``IOFuture.report`` and ``CuFile.last_report`` (the path report
of every request), ``kvik.check()`` (is GDS usable here, and why),
``kvik.plan()`` (what a request would do), ``kvik.config.validate()``
(cufile.json diagnostics), ``IOFuture.cancel()`` and Ctrl-C during long reads.
"""

from kvik import config, defaults
from kvik._compat_mode import CompatMode
from kvik._kvik import CuFile, IOFuture, __version__, check, plan

# The batch read API (many small reads in one call) will be exported here, next
# to CuFile, when kvik-policy has it; its native half registers in
# kvik-python/src/lib.rs.

__all__ = [
    "CompatMode",
    "CuFile",
    "IOFuture",
    "__version__",
    "check",
    "config",
    "defaults",
    "plan",
]
