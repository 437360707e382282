import copy
import re
from pathlib import Path

import pytest
from conftest import REPO, with_changes

from cycleio.config.calendar import STEP_WILDCARD
from cycleio.config.schema import load_schema
from cycleio.config.settings import ConfigError, build_study, validate_config


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"scrach_tiers": ["shm"]}, r"unknown key 'scrach_tiers' \(did you mean 'scratch_tiers'\?\) at the top level"),
        ({"cycles__strat": "2026010100"}, r"unknown key 'strat' \(did you mean 'start'\?\) in 'cycles'"),
        ({"levels": "many"}, r"config key 'levels': expected integer, got 'many'"),
        ({"resolution": "C50"}, r"config key 'resolution': 'C50' is not allowed; expected one of: C12, C48"),
        ({"scratch_tiers": ["lustre", "nvme"]}, r"config key 'scratch_tiers\[1\]': 'nvme' is not a tier; expected one of: lustre, node_local, shm"),
        ({"persistent_tier": "shm"}, r"config key 'persistent_tier': tier 'shm' has persistent: false"),
        ({"persistent_tier": ["lustre", "shm"]}, r"config key 'persistent_tier\[1\]': tier 'shm' has persistent: false"),
        ({"persistent_tier": ["lustre", "gpfs"]}, r"config key 'persistent_tier\[1\]': 'gpfs' is not a tier; expected one of"),
        ({"persistent_tier": []}, r"config key 'persistent_tier'"),
        ({"cycles__end": "2025123118"}, r"config key 'cycles.end': 2025123118 is before cycles.start 2026010100"),
        ({"cycles__end": "2026013200"}, r"config key 'cycles.end': cycle '2026013200' is not a valid date"),
        ({"cycles__start": "20260101"}, r"config key 'cycles.start': '20260101' does not match the expected form"),
        ({"tiers__shm__pth": "/x"}, r"unknown key 'pth' \(did you mean 'path'\?\) in 'tiers.shm'"),
        ({"tiers__bb": {"kind": "burst_buffer", "path": "$NO_SUCH_VAR_X/bb"}}, r"config key 'tiers.bb.path': tier 'bb': path .* uses \$NO_SUCH_VAR_X"),
        ({"forecast__restart_hours": [3, 9]}, r"config key 'forecast.restart_hours': \[3, 9\] must include cycles.interval_hours \(6\)"),
        ({"launcher": "mpiexec -n 4"}, r"config key 'launcher': 'mpiexec -n 4' does not say how many tasks to start; "
                                       r"expected a command with \{ntasks\}"),
        ({"launcher": "mpiexec -n {tasks}"}, r"config key 'launcher': 'mpiexec -n \{tasks\}' is not a valid template"),
        ({"cycles__interval_hours": 5, "forecast__restart_hours": [3, 5, 6, 9]},
         r"config key 'forecast.restart_hours': \[5\] are not output hours \(multiples of forecast.history_interval_hours, 3\)"),
    ],
)
def test_bad_config_names_the_key_and_what_is_expected(default_config, changes, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(with_changes(default_config, **changes))


def _item_defaults(schema: dict) -> dict:
    return {name: sub["default"] for name, sub in schema["properties"].items() if "default" in sub}


def test_validation_fills_the_schemas_defaults_into_left_out_objects_and_named_entries(default_config):
    """The schema is the only place defaults are written: validation fills them into an object the config leaves
    out, and into a tier or pattern it names (the jsonschema default-filling validator), not code."""
    schema = load_schema()
    config = with_changes(default_config, tiers__bb={"kind": "posix", "path": "/x"},
                          benchmarks__patterns__mine={"transfer_size": "4k", "block_size": "1m"})
    del config["staging"], config["benchmarks"]["fieldio"]
    before = copy.deepcopy(config)
    filled = validate_config(config)
    assert config == before, "validation changed the caller's config"
    assert filled["staging"] == _item_defaults(schema["properties"]["staging"])
    assert filled["benchmarks"]["fieldio"] == _item_defaults(schema["properties"]["benchmarks"]["properties"]["fieldio"])
    tier = schema["properties"]["tiers"]["additionalProperties"]
    assert filled["tiers"]["bb"] == {**_item_defaults(tier), "kind": "posix", "path": "/x"}
    pattern = schema["properties"]["benchmarks"]["properties"]["patterns"]["additionalProperties"]
    assert filled["benchmarks"]["patterns"]["mine"] == {**_item_defaults(pattern), "transfer_size": "4k", "block_size": "1m"}
    # a default is a copy: filling two configs does not share (and so change) one list
    filled["scratch_tiers"].append("bb")
    assert "bb" not in validate_config({})["scratch_tiers"]


def test_objects_built_without_a_config_take_the_schemas_defaults():
    """The settings classes' defaults (tests build them without a config) are what the default study gets."""
    from dataclasses import asdict

    from cycleio.benchmarks.specs import FieldIOSpec, IOPattern, MetadataPattern, segments_behind_time_bound
    from cycleio.benchmarks.tierbench import BenchmarkPlan
    from cycleio.config.settings import ArmSettings
    from cycleio.config.tierspec import Tier
    from cycleio.surrogates.forecast.layout import RankLayout
    from cycleio.config.forecast import ForecastSettings

    config = validate_config({})
    arm = build_study(config).arms["shm"]
    bare = ArmSettings(study=arm.study, arm=arm.arm, start=arm.start, seed=arm.seed, resolution=arm.resolution,
                       levels=arm.levels, persistent=arm.persistent)
    for name in ("strategy", "compute_seconds_per_hour", "compute_kind", "staging", "launcher", "granularity"):
        assert getattr(bare, name) == getattr(arm, name), name
    assert RankLayout.from_settings(arm.strategy, {}) == RankLayout.from_settings(arm.strategy, arm.write_component)
    mirrored = ("forecast_hours", "history_interval_hours", "restart_hours", "interval_hours", "iau",
                "pgrb2_fields", "sflux_fields", "members", "members_per_job")
    assert {k: getattr(ForecastSettings(), k) for k in mirrored} == {k: getattr(arm.forecast, k) for k in mirrored}
    tier = validate_config({"tiers": {**config["tiers"], "bb": {"kind": "posix", "path": "/x"}}})["tiers"]["bb"]
    assert Tier(name="bb", **tier) == Tier(name="bb", kind="posix", path="/x")
    plan = BenchmarkPlan.from_config(with_changes(config, benchmarks__enabled=False, benchmarks__metadata_patterns=["easy"],
                                                  benchmarks__fieldio__enabled=True))
    # the embedded easy pattern is bounded by time, with the segments its bound needs; a pattern's own default is not
    bound = config["benchmarks"]["patterns"]["easy"]["stonewall_s"]
    segments = segments_behind_time_bound(IOPattern(name="easy").block_size_bytes, 1, bound,
                                          config["benchmarks"]["stonewall_max_MiB_per_s_per_task"])
    assert plan.specs[("io", "easy")][0] == asdict(IOPattern(name="easy", stonewall_s=bound, segments=segments))
    assert IOPattern(name="easy").stonewall_s == 0.0 and bound > 0
    assert plan.specs[("metadata", "easy")][0] == asdict(MetadataPattern(name="easy"))
    assert plan.specs[("fieldio", "fields")][0] == asdict(FieldIOSpec())


def test_integer_cycles_from_the_command_line_are_accepted(default_config):
    config = with_changes(default_config, cycles__start=2026010100, cycles__end=2026010106)
    study = build_study(validate_config(config))
    assert study.cycles == ["2026010100", "2026010106"]


def test_default_study_has_one_arm_per_scratch_tier_with_lustre_baseline(default_config):
    study = build_study(validate_config(default_config))
    assert list(study.arms) == ["lustre", "node_local", "shm"]
    assert not study.arms["lustre"].staged and study.arms["shm"].staged
    assert all(arm.persistent.name == "lustre" for arm in study.arms.values())


def test_a_list_of_persistent_tiers_sweeps_them_against_every_scratch_tier(default_config):
    config = with_changes(default_config, persistent_tier=["lustre", "gluster"],
                          scratch_tiers=["lustre", "gluster", "shm"],
                          tiers__gluster={"kind": "posix", "path": "/mnt/gluster/{study}"})
    study = build_study(validate_config(config))
    pairs = {name: (arm.persistent.name, arm.scratch.name) for name, arm in study.arms.items()}
    # each persistent tier gets its baseline and its staged arms; no staging between two persistent tiers
    assert pairs == {"lustre": ("lustre", "lustre"), "lustre_shm": ("lustre", "shm"),
                     "gluster": ("gluster", "gluster"), "gluster_shm": ("gluster", "shm")}
    assert not study.arms["gluster"].staged and study.arms["gluster_shm"].staged


def test_swapping_a_tier_is_one_key(default_config):
    config = with_changes(default_config, tiers__shm={"kind": "memory", "path": "/dev/shm/elsewhere"})
    study = build_study(validate_config(config))
    assert study.arms["shm"].scratch.path == "/dev/shm/elsewhere"


def test_arm_settings_round_trip_through_json(default_config):
    from cycleio.config.settings import ArmSettings

    arm = build_study(validate_config(default_config)).arms["node_local"]
    assert ArmSettings.from_json(arm.to_json()) == arm
    assert re.fullmatch(r"\{.*\}", arm.to_json())


@pytest.mark.parametrize(
    "text, message",
    [
        ('cycles:\n  start: "2026010100\n  end: x\n',
         r"line 4, column 1: not valid YAML: found unexpected end of stream \(while scanning a quoted scalar at line 2, column 10\)"),
        ("", r"is empty; expected config keys \(key: value\)"),
        ("- a\n- b\n", r"holds a list at the top level; expected config keys"),
    ],
)
def test_a_config_file_that_is_not_a_mapping_is_named_with_its_line(tmp_path, text, message):
    from cycleio.config.settings import read_config_file

    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"config file '{path}'.*{message}"):
        read_config_file(path)
    with pytest.raises(ConfigError, match=r"config file '.*missing.yaml' cannot be read: No such file or directory"):
        read_config_file(tmp_path / "missing.yaml")


