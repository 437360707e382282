"""Study configuration: validation with messages that name the key, and the arms of a study.

The JSON Schema (config.schema.yaml, package data beside config/schema.py) gives every key its type, description and
default, and validation fills the defaults in; this module adds the checks that span keys (end after
start, tier names that exist). workflow.study.load_study adds the checks that need the layers above
(the benchmark plan's, the faults' against the study's jobs), all before any job.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from .calendar import cycles as calendar_cycles
from .calendar import is_archive_job, is_half_cycle
from .forecast import Compression, ForecastSettings, cycle_steps
from .crosschecks import check_across_keys, sweep_replay_ranks
from .keys import DARSHAN_INPUTS, DARSHAN_PREFIX, ConfigError, persistent_tiers
from .schema import schema_default, study_schema
from .sizes import parse_size
from .tierspec import Tier
from ..faults import arm_faults, faults_for_job

if TYPE_CHECKING:  # jsonschema is imported where a config is validated, not by every job that reads settings
    import jsonschema


def read_config_file(path: str | Path) -> dict:
    """One study config file as a mapping; ConfigError naming the file (and line) for anything else."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError as err:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {err.strerror}") from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        context, start = getattr(err, "context", None), getattr(err, "context_mark", None)
        if context and start is not None:  # e.g. an unclosed quote: where the scalar began
            problem += f" ({context} at line {start.line + 1}, column {start.column + 1})"
        raise ConfigError(f"config file {str(path)!r}{where}: not valid YAML: {problem}") from None
    if config is None:
        raise ConfigError(f"config file {str(path)!r} is empty; expected config keys (key: value), "
                          "e.g. study: my_study")
    if not isinstance(config, dict):
        raise ConfigError(f"config file {str(path)!r} holds a {type(config).__name__} at the top level; "
                          "expected config keys (key: value), e.g. study: my_study")
    return config


