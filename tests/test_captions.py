"""The report's captions (report.captions): each table's and answer's sentence from fixed tables; a table not
there yet or of another version says so instead of stopping the report."""

from __future__ import annotations

import pandas as pd

from conftest import efficiency_fixture, io_gap_fixture


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


def test_captions_count_the_verdicts_and_name_the_rows_not_timed(tmp_path):
    from cycleio.report.captions import table_numbers

    efficiency_fixture().to_csv(tmp_path / "efficiency.csv", index=False)
    io_gap_fixture().to_csv(tmp_path / "io_gap.csv", index=False)
    numbers = table_numbers(tmp_path / "efficiency.csv", tmp_path / "io_gap.csv")
    assert numbers["efficiency"] == (
        "8 of 11 rows against the replay are timed: 4 at the tier's speed, 2 within noise, 1 slower than the tier, "
        "1 faster than the replay; not timed (too few bytes or too short to time, ratio not read): lustre prep read, "
        "lustre prep write, shm prep write.")
    assert numbers["io_gap"].startswith("lustre: of fcst's 6.0 s of writes, 3.5 s is the tier at its best, ")
    assert "; shm: of fcst's 1.2 s of writes, 0.9 s (0.8-1.0) is the replay" in numbers["io_gap"]


# ------------------------------------------------------------------------------------------------ goals

def test_efficiency_goals_count_timed_rows_only():
    from cycleio.report.closeness import efficiency_goals

    table = pd.DataFrame([
        {"arm": "a", "tier": "t", "step": "fcst", "activity": "run:write", "reference": "replay", "efficiency": 0.95,
         "efficiency_low": 0.9, "efficiency_high": 1.0, "timed": True, "verdict": "at the tier's speed"},
        {"arm": "a", "tier": "t", "step": "anal", "activity": "run:write", "reference": "replay", "efficiency": 1.7,
         "efficiency_low": 0.9, "efficiency_high": 3.8, "timed": True, "verdict": "within noise"},  # band holds 1
        {"arm": "b", "tier": "t", "step": "fcst", "activity": "run:write", "reference": "replay", "efficiency": 0.5,
         "efficiency_low": 0.45, "efficiency_high": 0.55, "timed": True, "verdict": "slower than the tier"},
        {"arm": "b", "tier": "t", "step": "prep", "activity": "run:write", "reference": "replay", "efficiency": 9.0,
         "efficiency_low": 8.0, "efficiency_high": 10.0, "timed": False, "verdict": "not timed"},
        {"arm": "b", "tier": "t", "step": "fcst", "activity": "run:read", "reference": "replay", "efficiency": 2.0,
         "efficiency_low": 1.9, "efficiency_high": 2.1, "timed": True, "verdict": "faster than the replay"},
    ])
    goals = efficiency_goals(table)
    assert goals["write"] == {"timed_rows": 3, "median": 0.95, "median_ok": True}
    assert goals["read"]["timed_rows"] == 1 and goals["read"]["median_ok"] is None  # three timed reads to be judged
    assert goals["rows"]["timed_rows"] == 4 and goals["rows"]["share_close"] == 0.5 and not goals["rows"]["share_ok"]
    assert goals["rows"]["outside"] == ["b fcst read 2.00", "b fcst write 0.50"]  # in step order, reads first
