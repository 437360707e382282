"""The study's answer (report.answers) on a hand-made step_summary, and on the tables of the checked-in study of
tests/data (conftest's ``tables``): every number below is worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from conftest import C1, C2, markdown_rows, step_summary  # the hand-made step_summary, its walls worked out there
from cycleio.fsutil import write_table
from cycleio.report.answers import arm_summary, best_arm_line, cycle_totals, summary_markdown, summary_markdown_from_csv

TIERS = {"lustre": "lustre", "shm": "shm", "node_local": "node_local"}


def tiers() -> pd.DataFrame:
    return pd.DataFrame([{"arm": arm, "role": role, "tier": tier if role == "scratch" else "lustre"}
                         for arm, tier in TIERS.items() for role in ("persistent", "scratch")])


def efficiency() -> pd.DataFrame:
    """Replays of lustre's three fcst and post rows (one not timed) and shm's one (not timed); a pattern row."""
    replay = {"tier": "lustre", "reference": "replay", "timed": True}
    return pd.DataFrame([
        {**replay, "arm": "lustre", "step": "fcst", "activity": "run:write", "efficiency": 0.8, "efficiency_low": 0.7,
         "efficiency_high": 0.9, "verdict": "slower than the tier"},
        {**replay, "arm": "lustre", "step": "fcst", "activity": "run:read", "efficiency": 1.0, "efficiency_low": 0.9,
         "efficiency_high": 1.1, "verdict": "at the tier's speed"},
        {**replay, "arm": "lustre", "step": "post", "activity": "run:write", "efficiency": 1.2,
         "efficiency_low": 1.1, "efficiency_high": 1.3, "verdict": "faster than the replay"},
        {**replay, "arm": "lustre", "step": "prep", "activity": "run:write", "efficiency": 9.0, "timed": False,
         "verdict": "not timed"},
        {**replay, "arm": "lustre", "reference": "easy, best", "step": "fcst", "activity": "run:write",
         "efficiency": 5.0, "verdict": "slower than the tier"},
        {**replay, "arm": "shm", "tier": "shm", "step": "prep", "activity": "run:write", "efficiency": 0.5,
         "timed": False, "verdict": "not timed"},
    ])


def write_times() -> pd.DataFrame:
    return pd.DataFrame([
        {"arm": "lustre", "cycle": C1, "strategy": "serial", "effective_s": 1.0, "actual_s": 1.0},
        {"arm": "lustre", "cycle": C2, "strategy": "serial", "effective_s": 2.0, "actual_s": 2.0},
        {"arm": "shm", "cycle": C1, "strategy": "quilt", "effective_s": 0.2, "actual_s": 1.0},
        {"arm": "shm", "cycle": C2, "strategy": "quilt", "effective_s": 0.4, "actual_s": 1.2},
    ])


def test_cycle_totals_sum_the_full_cycles_jobs():
    totals = cycle_totals(step_summary()).set_index(["arm", "cycle"])
    assert set(totals.index.get_level_values("cycle")) == {C1, C2}  # the half cycle and cleanups left out
    assert totals.loc[("lustre", C1), "wall_s"] == 8 and totals.loc[("shm", C2), "wall_s"] == 6.5
    assert totals.loc[("shm", C1), "staging_s"] == 1.0 and totals.loc[("shm", C1), "io_s"] == 2.0


def test_arm_summary_numbers():
    table = arm_summary(step_summary(), tiers(), efficiency(), write_times()).set_index("arm")
    assert list(table.index) == ["lustre", "node_local", "shm"]
    lustre, shm, local = table.loc["lustre"], table.loc["shm"], table.loc["node_local"]
    assert lustre["cycle_wall_s"] == 8.5 and lustre["cycle_wall_sd_s"] == pytest.approx(math.sqrt(0.5))
    assert lustre["io_share"] == pytest.approx(4 / 17) and lustre["cycle_staging_s"] == 0
    assert lustre["verdict"] == "baseline" and math.isnan(lustre["saved_s"])
    # the replay's timed rows only: the pattern row and prep's 9.0 (not timed) do not enter
    assert (lustre["timed_rows"], lustre["close_rows"]) == (3, 1)
    assert (lustre["timed_median_efficiency"], lustre["timed_median_efficiency_low"],
            lustre["timed_median_efficiency_high"]) == pytest.approx((1.0, 0.9, 1.1))
    assert lustre["efficiency_verdicts"] == ("1 of 3 timed rows at the tier's speed or within noise; fcst write "
                                             "slower than the tier (0.80, band 0.70-0.90); post write faster than "
                                             "the replay (1.20, band 1.10-1.30); not timed: prep write")
    assert shm["timed_rows"] == 0 and math.isnan(shm["timed_median_efficiency"])
    assert shm["efficiency_verdicts"] == ("no row moved enough bytes or lasted long enough to time; "
                                          "not timed: prep write")
    assert (lustre["strategy"], lustre["effective_write_s"], lustre["actual_write_s"]) == ("serial", 1.5, 1.5)
    # shm saves 2 and 2.5 s: mean 2.25, sd sqrt(0.125), standard error 0.25
    assert shm["baseline_arm"] == "lustre" and shm["saved_s"] == 2.25
    assert shm["saved_se_s"] == pytest.approx(0.25) and shm["saved_percent"] == pytest.approx(2.25 / 8.5 * 100)
    assert shm["verdict"] == "faster" and shm["cycle_staging_s"] == 1.0
    assert shm["effective_write_s"] == pytest.approx(0.3) and shm["actual_write_s"] == pytest.approx(1.1)
    # node_local saves -0.5 and 1: mean 0.25, standard error 0.75: within the noise
    assert local["saved_s"] == 0.25 and local["saved_se_s"] == pytest.approx(0.75)
    assert local["verdict"] == "within noise" and math.isnan(local["timed_median_efficiency"])
    assert local["efficiency_verdicts"] == "no step was replayed" and local["timed_rows"] == 0


def test_best_arm_line_and_markdown(tmp_path):
    table = arm_summary(step_summary(), tiers(), efficiency(), write_times())
    line = best_arm_line(table)
    assert line == ("Best arm: shm, 6.25 s per cycle, 2.25 s ± 0.25 s (26%) faster than its baseline lustre "
                    "over 2 cycles.")
    write_table(table, tmp_path / "summary.csv")  # as `cycleio summary` writes it, then `cycleio summary-md`
    text = summary_markdown_from_csv(tmp_path / "summary.csv", tmp_path / "summary.md", "fx")
    assert (tmp_path / "summary.md").read_text() == text and text.rstrip().endswith(line)
    assert ("node_local", "node_local", "2", "8.25 (sd 0.35)", "24%", "1.00", "+0.25 ± 0.75 vs lustre",
            "within noise") in markdown_rows(text)
    assert ("- lustre: 1 of 3 timed rows at the tier's speed or within noise; fcst write slower than the tier "
            "(0.80, band 0.70-0.90); post write faster than the replay (1.20, band 1.10-1.30); not timed: prep "
            "write.") in text
    assert "- node_local: No step was replayed." in text
    assert ("quilt", "shm", "0.300", "1.100") in markdown_rows(text)
    assert pd.read_csv(tmp_path / "summary.csv")["arm"].tolist() == ["lustre", "node_local", "shm"]


def test_a_baseline_that_wins_says_staging_does_not_pay():
    summary = step_summary()
    summary.loc[summary["arm"] == "lustre", "wall_s"] /= 10
    line = best_arm_line(arm_summary(summary, tiers()))
    assert line == ("Best arm: lustre, 0.85 s per cycle; it is the baseline (no staging): staging does not pay "
                    "in this study.")
    assert "slower" in summary_markdown(arm_summary(summary, tiers()), "fx")


def test_the_summary_says_where_an_arms_largest_step_seconds_go():
    """One io_gap sentence per arm: the timed step and direction with the most storage seconds."""
    nan = math.nan
    gap = pd.DataFrame([
        {"arm": "shm", "step": "post", "direction": "write", "files_per_job": 4, "bytes_per_job": 300 * 2**20,
         "step_s": 0.8, "replay_s": 0.7, "replay_s_low": 0.68, "replay_s_high": 0.72, "tier_best_s": 0.5,
         "pattern_s": 0.2, "pattern_s_low": 0.18, "pattern_s_high": 0.22, "cycleio_s": 0.1, "cycleio_s_low": 0.08,
         "cycleio_s_high": 0.12, "timed": True},
        {"arm": "shm", "step": "fcst", "direction": "read", "files_per_job": 1, "bytes_per_job": 64 * 2**20,
         "step_s": 0.6, "replay_s": nan, "replay_s_low": nan, "replay_s_high": nan, "tier_best_s": nan,
         "pattern_s": nan, "pattern_s_low": nan, "pattern_s_high": nan, "cycleio_s": nan, "cycleio_s_low": nan,
         "cycleio_s_high": nan, "timed": True},
    ])
    table = arm_summary(step_summary(), tiers(), efficiency(), write_times(), io_gap=gap).set_index("arm")
    assert table.loc["shm", "io_gap"] == ("of post's 0.8 s of writes, 0.5 s is the tier at its best, 0.2 s (0.18-0.22) "
                                          "the file pattern (300 MiB in 4 files with an fsync each), 0.1 s "
                                          "(0.08-0.12) cycleio")
    assert pd.isna(table.loc["lustre", "io_gap"])
    text = summary_markdown(table.reset_index(), "fx")
    assert "0.1 s (0.08-0.12) cycleio." in text


def test_the_answer_per_arm_from_the_fixed_records(tables, tmp_path):
    """summary.csv on the fx study: one full cycle (2026010106: prep, fcst, post), the lustre arm the baseline.
    Every number is the tables' (multiples of 1/64 s): lustre's jobs take 28 s, 12.25 s of it I/O; shm's 18.375 s,
    10.8125 s I/O and 4.0625 s staging (2.25 in, 1.8125 out); one cycle gives no spread."""
    from cycleio.report.answers import best_arm_line, summary_table_from_tables

    table = summary_table_from_tables(tables / "step_summary.csv", tables / "tiers.csv",
                                      tables / "io_events.parquet", None, tmp_path / "summary.csv")
    rows = table.set_index("arm")
    lustre, shm = rows.loc["lustre"], rows.loc["shm"]
    assert (lustre["n_cycles"], lustre["cycle_wall_s"], lustre["io_share"]) == (1, 28.0, 12.25 / 28)
    assert (lustre["verdict"], lustre["cycle_staging_s"]) == ("baseline", 0)
    assert (shm["cycle_wall_s"], shm["cycle_io_s"], shm["cycle_staging_s"]) == (18.375, 10.8125, 4.0625)
    assert (shm["baseline_arm"], shm["saved_s"], shm["saved_percent"]) == ("lustre", 9.625, 34.375)
    assert shm["verdict"] == "faster (one cycle, no spread)" and math.isnan(shm["saved_se_s"])
    # the forecast's effective and actual write seconds (writetime.py), the baseline's twice the staged arm's
    assert (lustre["strategy"], lustre["effective_write_s"], lustre["actual_write_s"]) == ("serial", 5.25, 5.25)
    assert (shm["effective_write_s"], shm["actual_write_s"]) == (2.625, 2.625)
    assert best_arm_line(table) == ("Best arm: shm, 18.38 s per cycle, 9.62 s (34%) faster than its baseline lustre "
                                    "over 1 cycle (one cycle: no spread to tell it from noise).")


def test_the_summary_says_when_the_machine_hands_freed_memory_to_its_host():
    """Where the arms' jobs found free page reporting on (tiers.csv, from their provenance), the efficiency lines
    end with what it does to a buffered write; nowhere else."""
    on = tiers().assign(free_page_reporting=lambda t: t["arm"] != "shm")
    text = summary_markdown(arm_summary(step_summary(), on, efficiency()), "fx")
    assert "The machine the arms lustre and node_local ran on hands the memory it frees back to its host" in text
    assert "free page reporting" not in summary_markdown(arm_summary(step_summary(), tiers(), efficiency()), "fx")
