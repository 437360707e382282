"""report.writefigures: the write-strategy figure from the forecasts' tables (the MPI runs themselves are
test_launcher's), on synthetic events and on the checked-in study of tests/data (conftest's tables)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import C0, C1, assert_axes_carry_data, assert_png_drawn, bar_sizes, read_csv

from cycleio.report.writefigures import _arm_order, write_strategy_figure, write_times
from cycleio.surrogates.forecast.strategies import STRATEGIES


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


def test_the_write_figure_lists_arms_in_the_registry_order():
    strategies = list(reversed(STRATEGIES))
    table = pd.DataFrame({"arm": [f"arm{i}" for i in range(len(strategies))], "strategy": strategies})
    assert _arm_order(table) == [f"arm{strategies.index(name)}" for name in STRATEGIES]


def test_write_strategy_figure_draws_the_fixture_forecasts(tables, tmp_path, drawn_figures):
    events = pd.read_parquet(tables / "io_events.parquet")
    table = write_times(events, read_csv(tables, "step_summary.csv"))
    assert list(table[["arm", "cycle"]].itertuples(index=False, name=None)) == [
        ("lustre", C0), ("lustre", C1), ("shm", C0), ("shm", C1)]
    shm = table[table["arm"] == "shm"].iloc[0]
    # per output hour both ranks wait 1.3125 s (the hour's output less generating its data); rank 0 writes 1 s,
    # defines and encodes 0.125 s each and renames 0.0625 s; the last hour is the un-overlapped end
    assert shm[["effective_s", "actual_s", "writer_s", "final_s", "blocked_s", "compute_s", "wall_s"]].tolist() == [
        2.625, 2.625, 2.0, 1.3125, 2.625, 2.0, 6.125]
    assert shm["io_share"] == 2.625 / 6.125 and (shm["hours"], shm["nranks"], shm["strategy"]) == (2, 2, "serial")
    out = tmp_path / "write_strategies.png"
    write_strategy_figure(table, out, "fx")
    (fig,) = drawn_figures
    assert_png_drawn(out, (13, 0.9 * 3 + 3.2))
    assert_axes_carry_data(fig)
    left, right = fig.axes
    assert sorted(bar_sizes(left, horizontal=True)) == sorted([5.25, 5.25, 2.625, 2.625, 2.625, 1.3125])
    # right: compute, blocked by output, the rest: the fcst job's run phase, per arm
    assert sorted(bar_sizes(right, horizontal=True)) == sorted([4.0, 5.25, 3.0, 2.0, 2.625, 1.5])
    assert sorted(t.get_text() for t in right.texts) == [" 43% output"] * 2


def test_write_strategy_figure_lists_no_part_it_does_not_draw(tables, tmp_path, drawn_figures):
    """A study without a compute stand-in (compute seconds 0) has no 'compute stand-in' legend entry."""
    events = pd.read_parquet(tables / "io_events.parquet")
    table = write_times(events, read_csv(tables, "step_summary.csv")).assign(compute_s=0.0)
    write_strategy_figure(table, tmp_path / "w.png", "fx")
    (fig,) = drawn_figures
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == ["blocked by output", "reads, data generation, MPI start"]
