import re

import pytest
from conftest import with_changes
import yaml

from cycleio.config.settings import ConfigError, build_study, fill_defaults, load_schema, validate_config
from cycleio.config.docs import schema_markdown


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


def test_config_yaml_and_schema_defaults_are_in_step(default_config):
    """Every key of config.yaml has a schema default equal to it, and vice versa."""
    schema = load_schema()
    assert set(default_config) == set(schema["properties"])
    assert fill_defaults({}, schema) == fill_defaults(default_config, schema)


def test_every_schema_key_has_description_and_default():
    def walk(schema, path):
        for name, sub in schema.get("properties", {}).items():
            assert sub.get("description"), f"{path}{name} has no description"
            assert "default" in sub, f"{path}{name} has no default"
            walk(sub, f"{path}{name}.")

    walk(load_schema(), "")


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


def test_readme_configuration_table_is_generated_from_the_schema(repo):
    readme = (repo / "README.md").read_text()
    table = schema_markdown(load_schema())
    assert table in readme, "README's configuration table is stale: regenerate it with `cycleio config-docs`"


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
