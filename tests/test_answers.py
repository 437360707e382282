"""The study's answer (report.answers) on a hand-made step_summary: every number below is worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from conftest import C0, C1, C2, step_summary  # the hand-made step_summary, its walls worked out there
from cycleio.report.answers import arm_summary, best_arm_line, cycle_totals, summary_markdown, write_summary

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
    text = write_summary(table, tmp_path / "summary.csv", tmp_path / "summary.md", "fx")
    assert (tmp_path / "summary.md").read_text() == text and text.rstrip().endswith(line)
    assert "| node_local | node_local | 2 | 8.25 (sd 0.35) | 24% | 1.00 | +0.25 ± 0.75 vs lustre | within noise |" in text
    assert ("- lustre: 1 of 3 timed rows at the tier's speed or within noise; fcst write slower than the tier "
            "(0.80, band 0.70-0.90); post write faster than the replay (1.20, band 1.10-1.30); not timed: prep "
            "write.") in text
    assert "- node_local: No step was replayed." in text
    assert "| quilt | shm | 0.300 | 1.100 |" in text
    assert pd.read_csv(tmp_path / "summary.csv")["arm"].tolist() == ["lustre", "node_local", "shm"]


def test_a_baseline_that_wins_says_staging_does_not_pay():
    summary = step_summary()
    summary.loc[summary["arm"] == "lustre", "wall_s"] /= 10
    line = best_arm_line(arm_summary(summary, tiers()))
    assert line == ("Best arm: lustre, 0.85 s per cycle; it is the baseline (no staging): staging does not pay "
                    "in this study.")
    assert "slower" in summary_markdown(arm_summary(summary, tiers()), "fx")


def test_table_numbers_give_each_tables_sentence(tmp_path):
    """The captions' numbers from fixed tables: exact sentences; a table not there yet leaves its key
    "not measured yet", and an unreadable one says so instead of stopping the report."""
    from cycleio.report.captions import MISSING, table_numbers

    steps = pd.DataFrame({"arm": ["a", "a", "a", "b"], "step": ["fcst", "fcst", "anal", "fcst"],
                          "wall_s": [6.0, 8.0, 1.0, 3.0], "io_fraction": [0.5, 0.3, 0.9, 0.25]})
    steps.to_csv(tmp_path / "step_summary.csv", index=False)
    pd.DataFrame({"arm": ["a", "a"], "tier": ["t", "t"], "step": ["fcst", "prep"], "activity": ["run:write"] * 2,
                  "reference": ["replay"] * 2, "surrogate_bytes": [2**30, 2**10], "efficiency": [0.95, 0.1],
                  "timed": [True, False], "verdict": ["within noise", "not timed"]}
                 ).to_csv(tmp_path / "efficiency.csv", index=False)
    pd.DataFrame(columns=["study", "arm", "cycle", "step", "attempt", "succeeded_on_attempt"]).to_csv(
        tmp_path / "retries.csv", index=False)
    (tmp_path / "staging.csv").write_text("not,a\n1,2\n")
    numbers = table_numbers(tmp_path / "step_summary.csv", tmp_path / "efficiency.csv", tmp_path / "retries.csv",
                            tmp_path / "staging.csv", tmp_path / "records.jsonl", tmp_path / "tiers.csv")
    assert numbers["step_summary"] == ("the longest step per arm (mean over cycles): a fcst 7.00 s (40% I/O), "
                                       "b fcst 3.00 s (25% I/O).")
    # the prep write moved 1 KiB: too little for its ratio to say anything, so it is only named
    assert numbers["efficiency"] == ("1 of 2 rows against the replay are timed: 1 within noise; not timed (too few "
                                     "bytes or too short to time, ratio not read): a prep write.")
    assert numbers["retries"] == "no job failed an attempt."
    assert numbers["staging"].startswith("(could not read staging.csv: ")
    assert numbers["tiers"] == numbers["capacity"] == numbers["io_events"] == MISSING


def test_a_table_of_another_version_gives_a_caption_that_says_so(tmp_path):
    """A capacity.csv left by an older cycleio (other columns) must not stop the workflow, whose params ask
    for its sentence: the caption says it could not read it."""
    from cycleio.report.captions import answer_numbers

    pd.DataFrame({"tier": ["lustre"], "step": ["cycle"], "units_needed": [3]}).to_csv(
        tmp_path / "capacity.csv", index=False)
    numbers = answer_numbers(tmp_path / "summary.csv", None, tmp_path / "capacity.csv")
    assert numbers["plan"].startswith("(could not read capacity.csv: ")
    assert numbers["best"] == "not measured yet"


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


def test_the_benchmark_caption_quotes_timed_points_only(tmp_path):
    """Points too small to time (benchmarks.csv ``timed`` False) are counted in the caption, never quoted."""
    from cycleio.report.captions import table_numbers

    rows = [{"benchmark": "io", "aggregate": "mean", "tier": "shm", "operation": "write", "bw_MiB_per_s": bw,
             "timed": timed} for bw, timed in ((2667.0, False), (3810.0, False), (900.0, True))]
    pd.DataFrame(rows).to_csv(tmp_path / "benchmarks.csv", index=False)
    said = table_numbers(tmp_path / "benchmarks.csv")["benchmarks"]
    assert said == ("best mean bandwidth per tier (any pattern and task count, timed points only): shm write "
                    "900 MiB/s (2 of 3 points too small to time, not quoted).")
    pd.DataFrame(rows[:2]).to_csv(tmp_path / "benchmarks.csv", index=False)
    said = table_numbers(tmp_path / "benchmarks.csv")["benchmarks"]
    assert "2667" not in said and said.endswith(
        "no point moved enough bytes for long enough to time (2 of 2 points too small to time, not quoted).")


def test_what_staging_buys_says_a_cost_as_a_cost_and_its_band_with_its_count():
    from cycleio.report.answerfigures import saving_label

    info = pd.DataFrame([{"arm": "lustre", "n_cycles": 2, "verdict": "baseline", "saved_s": math.nan,
                          "saved_se_s": math.nan, "baseline_arm": "lustre"},
                         {"arm": "shm", "n_cycles": 2, "verdict": "slower", "saved_s": -0.4, "saved_se_s": 0.001,
                          "baseline_arm": "lustre"},
                         {"arm": "nl", "n_cycles": 1, "verdict": "faster (one cycle, no spread)", "saved_s": 1.9,
                          "saved_se_s": math.nan, "baseline_arm": "lustre"}]).set_index("arm", drop=False)
    assert saving_label(2.36, info.loc["lustre"], info) == "2.36 s (baseline)"
    assert saving_label(2.8, info.loc["shm"], info) == (
        "2.80 s: costs 0.40 s ± <0.01 s (std. error over 2 cycles)\nagainst lustre: slower")
    assert saving_label(0.5, info.loc["nl"], info) == (
        "0.50 s: saves 1.90 s (one cycle, no band)\nagainst lustre: faster (one cycle, no spread)")


def test_what_staging_buys_ends_its_axis_where_the_data_do(tmp_path, drawn_figures):
    from cycleio.report.answerfigures import staging_figure

    cycles = pd.DataFrame([{"arm": arm, "cycle": cycle, "wall_s": wall, "stage_in_s": 0.1, "run_io_s": 0.5,
                            "compute_s": 0.5, "stage_out_s": 0.2, "verify_s": 0.1}
                           for arm, walls in (("lustre", (2.3, 2.4)), ("shm", (2.8, 2.8))) for cycle, wall in
                           zip((C1, C2), walls)])
    table = pd.DataFrame([{"arm": "lustre", "n_cycles": 2, "verdict": "baseline", "saved_s": math.nan,
                           "saved_se_s": math.nan, "baseline_arm": "lustre"},
                          {"arm": "shm", "n_cycles": 2, "verdict": "slower", "saved_s": -0.45, "saved_se_s": 0.05,
                           "baseline_arm": "lustre"}])
    staging_figure(cycles, table, tmp_path / "staging.png", "fx")
    (fig,) = drawn_figures
    bars, notes = fig.axes
    longest = max(cycles.groupby("arm")["wall_s"].mean())
    assert longest <= bars.get_xlim()[1] <= 1.05 * longest
    assert [t.get_text() for t in notes.texts] == [
        "2.35 s (baseline)", "2.80 s: costs 0.45 s ± 0.05 s (std. error over 2 cycles)\nagainst lustre: slower"]
