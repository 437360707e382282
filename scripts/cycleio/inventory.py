"""What each GDAS-like step reads and writes, as paths relative to the arm's ROTDIR.

Names follow the operational GDAS (../reference/gdas-io-profile.md): COM folders
``gdas.YYYYMMDD/HH/...`` and file names ``gdas.tHHz.<name>``. The inventory is reduced to the files
that carry most of the bytes; each file has a ``kind`` that selects its writer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .calendar import com_dir, is_half_cycle, previous_cycle, shift_cycle

RESTART_KINDS = ("fv_core.res", "sfc_data")
TILES = range(1, 7)
OBS_FILES = {"prepbufr": 66_000_000, "prepbufr.acft_profiles": 10_000_000, "nsstbufr": 7_000_000}


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


@dataclass(frozen=True)
class ForecastSettings:
    forecast_hours: int = 9
    history_interval_hours: int = 3
    restart_hours: tuple[int, ...] = (3, 6, 9)
    interval_hours: int = 6
    obs_scale: float = 1.0

    @property
    def output_hours(self) -> list[int]:
        return list(range(0, self.forecast_hours + 1, self.history_interval_hours))

    @property
    def background_hours(self) -> list[int]:
        """The previous cycle's forecast hours an analysis reads (3 to 9 h window)."""
        return [h for h in self.output_hours if 3 <= h <= 9]


def hh(cycle: str) -> str:
    return f"gdas.t{cycle[8:]}z"


def restart_set(folder: str, prefix: str) -> list[FileSpec]:
    specs = [
        FileSpec(f"{folder}/{prefix}{kind}.tile{tile}.nc", kind, (("tile", tile),))
        for kind in RESTART_KINDS
        for tile in TILES
    ]
    specs.append(FileSpec(f"{folder}/{prefix}coupler.res", "coupler"))
    return specs


def restart_prefix(valid_cycle: str) -> str:
    return f"{valid_cycle[:8]}.{valid_cycle[8:]}0000."


def coldstart_files(first_cycle: str) -> list[FileSpec]:
    return restart_set(f"{com_dir(first_cycle)}/model/atmos/input", "")


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


def obs_files(cycle: str, scale: float) -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/obs"
    return [
        FileSpec(f"{folder}/{hh(cycle)}.{name}", "bufr", (("bytes", max(1, int(size * scale))),))
        for name, size in OBS_FILES.items()
    ]


def analysis_files(cycle: str) -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/analysis/atmos"
    return [
        FileSpec(f"{folder}/{hh(cycle)}.atminc.nc", "increment"),
        FileSpec(f"{folder}/{hh(cycle)}.abias", "text_table", (("rows", 4000),)),
        FileSpec(f"{folder}/{hh(cycle)}.gsistat", "text_table", (("rows", 20000),)),
    ]


def product_files(cycle: str, hour: int) -> list[FileSpec]:
    folder = f"{com_dir(cycle)}/products/atmos/grib2/1p00"
    return [FileSpec(f"{folder}/{hh(cycle)}.pgrb2.1p00.f{hour:03d}.nc", "product", (("fhour", hour),))]


def step_io(step: str, cycle: str, start: str, settings: ForecastSettings) -> StepIO:
    """Reads and writes of one step of one cycle."""
    prev = previous_cycle(cycle, settings.interval_hours)
    io = StepIO()
    if step == "prep":
        io.writes = obs_files(cycle, settings.obs_scale)
    elif step == "anal":
        io.reads = [obs_files(cycle, settings.obs_scale)[0]]
        for hour in settings.background_hours:
            io.reads += history_files(prev, hour)[:2]
        io.writes = analysis_files(cycle)
    elif step == "fcst":
        if is_half_cycle(cycle, start):
            io.reads = coldstart_files(cycle)
        else:
            io.reads = restart_files(prev, settings.interval_hours) + analysis_files(cycle)[:1]
        for hour in settings.output_hours:
            io.writes += history_files(cycle, hour)
            if hour in settings.restart_hours and hour > 0:
                io.writes += restart_files(cycle, hour)
    elif step == "post":
        for hour in settings.output_hours:
            io.reads += history_files(cycle, hour)[:2]
            io.writes += product_files(cycle, hour)
    else:
        raise ValueError(f"unknown step {step!r}; expected prep, anal, fcst or post")
    return io
