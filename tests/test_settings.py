import copy
import re

import jsonschema
import pytest
from conftest import with_changes
import yaml

from cycleio.config.settings import ConfigError, build_study, fill_defaults, load_schema, validate_config


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


def _join(path: str, key) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _same(a, b) -> bool:
    """Equal, and of the same types all the way down (True is not 1, 1 is not 1.0, "2" is not 2)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _default_differences(default, value, path: str) -> list[str]:
    """Where a schema default and config.yaml's value differ, named down to the innermost key."""
    if isinstance(default, dict) and isinstance(value, dict):
        out = [f"{_join(path, k)}: in the schema's default, not in config.yaml"
               for k in sorted(default.keys() - value.keys())]
        out += [f"{_join(path, k)}: in config.yaml, not in the schema's default"
                for k in sorted(value.keys() - default.keys())]
        for k in sorted(default.keys() & value.keys()):
            out += _default_differences(default[k], value[k], _join(path, k))
        return out
    if _same(default, value):
        return []
    return [f"{path}: the schema's default {default!r} differs from config.yaml's {value!r}"]


def _sub_schemas(schema: dict, path: str = ""):
    """(path, schema) of the schema and of every schema inside it: properties, additionalProperties (<name>) and
    items ([])."""
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _sub_schemas(sub, _join(path, name))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _sub_schemas(schema["additionalProperties"], _join(path, "<name>"))
    if isinstance(schema.get("items"), dict):
        yield from _sub_schemas(schema["items"], f"{path}[]")


def config_drift(config: dict, schema: dict) -> list[str]:
    """Where config.yaml and the schema disagree, walking every sub-schema; empty when they agree.

    - config.yaml validates against the schema (types, enums and patterns down to list items and named entries);
    - every default in the schema validates against its own sub-schema;
    - an object with fixed properties (cycles, forecast, benchmarks.fieldio, ...) has exactly the schema's keys in
      config.yaml, and each key's value is the schema's default (and so is what the object's own default sets);
    - a map of named entries (tiers, benchmarks.patterns, benchmarks.metadata) is the schema's default as it is,
      and each entry has its required keys and no key its item schema lacks; the entry's other keys take the item
      schema's defaults (checked to be valid above).
    Each problem names the key it is about.
    """
    problems = [f"config.yaml: {'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
                for e in jsonschema.Draft202012Validator(schema).iter_errors(config)]
    for path, sub in _sub_schemas(schema):
        if "default" in sub:
            for error in jsonschema.Draft202012Validator(sub).iter_errors(sub["default"]):
                problems.append(f"{path}: the schema's default {sub['default']!r} does not fit its own schema: "
                                f"{error.message}")

    def walk(value, sub: dict, path: str, spelled: bool) -> None:
        """spelled: config.yaml states this value in full (not an entry of a named map, nor a list item)."""
        properties = sub.get("properties")
        if properties is not None and isinstance(value, dict):
            extra = sub.get("additionalProperties")
            for key in sorted(value.keys() - properties.keys()):
                if not isinstance(extra, dict):
                    problems.append(f"{_join(path, key)}: in config.yaml, not in the schema")
            for key in sorted(properties.keys() - value.keys()):
                if spelled or key in sub.get("required", ()):
                    problems.append(f"{_join(path, key)}: in the schema, not in config.yaml")
            for key in sorted(properties.keys() & value.keys()):
                child, where = properties[key], _join(path, key)
                if spelled and "default" in child:
                    default = child["default"]
                    if "properties" in child and isinstance(default, dict) and isinstance(value[key], dict):
                        # an object's own default (usually {}) sets some of its keys; its properties' defaults
                        # are compared one by one below
                        problems.extend(_default_differences(
                            default, {k: value[key][k] for k in default if k in value[key]}, where))
                    else:
                        problems.extend(_default_differences(default, value[key], where))
                walk(value[key], child, where, spelled)
        extra = sub.get("additionalProperties")
        if isinstance(extra, dict) and isinstance(value, dict):
            for key in sorted(value.keys() - (properties or {}).keys()):
                walk(value[key], extra, _join(path, key), spelled=False)
        if isinstance(sub.get("items"), dict) and isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, sub["items"], _join(path, index), spelled=False)

    walk(config, schema, "", spelled=True)
    return problems


def test_config_yaml_and_schema_are_in_step(default_config):
    """config.yaml states every key the schema has, with the schema's default, down to every sub-schema."""
    schema = load_schema()
    assert config_drift(default_config, schema) == []
    # so an empty study file gives the default study
    assert fill_defaults({}, schema) == fill_defaults(default_config, schema)


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

    from cycleio.benchmarks.specs import FieldIOSpec, IOPattern, MetadataPattern
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
    tier = fill_defaults({"tiers": {"bb": {"kind": "posix", "path": "/x"}}}, load_schema())["tiers"]["bb"]
    assert Tier(name="bb", **tier) == Tier(name="bb", kind="posix", path="/x")
    plan = BenchmarkPlan.from_config(with_changes(config, benchmarks__enabled=False))
    assert plan.specs[("io", "easy")][0] == asdict(IOPattern(name="easy"))
    assert plan.specs[("metadata", "easy")][0] == asdict(MetadataPattern(name="easy"))
    assert plan.specs[("fieldio", "fields")][0] == asdict(FieldIOSpec())


