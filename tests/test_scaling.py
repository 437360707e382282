"""The tiers' linear-to-plateau model and the capacity plan (report.scaling) on synthetic points."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cycleio.report.scaling import capacity_plan, fit_linear_plateau, fit_lines, fit_table, plan_lines

GiB = 2**30


def test_fit_recovers_an_exact_line_and_plateau():
    tasks = [1, 2, 4, 8, 16]
    fit = fit_linear_plateau(tasks, [min(100 * n, 400) for n in tasks])
    assert (fit.slope, fit.plateau, fit.plateau_reached, fit.knee) == (100, 400, True, 4)
    assert fit.rmse == 0


def test_fit_recovers_a_noisy_line_and_plateau_from_repetitions():
    rng = np.random.default_rng(7)
    tasks = np.repeat([1, 2, 3, 4, 6, 8, 12, 16], 3)
    bandwidth = np.minimum(250.0 * tasks, 1500.0) * rng.normal(1, 0.02, tasks.size)
    fit = fit_linear_plateau(tasks, bandwidth)
    assert fit.slope == pytest.approx(250, rel=0.03) and fit.plateau == pytest.approx(1500, rel=0.03)
    assert fit.plateau_reached and fit.knee == pytest.approx(6, rel=0.05)
    assert 0 < fit.relative_error < 0.03


def test_a_line_without_plateau_says_so():
    fit = fit_linear_plateau([1, 2, 4], [50, 100, 200])
    assert fit.slope == 50 and not fit.plateau_reached and fit.plateau == 200


def benchmarks() -> pd.DataFrame:
    rows = []
    for tasks, bw in ((1, 100.0), (2, 200.0), (4, 400.0), (8, 400.0)):
        for rep, factor in enumerate((0.9, 1.1)):
            rows.append({"benchmark": "io", "tier": "lustre", "tier_kind": "lustre", "pattern": "easy",
                         "operation": "write", "aggregate": "rep", "tasks": tasks, "nodes": 2,
                         "bw_MiB_per_s": bw * factor})
        rows.append({"benchmark": "io", "tier": "lustre", "tier_kind": "lustre", "pattern": "easy",
                     "operation": "write", "aggregate": "mean", "tasks": tasks, "nodes": 2, "bw_MiB_per_s": bw})
    rows.append({"benchmark": "metadata", "tier": "lustre", "tier_kind": "lustre", "pattern": "easy",
                 "operation": "create", "aggregate": "mean", "tasks": 2, "nodes": 1, "bw_MiB_per_s": None})
    return pd.DataFrame(rows)


def test_fit_table_uses_every_repetition():
    fits = fit_table(benchmarks())
    assert len(fits) == 1
    row = fits.iloc[0]
    assert (row["n_points"], row["tasks_measured"], row["nodes_measured"]) == (8, "1 2 4 8", 2)
    assert row["slope_MiB_per_s_per_task"] == pytest.approx(100) and row["plateau_MiB_per_s"] == pytest.approx(400)
    # each repetition 10% off its mean
    assert row["rmse_MiB_per_s"] == pytest.approx(math.sqrt(2 * (10**2 + 20**2 + 40**2 + 40**2) / 8))
    assert fit_lines(fits)[0].startswith("lustre easy write: 100 MiB/s per task, plateau 400 MiB/s from 4.0 tasks")


def test_capacity_plan_numbers():
    inventory = pd.DataFrame([
        {"arm": "a", "cycle": "2026010100", "step": "fcst", "expected_bytes": 3 * GiB},  # the half cycle
        {"arm": "a", "cycle": "2026010106", "step": "prep", "expected_bytes": 10 * GiB},
        {"arm": "a", "cycle": "2026010106", "step": "fcst", "expected_bytes": 12 * GiB},
        {"arm": "a", "cycle": "2026010106", "step": "fcst", "expected_bytes": 8 * GiB},
        {"arm": "b", "cycle": "2026010106", "step": "fcst", "expected_bytes": 99 * GiB},  # another arm: the same files
    ])
    summary = pd.DataFrame([{"step": "fcst", "bytes_read": 1, "bytes_written": 2}])  # fcst reads half what it writes
    fits = pd.DataFrame([{"tier": "lustre", "tier_kind": "lustre", "pattern": "easy", "operation": "write",
                          "plateau_MiB_per_s": 8.0, "plateau_reached": True, "nodes_measured": 2}])
    plan = capacity_plan(inventory, fits, resolution="C768", interval_hours=6, io_budget_fraction=0.1,
                         summary=summary).set_index("step")
    assert list(plan.index) == ["prep", "fcst", "cycle"]
    assert plan.loc["fcst", "bytes_written"] == 20 * GiB and plan.loc["fcst", "bytes_read"] == 10 * GiB
    assert plan.loc["prep", "bytes_read"] == 0 and plan.loc["cycle", "cycle_bytes"] == 40 * GiB
    assert plan.loc["cycle", "budget_s"] == 2160
    assert plan.loc["cycle", "needed_MiB_per_s"] == pytest.approx(40 * 1024 / 2160)  # 18.96 MiB/s
    assert plan.loc["cycle", "units_needed"] == 5  # 4 MiB/s per measured node
    assert plan_lines(plan.reset_index())[0] == ("C768 every 6 h, I/O within 10% (2160 s): 40.0 GiB per cycle needs "
                                                 "19 MiB/s; tier lustre (easy) gives 8 MiB/s; client nodes: 2 "
                                                 "measured, 5 needed")
    # plan.units: the tier had 8 OSTs when measured, so each OST is worth 1 MiB/s and the cycle needs 19 of them
    osts = capacity_plan(inventory, fits, resolution="C768", interval_hours=6, io_budget_fraction=0.1,
                         summary=summary, units={"lustre": {"name": "OSTs", "measured": 8}}).set_index("step")
    assert osts.loc["cycle", "units_needed"] == 19 and osts.loc["cycle", "units_measured"] == 8
    assert plan_lines(osts.reset_index())[0].endswith("gives 8 MiB/s; OSTs: 8 measured, 19 needed")
