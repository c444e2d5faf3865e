"""kvik.defaults: KvikIO's names, values and environment variables."""

import os
import subprocess
import sys

import pytest

import kvik
from kvik import CompatMode


def test_getters_match_get():
    assert kvik.defaults.compat_mode() is kvik.defaults.get("compat_mode")
    assert isinstance(kvik.defaults.compat_mode(), CompatMode)
    for name in ["num_threads", "task_size", "gds_threshold", "bounce_buffer_size"]:
        assert getattr(kvik.defaults, name)() == kvik.defaults.get(name)
        assert isinstance(kvik.defaults.get(name), int)
    for name in ["auto_direct_io_read", "auto_direct_io_write"]:
        assert isinstance(kvik.defaults.get(name), bool)
    assert kvik.defaults.get("thread_pool_nthreads") == kvik.defaults.num_threads()


def test_compat_mode_values_are_kvikios():
    assert (CompatMode.OFF, CompatMode.ON, CompatMode.AUTO) == (0, 1, 2)


def test_set_holds_without_with():
    kvik.defaults.set({"task_size": 123_456, "num_threads": 3})
    assert kvik.defaults.task_size() == 123_456
    assert kvik.defaults.num_threads() == 3
    kvik.defaults.set("gds_threshold", 0)
    assert kvik.defaults.gds_threshold() == 0


def test_set_as_context_manager_restores_what_it_changed():
    before = kvik.defaults.task_size()
    with kvik.defaults.set({"task_size": 1 << 20, "compat_mode": "on"}):
        assert kvik.defaults.task_size() == 1 << 20
        assert kvik.defaults.compat_mode() is CompatMode.ON
        kvik.defaults.set("num_threads", 5)  # not part of the block's change
        with kvik.defaults.set("task_size", 4096):
            assert kvik.defaults.task_size() == 4096
        assert kvik.defaults.task_size() == 1 << 20
    assert kvik.defaults.task_size() == before
    assert kvik.defaults.num_threads() == 5


@pytest.mark.parametrize(
    "value, mode",
    [
        (CompatMode.OFF, CompatMode.OFF),
        ("AUTO", CompatMode.AUTO),
        ("yes", CompatMode.ON),
        (True, CompatMode.ON),
        (0, CompatMode.OFF),
    ],
)
def test_compat_mode_takes_kvikios_forms(value, mode):
    kvik.defaults.set("compat_mode", value)
    assert kvik.defaults.compat_mode() is mode


def test_sizes_take_units_and_flags_take_strings():
    kvik.defaults.set({"task_size": "2MiB", "bounce_buffer_size": "8 MiB", "auto_direct_io_read": "on"})
    assert kvik.defaults.task_size() == 2 << 20
    assert kvik.defaults.bounce_buffer_size() == 8 << 20
    assert kvik.defaults.auto_direct_io_read() is True


@pytest.mark.parametrize(
    "config, error, says",
    [
        ({"num_threads": 0}, ValueError, "num_threads"),
        ({"num_threads": 5000}, ValueError, "at most 1024"),
        ({"task_size": 0}, ValueError, "greater than 0"),
        ({"task_size": "4x"}, ValueError, "task_size"),
        ({"task_size": -1}, ValueError, "task_size"),
        ({"compat_mode": "maybe"}, ValueError, "not a compat mode"),
        ({"compat_mode": 7}, ValueError, "not a compat mode"),
        ({"compat_mode": 1.5}, TypeError, "compat_mode"),
        ({"num_threads": "8"}, TypeError, "whole number"),
        ({"auto_direct_io_read": "sometimes"}, ValueError, "auto_direct_io_read"),
        ({"no_such_setting": 1}, ValueError, "not a setting"),
        ({"http_timeout": 0}, ValueError, "http_timeout"),
        ({"http_status_codes": [200, 9999]}, ValueError, "http_status_codes"),
    ],
)
def test_bad_values_change_nothing(config, error, says):
    before = {d["name"]: d["value"] for d in kvik.defaults.describe()}
    with pytest.raises(error, match=says):
        kvik.defaults.set({"task_size": 8192, **config})
    assert {d["name"]: d["value"] for d in kvik.defaults.describe()} == before


def test_http_settings_as_kvikio():
    assert kvik.defaults.get("http_max_attempts") == 3
    assert kvik.defaults.get("http_timeout") == 60
    assert kvik.defaults.get("http_status_codes") == [429, 500, 502, 503, 504]
    with kvik.defaults.set({"http_max_attempts": 5, "http_status_codes": [503]}):
        assert kvik.defaults.get("http_max_attempts") == 5
        assert kvik.defaults.get("http_status_codes") == [503]
    assert kvik.defaults.get("http_max_attempts") == 3


def test_set_usage_errors():
    with pytest.raises(ValueError, match="kvik.defaults.set"):
        kvik.defaults.set()
    with pytest.raises(ValueError, match="kvik.defaults.set"):
        kvik.defaults.set(1, 2)
    with pytest.raises(ValueError, match="not a setting"):
        kvik.defaults.get("nope")


def test_describe_gives_sources():
    kvik.defaults.set("task_size", 1 << 20)
    rows = {d["name"]: d for d in kvik.defaults.describe()}
    assert rows["task_size"]["source"] == {"kind": "api"}
    assert rows["task_size"]["variables"] == ["KVIKIO_TASK_SIZE"]
    assert rows["num_threads"]["variables"] == ["KVIKIO_NTHREADS", "KVIKIO_NUM_THREADS"]


def run_python(code, **env):
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_environment_variables_as_kvikio():
    out = run_python(
        "import kvik; d = kvik.defaults\n"
        "print(d.compat_mode().name, d.num_threads(), d.task_size(), d.gds_threshold(),"
        " d.bounce_buffer_size(), d.auto_direct_io_read(), d.auto_direct_io_write())\n"
        "print({r['name']: r['source'] for r in d.describe()}['task_size'])",
        KVIKIO_COMPAT_MODE="on",
        KVIKIO_NTHREADS="3",
        KVIKIO_TASK_SIZE="1048576",
        KVIKIO_GDS_THRESHOLD="4KiB",
        KVIKIO_BOUNCE_BUFFER_SIZE="8MiB",
        KVIKIO_AUTO_DIRECT_IO_READ="true",
        KVIKIO_AUTO_DIRECT_IO_WRITE="0",
    )
    lines = out.splitlines()
    assert lines[0] == "ON 3 1048576 4096 8388608 True False"
    assert lines[1] == "{'kind': 'environment', 'variable': 'KVIKIO_TASK_SIZE'}"


def test_is_compat_mode_preferred():
    kvik.defaults.set("compat_mode", CompatMode.ON)
    assert kvik.defaults.is_compat_mode_preferred() is True
    kvik.defaults.set("compat_mode", CompatMode.OFF)
    assert kvik.defaults.is_compat_mode_preferred() is False
    kvik.defaults.set("compat_mode", CompatMode.AUTO)
    direct = kvik.check()["verdict"]["kind"] == "direct_path_possible"
    assert kvik.defaults.is_compat_mode_preferred() is (not direct)