def _without(tree: dict, path: tuple) -> dict:
    out = copy.deepcopy(tree)
    target = out
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return out


def _key_paths(tree, path=()):
    for key, value in tree.items():
        yield (*path, key)
        if isinstance(value, dict):
            yield from _key_paths(value, (*path, key))


def test_the_drift_check_fails_on_every_key_deleted_from_config_yaml(default_config):
    """Deleting any key of config.yaml, of a fixed object, of a named entry (tiers, patterns, metadata) or a whole
    entry, is drift the check names (the check this one replaces missed every key below the top level)."""
    schema = load_schema()
    paths = list(_key_paths(default_config))
    assert ("tiers", "shm", "shared") in paths and ("benchmarks", "metadata", "hard", "file_size") in paths
    for path in paths:
        problems = config_drift(_without(default_config, path), schema)
        assert any(p.startswith(".".join(path) + ":") for p in problems), (path, problems)


def _schema_at(schema: dict, path: str) -> dict:
    for part in path.split("."):
        schema = schema["additionalProperties"] if part == "<name>" else schema["properties"][part]
    return schema


@pytest.mark.parametrize("mutate, expected", [
    # config.yaml has a key the schema does not know, in a fixed object and in a named entry
    (lambda c, s: c["staging"].update(threads=2), "staging.threads: in config.yaml, not in the schema"),
    (lambda c, s: c["tiers"]["shm"].update(colour="red"), "tiers.shm.colour: in config.yaml, not in the schema"),
    # the schema has a key config.yaml lacks
    (lambda c, s: _schema_at(s, "write_component")["properties"].update(
        spare_ranks={"type": "integer", "description": "x", "default": 0}),
     "write_component.spare_ranks: in the schema, not in config.yaml"),
    # a default that differs from config.yaml, at the top, nested, in a named map and in an object's own default
    (lambda c, s: _schema_at(s, "forecast.iau").update(default=False),
     "forecast.iau: the schema's default False differs from config.yaml's True"),
    (lambda c, s: _schema_at(s, "benchmarks.fieldio.field_size").update(default="2m"),
     "benchmarks.fieldio.field_size: the schema's default '2m'"),
    (lambda c, s: _schema_at(s, "benchmarks.patterns")["default"]["hard"].update(segments=10),
     "benchmarks.patterns.hard.segments: the schema's default 10 differs from config.yaml's 1000"),
    (lambda c, s: _schema_at(s, "tiers")["default"]["shm"].update(path="/dev/shm/x"),
     "tiers.shm.path: the schema's default '/dev/shm/x' differs"),
    (lambda c, s: _schema_at(s, "cycles").update(default={"keep": 3}), "cycles.keep: the schema's default 3 differs"),
    (lambda c, s: c["cycles"].update(interval_hours=6.0), "cycles.interval_hours: the schema's default 6 differs"),
    # defaults inside the named entries' item schemas, which no config.yaml value spells
    (lambda c, s: _schema_at(s, "tiers.<name>.shared").update(default="yes"),
     "tiers.<name>.shared: the schema's default 'yes' does not fit its own schema"),
    (lambda c, s: _schema_at(s, "benchmarks.patterns.<name>.reorder").update(default="sideways"),
     "benchmarks.patterns.<name>.reorder: the schema's default 'sideways' does not fit"),
    (lambda c, s: _schema_at(s, "benchmarks.metadata.<name>.files_per_task").update(default=0),
     "benchmarks.metadata.<name>.files_per_task: the schema's default 0 does not fit"),
    # an item schema that lost a key config.yaml's entries use
    (lambda c, s: _schema_at(s, "benchmarks.metadata.<name>")["properties"].pop("unique_dir"),
     "benchmarks.metadata.easy.unique_dir: in config.yaml, not in the schema"),
    # list items: in config.yaml and in a default
    (lambda c, s: c.update(write_strategies=["serial", "pnetcdf"]), "config.yaml: write_strategies.1: 'pnetcdf'"),
    (lambda c, s: _schema_at(s, "benchmarks.fieldio.layouts").update(default=["file_per_field", "tar"]),
     "benchmarks.fieldio.layouts: the schema's default ['file_per_field', 'tar'] does not fit"),
])
def test_the_drift_check_fails_on_a_mutated_copy(default_config, mutate, expected):
    config, schema = copy.deepcopy(default_config), copy.deepcopy(load_schema())
    assert config_drift(config, schema) == []
    mutate(config, schema)
    problems = config_drift(config, schema)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_schema_key_has_description_and_default():
    """Down every sub-schema, named entries' item schemas included; a required key needs no default."""
    checked = set()
    for path, sub in _sub_schemas(load_schema()):
        for name, child in sub.get("properties", {}).items():
            where = _join(path, name)
            assert child.get("description"), f"{where} has no description"
            assert "default" in child or name in sub.get("required", ()), f"{where} has no default"
            checked.add(where)
    assert {"cycles.keep", "tiers.<name>.stripe_size", "benchmarks.patterns.<name>.reorder",
            "benchmarks.metadata.<name>.unique_dir", "benchmarks.replay.max_files"} <= checked


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
