"""What KvikIO lacks: kvik.check(), kvik.plan(), kvik.config.validate()."""

import os

import pytest

import kvik
from conftest import FIXTURES

MiB = 1 << 20


def test_check_gives_a_verdict_with_reasons(tmp_path):
    report = kvik.check(tmp_path)
    verdict = report["verdict"]
    assert verdict["kind"] in ("direct_path_possible", "compat_mode_only", "posix_only")
    assert verdict["reasons"]
    assert report["path"]["path"] == str(tmp_path)
    if "error" in report["cuda"]:
        # No CUDA driver: cuFile cannot be used, and the reasons say so.
        assert verdict["kind"] == "posix_only"
        assert any(r["kind"] == "no_cuda" for r in verdict["reasons"])
        assert report["driver"]["status"] == "not_opened"


def test_check_uses_the_libcufile_named_in_the_environment():
    library = os.environ.get("KVIK_CUFILE_LIBRARY")
    if not library:
        if os.environ.get("KVIK_REQUIRE_CUFILE") == "1":
            pytest.fail("KVIK_REQUIRE_CUFILE=1 but KVIK_CUFILE_LIBRARY is not set")
        pytest.skip("KVIK_CUFILE_LIBRARY is not set (cargo xtask fetch-libcufile prints a path)")
    libcufile = kvik.check()["libcufile"]
    assert libcufile["status"] == "loaded", libcufile
    assert libcufile["path"] == library
    assert libcufile["version"].startswith("1.")


def test_plan_for_host_memory():
    plan = kvik.plan(10 * MiB, memory="host", task_size=4 * MiB)
    assert plan["route"]["backend"] == "posix"
    assert [t["size"] for t in plan["tasks"]] == [4 * MiB, 4 * MiB, 2 * MiB]
    assert [t["file_offset"] for t in plan["tasks"]] == [0, 4 * MiB, 8 * MiB]
    assert plan["cufile"] is None
    assert plan["settings"]["task_size"] == {"value": 4 * MiB, "source": {"kind": "api"}}


def test_plan_with_cufile_follows_cufiles_split():
    """The guide's worked example: stock cufile.json, 1 GiB read, 4 MiB tasks:
    256 tasks of one unit each; one 1 GiB task: 4 units of 256 MiB."""
    stock = FIXTURES / "stock.json"
    plan = kvik.plan(1 << 30, compat_mode="off", task_size=4 * MiB, config=stock)
    assert plan["route"]["backend"] == "cufile"
    assert len(plan["tasks"]) == 256
    assert {t["cufile_units"] for t in plan["tasks"]} == {1}
    assert plan["cufile"]["units"] == 256
    assert plan["cufile"]["execution"]["min_io_threshold_size_kb"] == 8192
    one = kvik.plan(1 << 30, compat_mode="off", task_size=1 << 30, config=stock)
    assert one["cufile"]["units"] == 4
    if kvik.check()["verdict"]["kind"] == "posix_only":
        assert plan["refused"], "OFF cannot run here: the plan says why"


def test_plan_below_gds_threshold_is_posix():
    plan = kvik.plan(8192, compat_mode="off", gds_threshold=16384)
    assert plan["route"]["backend"] == "posix"
    assert plan["route"]["reason"]["kind"] == "below_gds_threshold"
    assert len(plan["tasks"]) == 1


def test_plan_refuses_bad_arguments():
    with pytest.raises(ValueError, match="device"):
        kvik.plan(10, memory="gpu")
    with pytest.raises(ValueError, match="too many"):
        kvik.plan(1 << 40, memory="host", task_size=4096)
    with pytest.raises(ValueError, match="error"):
        kvik.plan(1 << 20, compat_mode="off", config=FIXTURES / "broken" / "out_of_range.json")


def test_validate_a_good_config():
    result = kvik.config.validate(FIXTURES / "stock.json")
    assert result["valid"] is True
    assert result["errors"] == 0
    assert result["file"] == str(FIXTURES / "stock.json")


def test_validate_reports_every_problem_with_its_place():
    result = kvik.config.validate(FIXTURES / "broken" / "out_of_range.json")
    assert result["valid"] is False
    paths = {d["path"] for d in result["diagnostics"] if d["severity"] == "error"}
    assert "execution.max_request_parallelism" in paths
    assert "execution.max_io_threads" in paths
    for d in result["diagnostics"]:
        assert d["line"] > 0 and d["column"] > 0 and d["message"]
    warnings = kvik.config.validate(FIXTURES / "broken" / "unknown_key.json")
    assert warnings["warnings"] > 0 and warnings["errors"] == 0


def test_validate_per_library_version():
    newer = FIXTURES / "broken" / "other_version.json"
    assert kvik.config.validate(newer, library="1.15")["valid"] is False
    assert kvik.config.validate(newer, library="1.20")["valid"] is True
    with pytest.raises(ValueError, match="not modelled"):
        kvik.config.validate(newer, library="2.0")


def test_validate_finds_the_file_cufile_reads(monkeypatch, tmp_path):
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", str(FIXTURES / "stock.json"))
    assert kvik.config.validate()["file"] == str(FIXTURES / "stock.json")
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError, match="CUFILE_ENV_PATH_JSON"):
        kvik.config.validate()
    with pytest.raises(FileNotFoundError):
        kvik.config.validate(tmp_path / "nope.json")