def _key(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    schema = error.schema
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        hints = []
        for name in extra:
            close = difflib.get_close_matches(name, allowed, n=1)
            hints.append(f"'{name}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
        where = "at the top level" if key == "(top level)" else f"in '{key}'"
        return f"unknown key {', '.join(hints)} {where}; expected keys: {', '.join(allowed)}"
    if error.validator == "type":
        expected = schema["type"] if isinstance(schema["type"], str) else " or ".join(schema["type"])
        return f"config key '{key}': expected {expected}, got {error.instance!r}"
    if error.validator == "enum":
        return f"config key '{key}': {error.instance!r} is not allowed; expected one of: {', '.join(map(str, schema['enum']))}"
    if error.validator == "required":
        return f"config key '{key}': {error.message}"
    if error.validator == "pattern":
        return f"config key '{key}': {error.instance!r} does not match the expected form {schema['pattern']!r}"
    description = schema.get("description", "").strip()
    return f"config key '{key}': {error.message}" + (f" ({description})" if description else "")


@functools.cache
def default_filling_validator():
    """Draft 2020-12's validator whose ``properties`` keyword first sets each absent property that has a default,
    then validates (the jsonschema FAQ's extension): validating a config fills in every default, in objects
    left out entirely and in named entries (tiers, patterns) too."""
    import jsonschema

    validate_properties = jsonschema.Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if validator.is_type(instance, "object"):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {"properties": set_defaults})


_YAML_TYPES = {"boolean": (bool,), "integer": (int,), "number": (int, float), "null": (type(None),),
               "array": (list,), "object": (dict,)}


def _typed_scalars(value, schema: dict):
    """``value`` with strings that stand for another type the schema expects read as YAML reads them.

    Snakemake reads nested ``--config`` values (``staging={drop_caches: false}``) with YAML's base
    loader, which keeps every scalar a string; the same text in a config file is a boolean.
    """
    if isinstance(value, dict):
        properties, other = schema.get("properties", {}), schema.get("additionalProperties")
        return {key: _typed_scalars(item, properties.get(key, other if isinstance(other, dict) else {}))
                for key, item in value.items()}
    if isinstance(value, list):
        return [_typed_scalars(item, schema.get("items", {})) for item in value]
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types or []
    if isinstance(value, str) and types and "string" not in types:
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if any(isinstance(parsed, _YAML_TYPES.get(name, ())) and not (name in ("integer", "number") and
                                                                       isinstance(parsed, bool)) for name in types):
            return parsed
    return value


def _fill_and_check(config: dict, schema: dict) -> tuple[dict, list[jsonschema.ValidationError]]:
    """A copy of config with the schema's defaults filled in, and its schema errors, outermost key first."""
    filled = _typed_scalars(copy.deepcopy(config), schema)
    errors = sorted(default_filling_validator()(schema).iter_errors(filled),
                    key=lambda e: (len(e.absolute_path), _key(e.absolute_path)))
    return filled, errors


# The write strategies that write shared files through MPI-IO and run on the parallel-netCDF stack: the names
# of those with ``shared_file`` in the registry (surrogates.forecast.strategies; tests/test_registries.py holds
# them equal), so that config reads them without importing the strategies.
SHARED_FILE_STRATEGIES = ("parallel", "quilt_parallel")


def validate_config(config: dict, schema: dict | None = None) -> dict:
    """Validate and fill defaults; raise ConfigError naming the first problem (by key path).

    The keys' own checks: workflow.study.load_study adds those of the benchmark plan and the faults."""
    schema = study_schema() if schema is None else schema
    filled, errors = _fill_and_check(config, schema)
    if errors:
        raise ConfigError(_describe(errors[0]))
    check_across_keys(filled)
    return filled


def default_compression(resolution: str, zlib_level: int | None, quantize_nsd: int | None) -> Compression:
    """The global workflow's choice: uncompressed below C384; zlib 1 and 5 kept bits from C384."""
    large = int(resolution[1:]) >= 384
    return Compression(
        zlib_level=(1 if large else 0) if zlib_level is None else zlib_level,
        quantize_nsd=(5 if large else 0) if quantize_nsd is None else quantize_nsd,
    )


# The defaults of the settings classes below are the schema's: they serve objects built without a config
# (tests) and a job's settings that leave out what the job does not read (ArmSettings.from_json).
@dataclass(frozen=True)
class StagingSettings:
    method: str = schema_default("staging.method")
    streams: int = schema_default("staging.streams")
    direct_io_verify: bool = schema_default("staging.direct_io_verify")
    drop_caches: bool = schema_default("staging.drop_caches")
    reads_from_storage: bool = schema_default("staging.reads_from_storage")


# The settings each kind of an arm's jobs reads; the rules pass a job only these (ArmSettings.job_json),
# so that a changed setting marks only the jobs that read it for a rerun (Snakemake's params trigger;
# the jobs after them follow through their inputs).
# Every job: who and where it is, the grid and seed of its data, the write strategy its records carry.
# and the Darshan library its processes run under (only when set: turning it on reruns every job, off none).
_EVERY_JOB = ("study", "arm", "start", "seed", "resolution", "levels", "persistent", "strategy", "darshan_library")
# A step's job: the files it writes (compression) and their inventory (forecast), staging, its compute stand-in,
# and the faults aimed at it (fault injection; only its own, see ArmSettings.job_settings).
# and, in a paired cycle, its paired replay (see ArmSettings.job_settings).
_STEP = (*_EVERY_JOB, "compression", "forecast", "scratch", "staging", "granularity", "compute_kind", "faults",
         "replay")
JOB_SETTINGS = {
    "coldstart": (*_EVERY_JOB, "compression"),
    "dump": (*_EVERY_JOB, "compression", "forecast"),
    "cleanup": _EVERY_JOB,
    "step": (*_STEP, "step_compute_seconds"),  # prep, anal, post, efcsNN: the compute of its own step only
    # the forecast is an MPI program: its launcher, ranks and writer groups, its compute per hour
    "fcst": (*_STEP, "compute_seconds_per_hour", "launcher", "parallel_stack", "write_component"),
    "cycle": (*_STEP, "step_compute_seconds", "compute_seconds_per_hour", "launcher", "parallel_stack",
              "write_component"),
    "inventory": (*_EVERY_JOB, "compression", "forecast", "granularity", "darshan"),  # the expected-files table
    # the archive job: which files its tarballs hold (forecast), their expected sizes, the archive's settings
    "arch": (*_EVERY_JOB, "compression", "forecast", "archive", "replay"),
    # a replay job from a Darshan log (darshan_<name>; darshan_inputs lays out every job's input files): its log
    # and request (its own only), staging, the MPI launcher, and in a paired cycle its paired replay
    "darshan": (*_EVERY_JOB, "scratch", "staging", "launcher", "darshan", "replay"),
}


@dataclass
class ArmSettings:
    """Everything one arm's jobs need; rules pass each job its part as JSON (:meth:`job_json`)."""

    study: str
    arm: str
    start: str
    seed: int
    resolution: str
    levels: int
    persistent: Tier
    scratch: Tier | None = None  # None in the settings of jobs that use no scratch (cold start, dumps, cleanup)
    strategy: str = schema_default("write_strategies")[0]
    forecast: ForecastSettings = field(default_factory=ForecastSettings)
    compression: Compression = field(default_factory=Compression)
    compute_seconds_per_hour: float = schema_default("forecast.compute_seconds_per_hour")
    compute_kind: str = schema_default("forecast.compute_kind")
    step_compute_seconds: dict = field(default_factory=dict)
    staging: StagingSettings = field(default_factory=StagingSettings)
    launcher: str = schema_default("launcher")
    # the shared-file strategies' launcher and Python (config parallel_stack; empty for the other strategies, whose
    # jobs then do not rerun when it changes); launcher.py fills in the schema's defaults
    parallel_stack: dict = field(default_factory=dict)
    write_component: dict = field(default_factory=dict)  # RankLayout.from_settings fills in the schema's defaults
    # stage per step, or per cycle (one job runs the whole cycle on scratch)
    granularity: str = schema_default("staging.granularity")[0]
    faults: dict = field(default_factory=dict)  # fault injection (config `faults`): the entries aimed at this arm
    # the paired replay (benchmarks.paired.PairedReplay's fields), for the jobs of ``paired_cycles`` only
    replay: dict = field(default_factory=dict)
    paired_cycles: tuple = ()
    # the archive job's settings (archive_settings: the tier as a dict, limits in bytes); empty when archive is off
    archive: dict = field(default_factory=dict)
    # config ``darshan``: {only, jobs: {name: {log, after, ranks, scale, timing, layer, path}}} (``path``: the log
    # found, workflow.study fills it in); a replay job's settings hold its own job only
    darshan: dict = field(default_factory=dict)
    darshan_library: str = ""  # config instruments.darshan: every job's processes run under it (darshan.runtime)
    # config ``job_layout``: step -> {nodes, tasks_per_node} of its batch job (workflow.slurm.job_layout); read when
    # the jobs are submitted, not by the jobs (they find their nodes in the allocation), so no job's params hold it
    job_layout: dict = field(default_factory=dict)

    @property
    def staged(self) -> bool:
        return self.scratch is not None and self.scratch.name != self.persistent.name

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    def job_settings(self, job: str, cycle: str | None = None) -> dict:
        """The settings one job of the arm reads (``job``: a step, ``cycle``, ``coldstart``, ``dump``,
        ``cleanup`` or ``inventory``); :meth:`from_json` gives the others their defaults. Of the arm's
        faults (fault injection), a step's or cycle's job gets those aimed at it in ``cycle``."""
        kind = (job if job in JOB_SETTINGS else "darshan" if job.startswith(DARSHAN_PREFIX)
                else "arch" if is_archive_job(job) else "step")
        settings = {key: value for key, value in asdict(self).items() if key in JOB_SETTINGS[kind]}
        if kind == "darshan" and job != DARSHAN_INPUTS:
            name = job.removeprefix(DARSHAN_PREFIX)
            settings["darshan"] = {**self.darshan, "jobs": {name: self.darshan["jobs"][name]}}
        if kind == "step":  # its own step's compute stand-in
            own = self.step_compute_seconds
            settings["step_compute_seconds"] = {job: own[job]} if job in own else {}
        if "replay" in settings and (cycle not in self.paired_cycles or job.startswith("earc")):  # arch's, not earc's
            settings["replay"] = {}
        if not settings.get("darshan_library"):
            settings.pop("darshan_library", None)
        if "faults" in settings:
            steps = cycle_steps(cycle, self.start, self.forecast) if job == "cycle" and cycle else (job,)
            settings["faults"] = faults_for_job(self.faults, job, steps, cycle, self.staged)
        return settings

    def job_json(self, job: str, cycle: str | None = None) -> str:
        """What a rule passes its job as ``params``: :meth:`job_settings` as JSON."""
        return json.dumps(self.job_settings(job, cycle), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "ArmSettings":
        """The settings from :meth:`to_json` or :meth:`job_json` (absent keys take their defaults)."""
        raw = json.loads(text)
        raw["persistent"] = Tier(**raw["persistent"])
        if "scratch" in raw:
            raw["scratch"] = Tier(**raw["scratch"])
        if "forecast" in raw:
            forecast = raw["forecast"]
            forecast["restart_hours"] = tuple(forecast["restart_hours"])
            forecast["product_grids"] = tuple(forecast["product_grids"])
            raw["forecast"] = ForecastSettings(**forecast)
        if "compression" in raw:
            raw["compression"] = Compression(**raw["compression"])
        if "staging" in raw:
            raw["staging"] = StagingSettings(**raw["staging"])
        if "paired_cycles" in raw:
            raw["paired_cycles"] = tuple(raw["paired_cycles"])
        settings = cls(**raw)
        object.__setattr__(settings, "_given", json.loads(text))  # not a field: no job reads it as a setting
        return settings

    @property
    def given(self) -> dict | None:
        """The settings as a job was given them (:meth:`from_json`'s JSON, its rule's params), None for settings
        built otherwise: its manifest keeps them (runner.manifest.provenance), and workflow.rerun compares them."""
        return self.__dict__.get("_given")


@dataclass
class Study:
    name: str
    cycles: list[str]
    arms: dict[str, ArmSettings]
    keep: int | None = None  # cycles.keep: cycles of data kept on the persistent tier behind the newest
    # the replay jobs' files by job name (darshan.jobfiles.ReplayFiles), filled by workflow.study from their logs
    darshan_files: dict = field(default_factory=dict)


def _tier(name: str, spec: dict) -> Tier:
    return Tier(name=name, **spec)


def arm_axes(scratch_tiers: list[str], persistent: str | list[str], granularities: list[str],
             strategies: list[str]) -> list[tuple[str, str, str, str, str]]:
    """(name, persistent tier, scratch tier, granularity, write strategy) of every arm.

    The no-staging baseline has no granularity to sweep, and with several persistent tiers a
    scratch tier that is one of them pairs only with itself. A name carries only the axes that
    vary, the persistent tier first.
    """
    persistents = [persistent] if isinstance(persistent, str) else list(persistent)
    axes = []
    for home in persistents:
        for scratch in scratch_tiers:
            if scratch in persistents and scratch != home:
                continue
            baseline = scratch == home
            for granularity in ([granularities[0]] if baseline else granularities):
                for strategy in strategies:
                    parts = [home] if len(persistents) > 1 else []
                    if not (baseline and parts):
                        parts.append(scratch)
                    if len(granularities) > 1 and not baseline:
                        parts.append(f"per_{granularity}")
                    if len(strategies) > 1:
                        parts.append(strategy)
                    axes.append(("_".join(parts), home, scratch, "step" if baseline else granularity, strategy))
    return axes


def paired_replay(config: dict, cycles: list[str]) -> tuple[dict, tuple]:
    """The paired replay's settings (benchmarks.paired.PairedReplay's fields) and the cycles whose jobs run
    it: the last ``benchmarks.replay.cycles`` of the study; none when the benchmarks or the replay are off.

    Writes repeat ``repetitions`` times in every paired job (each job places its step between the two page states,
    benchmarks.paired). A read's band needs ``repetitions`` reads in all, and a read has no page state of its own
    to place, so the full paired cycles share them: each job reads ceil(repetitions / full paired cycles) times."""
    bench = config["benchmarks"]
    cfg = bench["replay"]
    count = len(cycles) if cfg["cycles"] == "all" else cfg["cycles"]
    if not (bench["enabled"] and cfg["enabled"] and count):
        return {}, ()
    transfer = cfg["transfer_size"]
    paired = tuple(cycles[-count:])
    repetitions = cfg["repetitions"] or max(2, bench["repetitions"])
    full = sum(not is_half_cycle(cycle, cycles[0]) for cycle in paired)
    return ({"repetitions": repetitions, "read_repetitions": -(-repetitions // max(1, full)),
             "transfer_size_bytes": 0 if transfer == "auto" else parse_size(transfer, "benchmarks.replay.transfer_size"),
             "max_files": cfg["max_files"], "fio_path": bench["fio_path"],
             "min_bytes": parse_size(cfg["min_bytes"], "benchmarks.replay.min_bytes"), "min_seconds": cfg["min_seconds"]},
            paired)


# global-workflow's NMEM_EARCGRP (parm/config/gfs/config.earc): ensemble members per earc job by the ensemble's
# resolution; cycleio's members run at the study's resolution (below C48 as C48, above C1152 as C1152).
EARC_GROUP_BY_RESOLUTION = ((96, 80), (192, 20), (768, 10), (1152, 4))


def earc_group_size(resolution: str) -> int:
    """NMEM_EARCGRP at a resolution ``CNNN``: members per ensemble archive job."""
    number = int(resolution[1:])
    return next((size for upto, size in EARC_GROUP_BY_RESOLUTION if number <= upto), EARC_GROUP_BY_RESOLUTION[-1][1])


def archive_settings(config: dict) -> dict:
    """What an arm's archive jobs read of config ``archive`` (its tier's spec, the limits in bytes, the earc jobs'
    group size); {} when off."""
    cfg = config["archive"]
    if not cfg["enabled"]:
        return {}
    name = cfg["tier"]
    return {"tier": {"name": name, **config["tiers"][name]}, "tarballs": list(cfg["tarballs"]),
            "members_per_group": cfg["members_per_group"] or earc_group_size(config["resolution"]),
            "command": cfg["command"], "timeout_s": cfg["timeout_s"], "split": cfg["split"],
            "remote": cfg["remote"], "list_command": cfg["list_command"], "rename_command": cfg["rename_command"],
            "index_suffix": cfg["index_suffix"],
            "max_member_bytes": parse_size(cfg["max_member_bytes"], "archive.max_member_bytes"),
            "max_tarball_bytes": parse_size(cfg["max_tarball_bytes"], "archive.max_tarball_bytes")}


def build_study(config: dict) -> Study:
    """The study's cycles and arms from a validated config."""
    cyc, fc = config["cycles"], config["forecast"]
    start = str(cyc["start"])
    forecast = ForecastSettings(
        forecast_hours=fc["forecast_hours"],
        history_interval_hours=fc["history_interval_hours"],
        restart_hours=tuple(sorted(fc["restart_hours"])),
        interval_hours=cyc["interval_hours"],
        obs_scale=config["obs_scale"] or (int(config["resolution"][1:]) / 768) ** 2,
        iau=fc["iau"],
        pgrb2_fields=config["post"]["pgrb2_fields"],
        sflux_fields=config["post"]["sflux_fields"],
        members=config["ensemble"]["members"],
        members_per_job=config["ensemble"]["members_per_job"],
        product_grids=tuple(config["post"]["grids"] or (("0p25", "1p00") if int(config["resolution"][1:]) >= 384 else ("1p00",))),
    )
    staging = {key: value for key, value in config["staging"].items() if key != "granularity"}
    granularities = config["staging"]["granularity"]
    cycles = calendar_cycles(start, cyc["end"], cyc["interval_hours"])
    replay, paired = paired_replay(config, cycles)
    arms = {}
    axes = arm_axes(config["scratch_tiers"], persistent_tiers(config), granularities, config["write_strategies"])
    for name, persistent_name, scratch_name, granularity, strategy in axes:
        arms[name] = ArmSettings(
            study=config["study"],
            arm=name,
            start=start,
            seed=config["seed"],
            resolution=config["resolution"],
            levels=config["levels"],
            persistent=_tier(persistent_name, config["tiers"][persistent_name]),
            scratch=_tier(scratch_name, config["tiers"][scratch_name]),
            forecast=forecast,
            compression=default_compression(config["resolution"], fc["zlib_level"], fc["quantize_nsd"]),
            compute_seconds_per_hour=fc["compute_seconds_per_hour"],
            compute_kind=fc["compute_kind"],
            step_compute_seconds=dict(config["step_compute_seconds"]),
            staging=StagingSettings(**staging),
            granularity=granularity,
            strategy=strategy,
            launcher=config["launcher"],
            parallel_stack=dict(config["parallel_stack"]) if strategy in SHARED_FILE_STRATEGIES else {},
            write_component=dict(config["write_component"]),
            faults=arm_faults(config["faults"], name),
            replay=replay,
            paired_cycles=paired,
            archive=archive_settings(config),
            darshan={"only": config["darshan"]["only"],
                     "jobs": sweep_replay_ranks(copy.deepcopy(config["darshan"]["jobs"]))},
            darshan_library=config["instruments"]["darshan"],
            job_layout={step: dict(entry) for step, entry in config["job_layout"].items()},
        )
    return Study(config["study"], cycles, arms, cyc["keep"])
