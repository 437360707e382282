"""What each GDAS-like step reads and writes, as paths relative to the arm's ROTDIR.

Names, counts and folders follow the operational GDAS of GFS v16 (the reference profile in the
project's design notes): COM folders ``gdas.YYYYMMDD/HH/...``, file names ``gdas.tHHz.<name>``,
restart sets of 38 files, history every 1 or 3 hours, four GRIB2 products and two index files per
output hour. Each file has a ``kind`` that selects its writer and its expected size.

Simplifications, on purpose: the surface analysis (gdassfcanl) runs inside the anal job; observation
dumps "arrive" through their own job before prep (data, not a step of the cycle); BUFR, radstat and
the other binary diagnostics are seeded random bytes of the operational sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.calendar import com_dir, is_half_cycle, previous_cycle, shift_cycle
from ..config.forecast import ForecastSettings, cycle_steps

TILES = range(1, 7)
RESTART_TILE_KINDS = ("ca_data", "fv_core.res", "fv_srf_wnd.res", "fv_tracer.res", "phy_data", "sfc_data")

# Observation dumps of one cycle: (dump type, operational size in bytes, read by prep).
# Conventional data go through prep into prepbufr; the analysis reads satellite dumps directly.
OBS_DUMPS = (
    ("adpupa", 12_000_000, True), ("aircar", 25_000_000, True), ("aircft", 60_000_000, True),
    ("adpsfc", 35_000_000, True), ("sfcshp", 15_000_000, True), ("proflr", 2_000_000, True),
    ("vadwnd", 8_000_000, True), ("rassda", 1_000_000, True), ("satwnd", 210_000_000, True),
    ("gpsro", 45_000_000, False), ("1bamua", 150_000_000, False), ("1bmhs", 160_000_000, False),
    ("atms", 420_000_000, False), ("crisf4", 900_000_000, False), ("mtiasi", 800_000_000, False),
    ("ssmisu", 250_000_000, False), ("avcsam", 110_000_000, False), ("avcspm", 110_000_000, False),
    ("sevcsr", 30_000_000, False), ("ompsn8", 20_000_000, False),
)
PREP_OUTPUTS = (("prepbufr", 66_000_000), ("prepbufr.acft_profiles", 10_000_000), ("nsstbufr", 7_000_000))
ABIAS_FILES = (("abias", 1_100_000), ("abias_pc", 1_000_000), ("abias_air", 900_000), ("abias_int", 300_000))
ANAL_DIAGNOSTICS = (("radstat", 2_370_000_000), ("cnvstat", 145_000_000), ("oznstat", 40_000_000))
GSISTAT_ROWS = 20_000


@dataclass(frozen=True)
class FileSpec:
    path: str
    kind: str
    params: tuple = ()  # hashable (key, value) pairs for the writer

    def param(self, key, default=None):
        return dict(self.params).get(key, default)


@dataclass
class StepIO:
    reads: list[FileSpec] = field(default_factory=list)
    writes: list[FileSpec] = field(default_factory=list)


def hh(cycle: str) -> str:
    return f"gdas.t{cycle[8:]}z"


def restart_set(folder: str, prefix: str, sfc_from: str | None = None) -> list[FileSpec]:
    """The 38 files of a restart: six kinds x six tiles, coupler.res and fv_core.res.nc.

    ``sfc_from`` replaces the sfc_data tiles by the surface analysis (what the forecast reads).
    """
    specs = []
    for kind in RESTART_TILE_KINDS:
        for tile in TILES:
            if kind == "sfc_data" and sfc_from:
                specs.append(FileSpec(f"{sfc_from}.sfcanl_data.tile{tile}.nc", "sfc_data", (("tile", tile),)))
            else:
                specs.append(FileSpec(f"{folder}/{prefix}{kind}.tile{tile}.nc", kind, (("tile", tile),)))
    specs.append(FileSpec(f"{folder}/{prefix}coupler.res", "coupler"))
    specs.append(FileSpec(f"{folder}/{prefix}fv_core.res.nc", "fv_core_axes"))
    return specs


def restart_prefix(valid_cycle: str) -> str:
    return f"{valid_cycle[:8]}.{valid_cycle[8:]}0000."


def abias_files(cycle: str) -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/analysis/atmos"
    return [FileSpec(f"{folder}/{hh(cycle)}.{name}", "bytes", (("bytes", size),)) for name, size in ABIAS_FILES]


def coldstart_files(first_cycle: str) -> list[FileSpec]:
    """Initial conditions of the half cycle, and the bias files the first analysis starts from."""
    return restart_set(f"{com_dir(first_cycle)}/model/atmos/input", "") + abias_files(first_cycle)


def obs_dump_files(cycle: str, scale: float, which: str = "all") -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/obs"
    return [
        FileSpec(f"{folder}/{hh(cycle)}.{name}.tm00.bufr_d", "bytes", (("bytes", max(1, int(size * scale))),))
        for name, size, conventional in OBS_DUMPS
        if which == "all" or (which == "conventional") == conventional
    ]


def prep_files(cycle: str, scale: float) -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/obs"
    return [
        FileSpec(f"{folder}/{hh(cycle)}.{name}", "bytes", (("bytes", max(1, int(size * scale))),))
        for name, size in PREP_OUTPUTS
    ]


def history_files(cycle: str, hour: int) -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/model/atmos/history"
    hour_param = (("fhour", hour),)
    return [
        FileSpec(f"{folder}/{hh(cycle)}.atmf{hour:03d}.nc", "atm_history", hour_param),
        FileSpec(f"{folder}/{hh(cycle)}.sfcf{hour:03d}.nc", "sfc_history", hour_param),
        FileSpec(f"{folder}/{hh(cycle)}.atm.logf{hour:03d}.txt", "log", hour_param),
    ]


def restart_files(cycle: str, hour: int) -> list[FileSpec]:
    return restart_set(f"{com_dir(cycle)}/model/atmos/restart", restart_prefix(shift_cycle(cycle, hour)))


def sfcanl_prefix(cycle: str) -> str:
    return f"{com_dir(cycle)}/analysis/atmos/{restart_prefix(cycle)[:-1]}"


def analysis_files(cycle: str, settings: ForecastSettings) -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/analysis/atmos"
    increments = ["atminc"] + (["atmi003", "atmi009"] if settings.iau else [])
    specs = [FileSpec(f"{folder}/{hh(cycle)}.{name}.nc", "increment") for name in increments]
    specs += abias_files(cycle)
    specs += [
        FileSpec(f"{folder}/{hh(cycle)}.{name}", "bytes", (("bytes", max(1, int(size * settings.obs_scale))),))
        for name, size in ANAL_DIAGNOSTICS
    ]
    specs.append(FileSpec(f"{folder}/{hh(cycle)}.gsistat", "text_table", (("rows", GSISTAT_ROWS),)))
    specs.append(FileSpec(f"{folder}/{hh(cycle)}.dtfanl.nc", "dtfanl"))
    specs += [FileSpec(f"{sfcanl_prefix(cycle)}.sfcanl_data.tile{t}.nc", "sfc_data", (("tile", t),)) for t in TILES]
    return specs


def product_files(cycle: str, hour: int, settings: ForecastSettings) -> list[FileSpec]:
    base = com_dir(cycle)
    name, fh = hh(cycle), f"f{hour:03d}"
    hour_param = ("fhour", hour)
    specs = [
        FileSpec(f"{base}/model/atmos/master/{name}.master.grb2{fh}", "grib_master", (hour_param,)),
        FileSpec(f"{base}/model/atmos/master/{name}.sfluxgrb{fh}.grib2", "grib_sflux",
                 (hour_param, ("fields", settings.sflux_fields))),
    ]
    for grid in settings.product_grids:
        path = f"{base}/products/atmos/grib2/{grid}/{name}.pgrb2.{grid}.{fh}"
        params = (hour_param, ("grid", grid), ("fields", settings.pgrb2_fields))
        specs.append(FileSpec(path, "grib_pgrb2", params))
        specs.append(FileSpec(f"{path}.idx", "grib_index", params))
    return specs


ENSEMBLE_HOURS = range(3, 10)  # members write f003-f009 hourly, the window the next analysis reads


def ensemble_files(cycle: str, member: int) -> list[FileSpec]:
    folder = f"enkf{com_dir(cycle)}/mem{member:03d}/model/atmos/history"
    return [
        FileSpec(f"{folder}/enkfgdas.t{cycle[8:]}z.{name}f{hour:03d}.nc", kind, (("fhour", hour), ("member", member)))
        for hour in ENSEMBLE_HOURS
        for name, kind in (("atm", "atm_history"), ("sfc", "sfc_history"))
    ]


def _dump_io(cycle: str, start: str, settings: ForecastSettings, io: StepIO) -> None:
    io.writes = obs_dump_files(cycle, settings.obs_scale)


def _prep_io(cycle: str, start: str, settings: ForecastSettings, io: StepIO) -> None:
    io.reads = obs_dump_files(cycle, settings.obs_scale, "conventional")
    io.writes = prep_files(cycle, settings.obs_scale)


def _anal_io(cycle: str, start: str, settings: ForecastSettings, io: StepIO) -> None:
    prev = previous_cycle(cycle, settings.interval_hours)
    io.reads = prep_files(cycle, settings.obs_scale) + obs_dump_files(cycle, settings.obs_scale, "satellite")
    io.reads += abias_files(prev)
    for hour in settings.background_hours:
        io.reads += history_files(prev, hour)[:2]
    io.reads += [s for s in restart_files(prev, settings.interval_hours) if s.kind == "sfc_data"]
    io.writes = analysis_files(cycle, settings)


def _fcst_io(cycle: str, start: str, settings: ForecastSettings, io: StepIO) -> None:
    if is_half_cycle(cycle, start):
        io.reads = [s for s in coldstart_files(cycle) if "abias" not in s.path]
    else:
        prev = previous_cycle(cycle, settings.interval_hours)
        previous_restart = restart_set(
            f"{com_dir(prev)}/model/atmos/restart", restart_prefix(cycle), sfc_from=sfcanl_prefix(cycle)
        )
        increments = [s for s in analysis_files(cycle, settings) if s.kind == "increment"]
        io.reads = previous_restart + increments
    for hour in settings.output_hours:
        io.writes += history_files(cycle, hour)
        if hour in settings.restart_hours and hour > 0:
            io.writes += restart_files(cycle, hour)


def _post_io(cycle: str, start: str, settings: ForecastSettings, io: StepIO) -> None:
    for hour in settings.output_hours:
        io.reads += history_files(cycle, hour)[:2]
        io.writes += product_files(cycle, hour, settings)


def _ensemble_io(step: str, cycle: str, settings: ForecastSettings, io: StepIO) -> None:
    group = int(step[4:])
    first = (group - 1) * settings.members_per_job + 1
    io.reads = [s for s in analysis_files(cycle, settings) if s.path.endswith(".atminc.nc")]
    for member in range(first, min(first + settings.members_per_job, settings.members + 1)):
        io.writes += ensemble_files(cycle, member)


# The steps (and the dump that arrives before a cycle): what each reads and writes. The ensemble's
# forecast jobs (efcs01, ...) are numbered by the configuration and share one definition.
STEPS = {"dump": _dump_io, "prep": _prep_io, "anal": _anal_io, "fcst": _fcst_io, "post": _post_io}


def step_io(step: str, cycle: str, start: str, settings: ForecastSettings) -> StepIO:
    """Reads and writes of one step of one cycle, in the order the job does them."""
    io = StepIO()
    if step in STEPS:
        STEPS[step](cycle, start, settings, io)
    elif step in settings.ensemble_jobs:
        _ensemble_io(step, cycle, settings, io)
    else:
        raise ValueError(f"unknown step {step!r}; expected {', '.join(s for s in STEPS if s != 'dump')} or "
                         f"{', '.join(settings.ensemble_jobs) or 'efcsNN with ensemble.members'}")
    return io


def job_files(settings, cycle: str, steps: list[str]) -> tuple[list[FileSpec], list[FileSpec], dict]:
    """The job's external inputs (not made by an earlier step of the same job), its outputs, and per-step I/O.

    ``settings`` is the arm's ArmSettings (its ``start`` cycle and ``forecast``).
    """
    per_step = {step: step_io(step, cycle, settings.start, settings.forecast) for step in steps}
    produced: set[str] = set()
    inputs: dict[str, FileSpec] = {}
    outputs: dict[str, FileSpec] = {}
    for io in per_step.values():
        for spec in io.reads:
            if spec.path not in produced:
                inputs.setdefault(spec.path, spec)
        for spec in io.writes:
            produced.add(spec.path)
            outputs[spec.path] = spec
    return list(inputs.values()), list(outputs.values()), per_step
