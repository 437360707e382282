"""The config's checks that span keys (cycles, tiers, sweeps, archive, replay jobs, the launcher), after the schema
has checked each key alone (config.settings.validate_config runs them; workflow.study.load_study adds those that need
the layers above). Each names the key and what is expected."""

from __future__ import annotations

import os
import string

from .calendar import parse_cycle
from .calendar import FULL_CYCLE_STEPS
from .keys import DARSHAN_INPUTS, DARSHAN_PREFIX, ConfigError, persistent_tiers
from .sizes import parse_size
from .tierspec import JOB_TIME_VARIABLES, TierError, expand_tier_path
from ..process import launcher_argv


def check_across_keys(config: dict) -> None:
    """Every check of this module, in the order a reader meets the keys."""
    cyc = config["cycles"]
    for key in ("start", "end"):
        try:
            parse_cycle(cyc[key])
        except ValueError as err:
            raise ConfigError(f"config key 'cycles.{key}': {err}") from None
    if parse_cycle(cyc["end"]) < parse_cycle(cyc["start"]):
        raise ConfigError(f"config key 'cycles.end': {cyc['end']} is before cycles.start {cyc['start']}")
    tiers = config["tiers"]
    names = ", ".join(sorted(tiers))
    swept = isinstance(config["persistent_tier"], list)
    for index, persistent in enumerate(persistent_tiers(config)):
        key = f"persistent_tier[{index}]" if swept else "persistent_tier"
        if persistent not in tiers:
            raise ConfigError(f"config key '{key}': {persistent!r} is not a tier; expected one of: {names}")
        if not tiers[persistent]["persistent"]:
            raise ConfigError(
                f"config key '{key}': tier {persistent!r} has persistent: false; "
                "the persistent role needs a tier whose data outlive the job"
            )
    for index, name in enumerate(config["scratch_tiers"]):
        if name not in tiers:
            raise ConfigError(f"config key 'scratch_tiers[{index}]': {name!r} is not a tier; expected one of: {names}")
    for name in config["plan"]["units"]:
        if name not in tiers:
            raise ConfigError(f"config key 'plan.units.{name}': {name!r} is not a tier; expected one of: {names}")
    for name, tier in tiers.items():
        try:
            expand_tier_path(name, tier["path"], config["study"], tolerate=JOB_TIME_VARIABLES)
        except TierError as err:
            raise ConfigError(f"config key 'tiers.{name}.path': {err}") from None
    _check_launcher(config["launcher"])
    _check_archive(config)
    _check_darshan(config)
    _check_instruments(config)
    fc = config["forecast"]
    if cyc["interval_hours"] not in fc["restart_hours"]:
        raise ConfigError(
            f"config key 'forecast.restart_hours': {fc['restart_hours']} must include cycles.interval_hours "
            f"({cyc['interval_hours']}), the restart the next cycle's forecast starts from"
        )
    if max(fc["restart_hours"]) > fc["forecast_hours"]:
        raise ConfigError(
            f"config key 'forecast.restart_hours': {max(fc['restart_hours'])} is beyond forecast.forecast_hours ({fc['forecast_hours']})"
        )
    if fc["forecast_hours"] % fc["history_interval_hours"]:
        raise ConfigError(
            f"config key 'forecast.history_interval_hours': {fc['history_interval_hours']} does not divide "
            f"forecast.forecast_hours ({fc['forecast_hours']})"
        )
    off_cadence = [h for h in fc["restart_hours"] if h % fc["history_interval_hours"]]
    if off_cadence:  # the forecast writes restarts at its output hours only: the next cycle would miss them
        raise ConfigError(
            f"config key 'forecast.restart_hours': {off_cadence} are not output hours (multiples of "
            f"forecast.history_interval_hours, {fc['history_interval_hours']}); with cycles.interval_hours "
            f"{cyc['interval_hours']} the interval must be one of them too"
        )


def _check_archive(config: dict) -> None:
    """The archive's tier exists and is one of kind archive, its command names what it writes, its limits are sizes."""
    cfg, tiers = config["archive"], config["tiers"]
    for key in ("max_member_bytes", "max_tarball_bytes"):
        parse_size(cfg[key], f"archive.{key}")
    if not cfg["enabled"]:
        return
    name = cfg["tier"]
    if name not in tiers:
        raise ConfigError(f"config key 'archive.tier': {name!r} is not a tier; expected one of: {', '.join(sorted(tiers))}"
                          " (add e.g. archive: {kind: archive, path: results/tiers/archive} under tiers)")
    if tiers[name]["kind"] != "archive":
        raise ConfigError(f"config key 'archive.tier': tier {name!r} has kind {tiers[name]['kind']}; "
                          "the archive's tier needs kind: archive")
    used = set(persistent_tiers(config)) | set(config["scratch_tiers"])
    if name in used:
        raise ConfigError(f"config key 'archive.tier': tier {name!r} is also a persistent or scratch tier of the arms; "
                          "the archive needs a tier of its own")
    if cfg["command"].strip():
        _check_template("command", cfg["command"], ("tarball", "list"), "htar -cvf {tarball} -L {list}")
    elif cfg["remote"]:
        raise ConfigError("config key 'archive.remote': true, but archive.command is empty; a remote archive is "
                          "written only by a site's command, e.g. 'htar -P -cvf {tarball} -L {list}'")
    _check_template("list_command", cfg["list_command"], ("tarball",), "htar -tvf {tarball}")
    _check_template("rename_command", cfg["rename_command"], ("source", "target"), "hsi mv {source} {target}")


