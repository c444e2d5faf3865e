"""``kvik.defaults``: KvikIO's settings, with KvikIO's names and environment.

Each setting starts from its ``KVIKIO_*`` environment variable (read once, on
first use), else kvik's default, and can be changed at run time:

=========================  ==============================  ==========================
setting                    environment variable            default
=========================  ==============================  ==========================
``compat_mode``            ``KVIKIO_COMPAT_MODE``          ``CompatMode.AUTO``
``num_threads``            ``KVIKIO_NTHREADS``             the available cores, at most 16
``task_size``              ``KVIKIO_TASK_SIZE``            4 MiB
``gds_threshold``          ``KVIKIO_GDS_THRESHOLD``        16 KiB
``bounce_buffer_size``     ``KVIKIO_BOUNCE_BUFFER_SIZE``   16 MiB
``auto_direct_io_read``    ``KVIKIO_AUTO_DIRECT_IO_READ``  False
``auto_direct_io_write``   ``KVIKIO_AUTO_DIRECT_IO_WRITE`` True
=========================  ==============================  ==========================

Unlike KvikIO: sizes also take units (``"4MiB"``, also in the environment), a bad
value is a ``ValueError`` naming it (KvikIO reads ``KVIKIO_TASK_SIZE=4MiB`` as 4
bytes), and ``num_threads`` defaults to the cores (KvikIO: 1).

::

    kvik.defaults.set({"num_threads": 8, "task_size": 1 << 20})   # from now on
    with kvik.defaults.set("compat_mode", kvik.CompatMode.ON):     # inside the block only
        ...
"""

from __future__ import annotations

from typing import Any, Mapping, overload

from kvik import _kvik
from kvik._compat_mode import CompatMode

# KvikIO's internal name for num_threads, accepted too.
_ALIASES = {"thread_pool_nthreads": "num_threads"}


def _name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"setting names are strings, not {name!r}")
    return _ALIASES.get(name, name)


def get(config_name: str) -> Any:
    """The value of a setting (``compat_mode`` as a ``CompatMode``)."""
    name = _name(config_name)
    value = _kvik.get_setting(name)
    if name == "compat_mode":
        return CompatMode[str(value)]
    return value


class ConfigContextManager:
    """The settings given to :func:`set`, in force from the call on; used in a
    ``with`` statement, the settings it changed get back their old values when
    the block ends (settings changed otherwise inside the block are kept)."""

    def __init__(self, config: Mapping[str, Any]):
        changes = {_name(k): v for k, v in config.items()}
        self._old = {name: _kvik.get_setting(name) for name in changes}
        _kvik.set_settings(changes)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        _kvik.set_settings(self._old)


@overload
def set(config: Mapping[str, Any], /) -> ConfigContextManager: ...
@overload
def set(key: str, value: Any, /) -> ConfigContextManager: ...
def set(*config: Any) -> ConfigContextManager:
    """Set settings: ``set({"task_size": 1 << 20, ...})`` or ``set("task_size", 1 << 20)``.

    All given settings are checked before any changes (a bad one raises
    ``ValueError`` or ``TypeError`` and changes nothing). The change holds from
    now on; used as a context manager, until the ``with`` block ends.
    """
    usage = (
        "use kvik.defaults.set(config: dict) or kvik.defaults.set(key: str, value: Any)"
    )
    if len(config) == 1:
        if not isinstance(config[0], Mapping):
            raise ValueError(usage)
        return ConfigContextManager(config[0])
    if len(config) == 2:
        if not isinstance(config[0], str):
            raise ValueError(usage)
        return ConfigContextManager({config[0]: config[1]})
    raise ValueError(usage)


def describe() -> list[dict[str, Any]]:
    """Every setting: ``name``, ``value`` (as text), ``source`` (``{"kind":
    "default"}``, ``{"kind": "environment", "variable": ...}`` or ``{"kind":
    "api"}``), ``variables``, ``default`` and ``rule``."""
    return _kvik.describe_settings()


def is_compat_mode_preferred() -> bool:
    """Whether device memory would go through the POSIX path rather than cuFile here:
    compat mode ON, or AUTO where cuFile has no direct path (``kvik.check()`` says why)."""
    return _kvik.is_compat_mode_preferred()


def compat_mode() -> CompatMode:
    """``get("compat_mode")``."""
    return CompatMode[str(_kvik.get_setting("compat_mode"))]


def num_threads() -> int:
    """``get("num_threads")``: threads that run the tasks of a request."""
    return int(_kvik.get_setting("num_threads"))


def task_size() -> int:
    """``get("task_size")``: the bytes each request is cut into."""
    return int(_kvik.get_setting("task_size"))


def gds_threshold() -> int:
    """``get("gds_threshold")``: device requests below it skip cuFile."""
    return int(_kvik.get_setting("gds_threshold"))


def bounce_buffer_size() -> int:
    """``get("bounce_buffer_size")``: each pinned bounce buffer's size."""
    return int(_kvik.get_setting("bounce_buffer_size"))


def auto_direct_io_read() -> bool:
    """``get("auto_direct_io_read")``: host reads use O_DIRECT for page-aligned parts."""
    return bool(_kvik.get_setting("auto_direct_io_read"))


def auto_direct_io_write() -> bool:
    """``get("auto_direct_io_write")``: host writes use O_DIRECT for page-aligned parts."""
    return bool(_kvik.get_setting("auto_direct_io_write"))


def cold_reads_direct() -> bool:
    """``get("cold_reads_direct")``: cold host reads of at least 1 MiB use O_DIRECT (ours)."""
    return bool(_kvik.get_setting("cold_reads_direct"))


def http_max_attempts() -> int:
    """``get("http_max_attempts")``: attempts per remote request, the first included."""
    return int(_kvik.get_setting("http_max_attempts"))


def http_timeout() -> int:
    """``get("http_timeout")``: seconds one remote attempt may take."""
    return int(_kvik.get_setting("http_timeout"))


def http_status_codes() -> list[int]:
    """``get("http_status_codes")``: the HTTP statuses that are retried."""
    return [int(c) for c in _kvik.get_setting("http_status_codes")]


__all__ = [
    "ConfigContextManager",
    "auto_direct_io_read",
    "auto_direct_io_write",
    "bounce_buffer_size",
    "cold_reads_direct",
    "compat_mode",
    "describe",
    "gds_threshold",
    "get",
    "http_max_attempts",
    "http_status_codes",
    "http_timeout",
    "is_compat_mode_preferred",
    "num_threads",
    "set",
    "task_size",
]
