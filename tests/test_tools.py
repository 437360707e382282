"""benchmarks.tools: the tools' registry, and the choice of tool checked when the config is loaded
(before any job)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from conftest import with_changes
from cycleio.benchmarks import fieldio, tools
from cycleio.benchmarks.tools import ior
from cycleio.config.schema import load_schema
from cycleio.config.settings import ConfigError
from cycleio.workflow.study import load_study
from cycleio.workflow.study import validate_study_config as validate_config

DATA = Path(__file__).parent / "data"


def fake_tool(folder: Path, name: str) -> Path:
    """An executable named like a benchmark tool (found, never run by these tests)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bare_path(tmp_path, monkeypatch):
    """PATH with only what a test puts in tmp_path/bin (no ior, mdtest, fio)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


# ------------------------------------------------------------------------- checks when the config is loaded


def test_tool_ior_without_ior_is_refused_when_the_config_is_loaded(default_config, bare_path):
    config = with_changes(default_config, benchmarks__tool="ior")
    message = (r"config key 'benchmarks.ior_path': benchmarks.tool is 'ior' but ior was not found "
               r".*set benchmarks.ior_path, or set benchmarks.tool to auto or fio")
    with pytest.raises(ConfigError, match=message):
        load_study(config)


def test_tool_ior_needs_mdtest_only_when_metadata_patterns_run(default_config, bare_path):
    ior_path = fake_tool(bare_path, "ior")
    config = with_changes(default_config, benchmarks__tool="ior", benchmarks__ior_path=str(ior_path),
                          benchmarks__metadata_patterns=["easy"])
    with pytest.raises(ConfigError, match=r"config key 'benchmarks.mdtest_path': benchmarks.tool is 'ior' but mdtest "
                                          r"was not found"):
        load_study(config)
    load_study(with_changes(config, benchmarks__metadata_patterns=[], benchmarks__replay__enabled=False))
    fake_tool(bare_path, "mdtest")
    with pytest.raises(ConfigError, match=r"config key 'benchmarks.fio_path': fio was not found"):
        load_study(config)  # the paired replay runs fio
    fake_tool(bare_path, "fio")
    load_study(config)  # all three on PATH


def test_a_configured_tool_path_must_be_an_executable(default_config, tmp_path):
    not_executable = tmp_path / "ior"
    not_executable.write_text("")
    config = with_changes(default_config, benchmarks__ior_path=str(not_executable))
    with pytest.raises(ConfigError, match=rf"config key 'benchmarks.ior_path': '{not_executable}' is not an "
                                          "executable file"):
        validate_config(config)
    with pytest.raises(ConfigError, match=r"config key 'benchmarks.fio_path': 'no-such-fio' is not found on PATH"):
        validate_config(with_changes(default_config, benchmarks__tool="fio", benchmarks__fio_path="no-such-fio"))


def test_an_api_fio_cannot_stand_for_is_refused_where_ior_is_missing(default_config, bare_path):
    fake_tool(bare_path, "fio")
    config = with_changes(default_config, benchmarks__patterns__hard__api="HDF5")
    with pytest.raises(ConfigError, match=r"config key 'benchmarks.patterns.hard.api': HDF5 needs IOR, but IOR was not "
                                          r"found \(set benchmarks.ior_path\) \(fio stands for POSIX, MMAP only\)"):
        validate_config(config)
    fake_tool(bare_path, "ior")
    validate_config(config)


def test_no_fio_where_fio_stands_in_is_refused(default_config, bare_path):
    with pytest.raises(ConfigError, match=r"config key 'benchmarks.fio_path': fio was not found on PATH"):
        validate_config(default_config)


def test_tools_are_not_looked_for_when_benchmarks_are_off(default_config, bare_path, monkeypatch):
    from cycleio.benchmarks import tierbench

    looked_for = []
    choose_tool = tierbench.choose_tool
    monkeypatch.setattr(tierbench, "choose_tool", lambda *args: looked_for.append(args) or choose_tool(*args))
    config = with_changes(default_config, benchmarks__tool="ior")
    with pytest.raises(ConfigError, match="ior was not found"):  # on, the plan looks for IOR (and finds none)
        validate_config(config)
    assert looked_for, "the plan did not look for its tools with benchmarks on"
    looked_for.clear()
    filled = validate_config(with_changes(config, benchmarks__enabled=False))
    assert looked_for == [] and filled["benchmarks"]["tool"] == "ior" and filled["benchmarks"]["enabled"] is False


# ------------------------------------------------------------------------- the registry


def test_the_schema_takes_its_tool_names_and_ior_apis_from_the_registry():
    bench = load_schema()["properties"]["benchmarks"]["properties"]
    assert tuple(bench["tool"]["enum"]) == tools.CHOICES
    assert set(tools.CHOICES) - {"auto"} <= set(tools.TOOLS)
    assert {f"{name}_path" for name in tools.TOOLS} <= set(bench)
    assert tuple(bench["patterns"]["additionalProperties"]["properties"]["api"]["enum"]) == ior.APIS
    # the plan trusts the schema's enums (it checks them no more): each must be a value the code knows
    assert tuple(bench["patterns"]["additionalProperties"]["properties"]["reorder"]["enum"]) == ior.REORDERS
    field_io = bench["fieldio"]["properties"]
    assert {str(p) for p in field_io["patterns"]["items"]["enum"]} == set(fieldio.PATTERNS)
    assert tuple(field_io["layouts"]["items"]["enum"]) == fieldio.LAYOUTS


def test_every_tool_module_has_the_registrys_functions():
    for name, module in tools.TOOLS.items():
        assert module.NAME == name
        for function in ("parse", "guess_can_open", "unsupported", "version"):
            assert callable(getattr(module, function)), f"{name}.{function}"


# the tools' real outputs (tests/data/records and points are the report's fixtures: claimed by none)
SAMPLES = sorted(p for tool in ("ior", "fio") for p in (DATA / tool).rglob("*") if p.is_file())
FIXTURES = sorted(p for p in DATA.rglob("*") if p.is_file() and p.parent.name not in ("ior", "fio"))


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_at_most_one_reader_claims_each_sample(path):
    claims = [reader.__name__ for reader in (fieldio, *tools.TOOLS.values()) if reader.guess_can_open(path)]
    assert len(claims) <= 1, claims
    if path.suffix == ".json" and "error-" not in path.name and "limit-" not in path.name:
        assert claims == ["cycleio.benchmarks.tools." + ("fio" if path.parent.name == "fio" else "ior")]
    if path.name.startswith("mdtest-") and path.name.endswith(".stdout.txt"):
        assert claims == ["cycleio.benchmarks.tools.mdtest"]


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_no_tool_claims_the_reports_fixtures(path):
    assert not any(reader.guess_can_open(path) for reader in (fieldio, *tools.TOOLS.values()))


def test_the_empty_summary_of_a_failed_ior_run_is_iors():
    assert ior.guess_can_open(DATA / "ior" / "error-invalid-blocksize-1rank.json")


# ------------------------------------------------------------------------- the runner