def _check_template(key: str, template: str, required: tuple[str, ...], example: str) -> None:
    """An archive command names each of its placeholders and no other (storage.remotearchive fills them)."""
    takes = " and ".join("{" + name + "}" for name in required)
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as err:
        raise ConfigError(f"config key 'archive.{key}': {template!r} is not a valid template ({err}); "
                          f"expected e.g. {example!r}") from None
    unknown = sorted(fields - set(required))
    if not set(required) <= fields:
        raise ConfigError(f"config key 'archive.{key}': {template!r} must name {takes}, e.g. {example!r}")
    if unknown:
        raise ConfigError(f"config key 'archive.{key}': {template!r} names {', '.join('{' + n + '}' for n in unknown)}, "
                          f"which it does not know; it takes {takes}, e.g. {example!r}")


def sweep_replay_ranks(jobs: dict) -> dict:
    """darshan.jobs with each job whose ``ranks`` is a list as one job per count, ``<name>_n<ranks>`` (a name
    no user can give: the schema allows letters and digits only); the others as they are."""
    swept = {}
    for name, job in jobs.items():
        counts = job["ranks"] if isinstance(job["ranks"], list) else None
        if counts is None:
            swept[name] = job
            continue
        for count in counts:
            swept[f"{name}_n{count}"] = {**job, "ranks": count}
    return swept


def _check_darshan(config: dict) -> None:
    """The replay jobs' names and places in the cycle (each count of a list of ranks a job of its own: the study's
    arms hold them swept, build_study); a cycle of replay jobs only has no GDAS step to sweep or archive. Their logs are
    checked by workflow.darshanjobs (they are read with pydarshan)."""
    cfg = config["darshan"]
    for name, job in sweep_replay_ranks(cfg["jobs"]).items():
        if DARSHAN_PREFIX + name == DARSHAN_INPUTS:
            raise ConfigError(f"config key 'darshan.jobs.{name}': the name {name!r} is taken (job {DARSHAN_INPUTS} "
                              "lays out the logs' input files); expected another name")
        after = job["after"]
        if after not in ("first", *FULL_CYCLE_STEPS):
            raise ConfigError(f"config key 'darshan.jobs.{name}.after': {after!r} is not allowed; expected first or "
                              f"a GDAS step: {', '.join(FULL_CYCLE_STEPS)}")
        if cfg["only"] and after != "first":
            raise ConfigError(f"config key 'darshan.jobs.{name}.after': {after!r}, but darshan.only is true (cycles "
                              "without GDAS steps); expected first")
        if job["stands_for"]:
            _check_stands_for(config, name)
    if not cfg["only"]:
        return
    if not cfg["jobs"]:
        raise ConfigError("config key 'darshan.only': true, but darshan.jobs is empty; expected at least one replay "
                          "job, e.g. darshan: {jobs: {myjob: {log: myjob.darshan}}}")
    if config["archive"]["enabled"]:
        raise ConfigError("config key 'archive.enabled': true, but darshan.only is true (no GDAS products to "
                          "archive); expected false")
    for key, values in (("write_strategies", config["write_strategies"]),
                        ("staging.granularity", config["staging"]["granularity"])):
        if len(values) > 1:
            raise ConfigError(f"config key '{key}': {values} sweeps the GDAS steps, but darshan.only is true (replay "
                              "jobs only); expected one value")


def _check_stands_for(config: dict, name: str) -> None:
    key = f"config key 'darshan.jobs.{name}.stands_for'"
    if config["darshan"]["only"]:
        raise ConfigError(f"{key}: set, but darshan.only is true (no GDAS step runs); expected darshan.only false")
    if not config["instruments"]["darshan"]:
        raise ConfigError(f"{key}: set, but instruments.darshan is empty: the step's own Darshan log is what the real "
                          "one is set beside; expected the path of libdarshan.so in instruments.darshan")
    if not set(persistent_tiers(config)) & set(config["scratch_tiers"]):
        raise ConfigError(f"{key}: set, but no arm runs on the persistent tier (scratch_tiers "
                          f"{config['scratch_tiers']}): on a staged arm staging reads and writes the step's files too; "
                          "expected scratch_tiers to hold the persistent tier")


def _check_instruments(config: dict) -> None:
    library = config["instruments"]["darshan"]
    if library and not (os.path.isfile(library) and os.access(library, os.R_OK)):
        raise ConfigError(f"config key 'instruments.darshan': {library!r} is not a readable file; expected the path of "
                          "darshan-runtime's libdarshan.so (built from darshan's sources: docs/darshan.md), or \"\" "
                          "to run without it")


def _check_launcher(template: str) -> None:
    """The MPI launcher is a command template that takes the task count: checked here, used in jobs."""
    try:
        launcher_argv(template, 1)
    except ValueError as err:
        raise ConfigError(f"config key 'launcher': {err}") from None
