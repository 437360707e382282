"""Every name a config key chooses from is a registry in the code: the schema's enums are its keys."""

from cycleio.benchmarks import fieldio
from cycleio.benchmarks.tools import CHOICES, ior
from cycleio.config.calendar import FULL_CYCLE_STEPS
from cycleio.config.schema import load_schema
from cycleio.storage import copytools
from cycleio.storage.tiers import TIER_KINDS
from cycleio.surrogates.compute import COMPUTE_KINDS
from cycleio.surrogates.forecast.strategies import STRATEGIES
from cycleio.surrogates.grid import RESOLUTIONS
from cycleio.surrogates.inventory import STEPS
from cycleio.surrogates.kinds import PRODUCT_GRIDS


def test_schema_enums_are_the_registries_keys():
    schema = load_schema()["properties"]
    bench = schema["benchmarks"]["properties"]
    pattern = bench["patterns"]["additionalProperties"]["properties"]
    choices = {
        "resolution": (schema["resolution"]["enum"], RESOLUTIONS),
        "forecast.compute_kind": (schema["forecast"]["properties"]["compute_kind"]["enum"], COMPUTE_KINDS),
        "post.grids": (schema["post"]["properties"]["grids"]["items"]["enum"], PRODUCT_GRIDS),
        "tiers.<name>.kind": (schema["tiers"]["additionalProperties"]["properties"]["kind"]["enum"], TIER_KINDS),
        "benchmarks.tool": (bench["tool"]["enum"], CHOICES),
        "benchmarks.patterns.<name>.api": (pattern["api"]["enum"], ior.APIS),
        "benchmarks.fieldio.patterns": (bench["fieldio"]["properties"]["patterns"]["items"]["enum"], fieldio.PATTERNS),
        "benchmarks.fieldio.layouts": (bench["fieldio"]["properties"]["layouts"]["items"]["enum"], fieldio.STORES),
        "staging.method": (schema["staging"]["properties"]["method"]["enum"], copytools.METHODS),
        "write_strategies": (schema["write_strategies"]["items"]["enum"], STRATEGIES),
    }
    for key, (enum, registry) in choices.items():
        assert set(map(str, enum)) == set(map(str, registry)), key  # YAML may read the pattern "1" as 1


def test_config_names_the_shared_file_strategies_of_the_registry():
    from cycleio.config.settings import SHARED_FILE_STRATEGIES

    assert SHARED_FILE_STRATEGIES == tuple(name for name, strategy in STRATEGIES.items() if strategy.shared_file)


def test_every_step_of_a_cycle_has_its_files_defined():
    assert set(STEPS) == {*FULL_CYCLE_STEPS, "dump"}


def test_every_file_the_inventory_names_has_a_kind_with_a_writer_and_a_size():
    from cycleio.surrogates import writers
    from cycleio.surrogates.grid import Grid
    from cycleio.config.forecast import ForecastSettings
    from cycleio.surrogates.inventory import coldstart_files, step_io
    from cycleio.surrogates.kinds import FILE_KINDS, expected_bytes

    forecast = ForecastSettings()
    named = {spec.kind for spec in coldstart_files("2026010100")}
    for step in STEPS:
        io = step_io(step, "2026010106", "2026010100", forecast)
        named |= {spec.kind for spec in io.reads + io.writes}
    assert named <= FILE_KINDS and set(writers.WRITERS) == FILE_KINDS
    for spec in [*coldstart_files("2026010100"), *step_io("post", "2026010106", "2026010100", forecast).writes]:
        assert expected_bytes(spec, Grid("C12", 4)) > 0


def test_the_replay_jobs_input_job_is_an_arrival():
    """config.keys.DARSHAN_INPUTS (the job laying out the replay jobs' inputs) is one of records.ARRIVALS, which no
    table counts as a cycle's I/O (records.py sits below config and cannot import it)."""
    from cycleio.config.keys import DARSHAN_INPUTS
    from cycleio.records import ARRIVALS

    assert DARSHAN_INPUTS in ARRIVALS