def test_nested_command_line_values_are_read_as_yaml_reads_them(default_config):
    """Snakemake keeps nested --config scalars as strings (YAML's base loader): staging={drop_caches: false}."""
    from snakemake.cli import parse_config

    given = parse_config(["staging={drop_caches: false, streams: 2}", "benchmarks={enabled: false}",
                          "tiers={shm: {path: /dev/shm/x, shared: true}}"])
    assert given["staging"]["drop_caches"] == "false"  # what the workflow receives
    config = with_changes(default_config, staging__drop_caches=given["staging"]["drop_caches"],
                          staging__streams=given["staging"]["streams"], benchmarks__enabled="false",
                          tiers__shm__path="/dev/shm/x", tiers__shm__shared="true")
    filled = validate_config(config)
    assert filled["staging"]["drop_caches"] is False and filled["staging"]["streams"] == 2
    assert filled["benchmarks"]["enabled"] is False and filled["tiers"]["shm"]["shared"] is True
    assert filled["tiers"]["shm"]["path"] == "/dev/shm/x"
    with pytest.raises(ConfigError, match=r"config key 'staging.streams': expected integer, got 'two'"):
        validate_config(with_changes(default_config, staging__streams="two"))


def test_a_list_of_replay_ranks_sweeps_a_job_per_count(default_config):
    """darshan.jobs.<name>.ranks: [1, 4] gives darshan_<name>_n1 and darshan_<name>_n4, each with its count, names
    no user can give (letters and digits only) and the Snakefile's step wildcard takes."""
    jobs = {"ior": {"log": "example:ior_hdf5_example.darshan", "ranks": [1, 4]}, "dxt": {"log": "example:dxt.darshan"}}
    config = validate_config(with_changes(default_config, darshan={"jobs": jobs}))
    assert config["darshan"]["jobs"]["ior"]["ranks"] == [1, 4]  # the config as given; the arms hold the sweep
    swept = build_study(config).arms["lustre"].darshan["jobs"]
    assert {name: job["ranks"] for name, job in swept.items()} == {"ior_n1": 1, "ior_n4": 4, "dxt": 1}
    assert "step=STEP_WILDCARD," in (Path(__file__).parents[1] / "Snakefile").read_text()
    assert all(re.fullmatch(STEP_WILDCARD, f"darshan_{name}") for name in swept)
    with pytest.raises(ConfigError, match="darshan.jobs"):
        validate_config(with_changes(default_config, darshan={"jobs": {"ior_n1": {"log": "x.darshan"}}}))
    with pytest.raises(ConfigError, match="darshan.jobs.ior.ranks"):
        validate_config(with_changes(default_config, darshan={"jobs": {"ior": {"log": "x.darshan", "ranks": []}}}))


@pytest.mark.parametrize("study", sorted(p.name for p in (REPO / "config" / "studies").glob("*.yaml")))
def test_every_shipped_study_file_loads_over_the_default_study(study):
    """make study STUDY=config/studies/<study> passes its config check (a study meant over the smoke study too)."""
    from cycleio.cli import load_config_files

    _, loaded = load_config_files([str(REPO / "config" / "config.yaml"), str(REPO / "config" / "studies" / study)])
    assert loaded.cycles and loaded.arms
