"""The config schema (config.schema, the one place defaults are written): every key described and defaulted, and
config/config.yaml stating every key with the schema's default, down to every sub-schema (the drift check, and that
it fails on every kind of drift). Validation filling the defaults in is test_settings'."""

import copy

import jsonschema
import pytest

from cycleio.config.schema import load_schema
from cycleio.config.settings import validate_config


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
    assert validate_config({}, schema) == validate_config(default_config, schema)


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


def test_an_install_without_the_schema_says_so(tmp_path, monkeypatch):
    from cycleio.config import schema

    monkeypatch.setattr(schema, "SCHEMA", tmp_path / "config.schema.yaml")
    with pytest.raises(FileNotFoundError, match="installed without its data"):
        load_schema()
