"""What an arm's forecast is, as the config gives it: its cadence and products (ForecastSettings),
the steps of each cycle, and the write component's compression.

Plain settings, read by the surrogates that write the files (surrogates.inventory, kinds) and held by
config.settings.ArmSettings.
"""

from __future__ import annotations

from dataclasses import dataclass

from .calendar import member_groups, steps_of_cycle
from .schema import schema_default


@dataclass(frozen=True)
class ForecastSettings:
    """The forecast's cadence and products (from several config sections: settings.build_study); the defaults
    of the keys that mirror a config key are the schema's, for settings built without a config (tests)."""

    forecast_hours: int = schema_default("forecast.forecast_hours")
    history_interval_hours: int = schema_default("forecast.history_interval_hours")
    restart_hours: tuple[int, ...] = tuple(schema_default("forecast.restart_hours"))
    interval_hours: int = schema_default("cycles.interval_hours")
    obs_scale: float = 1.0  # operational volumes (the config's null derives a scale from the resolution)
    iau: bool = schema_default("forecast.iau")  # incremental analysis update: the analysis also writes atmi003 and atmi009
    pgrb2_fields: int = schema_default("post.pgrb2_fields")  # GRIB2 messages per 0.25 and 1.0 degree product file
    sflux_fields: int = schema_default("post.sflux_fields")
    product_grids: tuple[str, ...] = ("0p25", "1p00")  # both (the config's null derives them from the resolution)
    members: int = schema_default("ensemble.members")  # EnKF ensemble members (0 = no ensemble forecasts)
    members_per_job: int = schema_default("ensemble.members_per_job")

    @property
    def ensemble_jobs(self) -> list[str]:
        return list(member_groups(self.members, self.members_per_job, "efcs"))

    @property
    def output_hours(self) -> list[int]:
        return list(range(0, self.forecast_hours + 1, self.history_interval_hours))

    @property
    def background_hours(self) -> list[int]:
        """The previous cycle's forecast hours an analysis reads (3 to 9 h window)."""
        return [h for h in self.output_hours if 3 <= h <= 9]


def cycle_steps(cycle: str, start: str, settings: ForecastSettings) -> tuple[str, ...]:
    """The steps of a cycle (config.calendar.steps_of_cycle) with the arm's ensemble forecast jobs."""
    return steps_of_cycle(cycle, start, settings.ensemble_jobs)


@dataclass(frozen=True)
class Compression:
    """The write component's history compression: zlib level (0 = off) and bit rounding."""

    zlib_level: int = 0
    quantize_nsd: int = 0  # significant bits kept by BitRound; 0 = off

    @property
    def enabled(self) -> bool:
        return self.zlib_level > 0 or self.quantize_nsd > 0

    def lossless(self) -> "Compression":
        return Compression(self.zlib_level)

    def variable_kwargs(self) -> dict:
        kwargs: dict = {}
        if self.zlib_level > 0:
            kwargs.update(compression="zlib", complevel=self.zlib_level, shuffle=True)
        if self.quantize_nsd > 0:
            kwargs.update(significant_digits=self.quantize_nsd, quantize_mode="BitRound")
        return kwargs
