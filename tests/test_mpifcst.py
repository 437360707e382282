"""report.writefigures: the write-strategy figure from the forecasts' tables (the MPI runs themselves are
test_launcher's)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import assert_axes_carry_data, assert_png_drawn, bar_sizes

from cycleio.report.writefigures import write_strategy_figure, write_times


def synthetic_events() -> pd.DataFrame:
    rows = []
    for arm, strategy, eff, act in (("shm_serial", "serial", 1.0, 0.8), ("shm_quilt", "quilt", 0.05, 1.0)):
        for cycle in ("2026010100", "2026010106"):
            t = 0.0
            for hour in ("f000", "f003", "f006"):
                rows.append(dict(arm=arm, strategy=strategy, cycle=cycle, step="fcst", phase="run", op="compute",
                                 rank=0, nranks=3, file="", t_start=t, seconds=2.0))
                t += 2.0
                for rank in (0, 1):
                    rows.append(dict(arm=arm, strategy=strategy, cycle=cycle, step="fcst", phase="run",
                                     op="write_effective", rank=rank, nranks=3, file=hour, t_start=t, seconds=eff))
                rows.append(dict(arm=arm, strategy=strategy, cycle=cycle, step="fcst", phase="run", op="write",
                                 rank=2, nranks=3, file=f"atm{hour}.nc", t_start=t, seconds=act))
                t += eff
            rows.append(dict(arm=arm, strategy=strategy, cycle=cycle, step="fcst", phase="run", op="write_final",
                             rank=0, nranks=3, file="f006", t_start=t - eff, seconds=max(eff, act)))
    events = pd.DataFrame(rows)
    events["t_end"] = events["t_start"] + events["seconds"]
    return events


def test_write_times_and_figure_from_tables(tmp_path, drawn_figures):
    table = write_times(synthetic_events())
    quilt = table[table["arm"] == "shm_quilt"].iloc[0]
    serial = table[table["arm"] == "shm_serial"].iloc[0]
    assert quilt["effective_s"] == pytest.approx(0.15) and quilt["actual_s"] == pytest.approx(3.0)
    assert serial["effective_s"] == pytest.approx(3.0) and serial["final_s"] == pytest.approx(1.0)
    assert serial["blocked_s"] == pytest.approx(2.0 + 1.0)
    assert np.all(table["io_share"].between(0, 1))
    out = tmp_path / "write_strategies.png"
    write_strategy_figure(table, out, "test")
    (fig,) = drawn_figures
    assert_png_drawn(out, (13, 0.9 * 3 + 3.2))
    assert_axes_carry_data(fig)
    # effective, actual and final seconds per forecast: quilt 3 x 0.05, 3 x 1.0 by its writer, 1.0; serial 3 x 1.0,
    # 3 x 0.8, 1.0
    assert sorted(bar_sizes(fig.axes[0], horizontal=True)) == pytest.approx(sorted([0.15, 3.0, 1.0, 3.0, 2.4, 1.0]))


def test_write_strategy_figure_says_when_no_forecast_has_mpi_records(tmp_path, drawn_figures):
    events = synthetic_events()
    table = write_times(events[~events["op"].isin(["write_effective", "write_final"])])
    assert table.empty  # and without columns
    out = tmp_path / "none.png"
    write_strategy_figure(table, out, "test")
    assert_png_drawn(out, (13, 0.9 * 3 + 3.2), min_inked=0.001)
    (fig,) = drawn_figures
    assert_axes_carry_data(fig)  # every panel says there is nothing to show
    assert [t.get_text() for ax in fig.axes for t in ax.texts] == [
        "no forecast written by the MPI program"] * 2
