"""The forecast program's ranks and decomposition, as arithmetic: no numpy, netCDF4 or mpi4py.

What the scheduler asks for (:func:`forecast_ntasks`), how compute ranks split the history grid and
the six tiles into row bands, and the checks of a layout against the grid, without starting MPI.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...config.schema import object_defaults
from ..grid import Grid
from .errors import ForecastError
from .strategies import STRATEGIES


@dataclass(frozen=True)
class RankLayout:
    """Ranks of the forecast program: compute ranks first, then the write groups of a strategy with writer ranks."""

    strategy: str
    compute: int
    write_groups: int
    tasks_per_group: int
    combine_at_end: bool
    mpiio: str = "collective"  # the shared-file strategies' MPI-IO mode

    @classmethod
    def from_settings(cls, strategy: str, write_component: dict) -> "RankLayout":
        """The layout of the config's ``write_component``; keys it leaves out take the schema's defaults."""
        if strategy not in STRATEGIES:
            raise ForecastError(f"write strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
        wc = {**object_defaults("write_component"), **(write_component or {})}
        for key in ("ranks", "write_groups", "write_tasks_per_group"):
            if int(wc[key]) < 1:
                raise ForecastError(f"write_component.{key} must be at least 1, got {wc[key]}")
        if wc["mpiio"] not in ("collective", "independent"):
            raise ForecastError(f"write_component.mpiio must be collective or independent, got {wc['mpiio']!r}")
        return cls(strategy, int(wc["ranks"]), int(wc["write_groups"]), int(wc["write_tasks_per_group"]),
                   bool(wc["combine_per_rank"]), str(wc["mpiio"]))

    @property
    def write_strategy(self):
        """The strategy's class (strategies/): the rank program's hooks, and what it makes of the layout."""
        return STRATEGIES[self.strategy]

    @property
    def writers(self) -> int:
        return self.write_strategy.writer_ranks(self)

    @property
    def ntasks(self) -> int:
        return self.compute + self.writers

    def writer_rank(self, group: int, task: int) -> int:
        return self.compute + group * self.tasks_per_group + task

    def describe(self) -> str:
        return self.write_strategy.describe(self)


def row_bounds(rows: int, parts: int, index: int) -> tuple[int, int]:
    """Rows [start, stop) of block ``index`` when ``rows`` rows are split into ``parts`` blocks."""
    return index * rows // parts, (index + 1) * rows // parts


def tile_blocks(compute: int) -> int:
    """Row blocks per tile: ranks/6 with a multiple of 6 ranks (the model), else every rank on every tile."""
    return compute // 6 if compute >= 6 and compute % 6 == 0 else compute


def tile_owner(tile: int, block: int, compute: int) -> int:
    k = tile_blocks(compute)
    return (tile - 1) * k + block if k != compute else block


def check_layout(layout: RankLayout, grid: Grid) -> None:
    """Refuse a decomposition with empty blocks before starting any rank."""
    if layout.strategy == "quilt_parallel" and layout.tasks_per_group > layout.compute:
        raise ForecastError(f"write_component.write_tasks_per_group={layout.tasks_per_group} is more than the "
                            f"{layout.compute} compute ranks (write_component.ranks): with quilt_parallel each task "
                            "of a write group takes the bands of at least one compute rank")
    if layout.compute > grid.ny:
        raise ForecastError(f"write_component.ranks={layout.compute} is more than the {grid.ny} rows of the "
                            f"{grid.resolution} history grid; use fewer ranks")
    if tile_blocks(layout.compute) > grid.n:
        raise ForecastError(f"write_component.ranks={layout.compute} splits each tile into "
                            f"{tile_blocks(layout.compute)} blocks, more than its {grid.n} rows at {grid.resolution}")


def forecast_ntasks(settings) -> int:
    """Ranks the forecast job starts (compute plus quilt writers): for a scheduler's task request."""
    return RankLayout.from_settings(settings.strategy, settings.write_component).ntasks
