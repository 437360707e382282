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
    assert fit_lines(fits)[0].startswith("lustre easy write on 2 nodes: 100 MiB/s per task, plateau 400 MiB/s from 4.0 tasks")


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


def smoke_like(timed: dict[tuple[int, int], bool]) -> pd.DataFrame:
    """Two repetitions at 1 and 2 tasks, as the smoke study's few-MiB points; ``timed`` per (tasks, repetition)."""
    rows = []
    for (tasks, rep), is_timed in timed.items():
        rows.append({"benchmark": "io", "tier": "shm", "tier_kind": "memory", "pattern": "hard", "operation": "read",
                     "aggregate": "rep", "tasks": tasks, "nodes": 1, "bw_MiB_per_s": 2989.0 * tasks + 3000 * rep,
                     "timed": is_timed})
    return pd.DataFrame(rows)


def test_points_too_small_to_time_are_left_out_and_too_few_claim_nothing():
    """The smoke study's 'shm hard read: 2989 MiB/s per task, no plateau ... (>= 8966 MiB/s)' from points the
    timer could not resolve: with fewer than three timed points no slope, plateau or bound is claimed."""
    fits = fit_table(smoke_like({(1, 0): False, (1, 1): False, (2, 0): True, (2, 1): True}))
    row = fits.iloc[0]
    assert (row["fit"], row["n_points"], row["n_untimed"]) == ("too few timed points", 2, 2)
    assert pd.isna(row["slope_MiB_per_s_per_task"]) and pd.isna(row["plateau_MiB_per_s"])
    (line,) = fit_lines(fits)
    assert line == ("shm hard read: too few timed points, no fit (2 of 4 points at 1 and 2 tasks moved enough "
                    "bytes for long enough to time, 3 needed)")
    assert "plateau" not in line and ">=" not in line
    # three timed points fit, the untimed one left out and said so
    fits = fit_table(smoke_like({(1, 0): True, (1, 1): False, (2, 0): True, (2, 1): True}))
    row = fits.iloc[0]
    assert (row["fit"], row["n_points"], row["n_untimed"]) == ("fitted", 3, 1)
    assert fit_lines(fits)[0].endswith("over 3 timed points, 1 too small to time left out")
    # a table from before the column: every point counts as timed
    assert fit_table(benchmarks()).iloc[0]["fit"] == "fitted"


def test_the_capacity_plan_gives_no_units_from_too_few_timed_points():
    inventory = pd.DataFrame([{"arm": "a", "cycle": "2026010106", "step": "fcst", "expected_bytes": 8 * GiB}])
    fits = fit_table(smoke_like({(1, 0): False, (2, 0): False}).assign(operation="write"))
    plan = capacity_plan(inventory, fits, resolution="C768", interval_hours=6, io_budget_fraction=0.1)
    cycle = plan[plan["step"] == "cycle"].iloc[0]
    assert cycle["fit"] == "too few timed points" and pd.isna(cycle["measured_plateau_MiB_per_s"])
    assert pd.isna(cycle["units_needed"]) and not cycle["plateau_reached"]
    assert plan_lines(plan)[0].endswith("tier shm (hard): too few timed points to plan (see the tiers' model)")


def test_fits_and_plans_left_out_for_the_same_reason_share_a_line():
    """The smoke study's tiers' model and capacity plan said 'too few timed points' once per tier, pattern and
    operation (twelve lines and six): the same reason is said once, naming everything it holds for."""
    untimed = {(1, 0): False, (1, 1): False, (2, 0): False, (2, 1): False}
    points = pd.concat([smoke_like(untimed).assign(tier=tier, operation=operation)
                        for tier in ("lustre", "shm") for operation in ("read", "write")], ignore_index=True)
    fits = fit_table(points)
    assert fit_lines(fits) == ["lustre and shm hard read and write: too few timed points, no fit (0 of 4 points each "
                               "at 1 and 2 tasks moved enough bytes for long enough to time, 3 needed)"]
    # one timed point more on shm's read: a reason of its own, on a line of its own
    partly = points.copy()
    partly.loc[(partly["tier"] == "shm") & (partly["operation"] == "read") & (partly["tasks"] == 2), "timed"] = True
    lines = fit_lines(fit_table(partly))
    assert len(lines) == 2 and lines[0].startswith("lustre hard read, lustre hard write, shm hard write: ")
    assert lines[1].startswith("shm hard read: too few timed points, no fit (2 of 4 points at")
    inventory = pd.DataFrame([{"arm": "a", "cycle": "2026010106", "step": "fcst", "expected_bytes": 8 * GiB}])
    plan = capacity_plan(inventory, fits[fits["operation"] == "write"], resolution="C768", interval_hours=6,
                         io_budget_fraction=0.1)
    (line,) = plan_lines(plan)
    assert line.endswith("needs 4 MiB/s; tiers lustre (hard), shm (hard): too few timed points to plan "
                         "(see the tiers' model)")
