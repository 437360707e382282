"""How close the steps come to the storage, as a user reads it (report.closeness: the verdicts, the io_gap
sentences, the goals), on the small hand-made efficiency and io_gap tables of conftest: not-timed rows never enter a
count or a median, and are named as not timed. The heatmap and the io_gap figure are test_answerfigures'."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import AT, FASTER, NOISE, NOT_TIMED, SLOWER, REPLAYS, efficiency_fixture, io_gap_fixture
from cycleio.report.closeness import (arm_gap_sentence, gap_sentence, replay_rows, timed_median, verdict_counts,
                                      verdict_sentence)
from cycleio.units import format_seconds


# ------------------------------------------------------------------------------------------------ verdicts


def test_verdict_sentence_counts_timed_rows_only_and_names_the_rest():
    rows = replay_rows(efficiency_fixture())
    assert len(rows) == len(REPLAYS)  # the pattern reference left out
    assert verdict_sentence(rows, "lustre") == (
        "lustre: 5 of 6 timed rows at the tier's speed or within noise; fcst write slower than the tier "
        "(0.71, band 0.65-0.78); post read within noise (0.80, band 0.71-1.04); not timed: prep read, prep write")
    assert verdict_sentence(rows[rows["arm"] == "shm"]) == (
        "1 of 2 timed rows at the tier's speed or within noise; fcst write faster than the replay (1.60, band "
        "1.40-1.80); post write within noise (0.70, band 0.50-1.30); not timed: prep write")
    assert verdict_counts(rows) == {AT: 4, NOISE: 2, SLOWER: 1, FASTER: 1, "reference not fair": 0, NOT_TIMED: 3}
    # the median of the six timed ratios (0.71 0.97 0.98 1.00 1.01 1.02): prep's 3.0 and 0.2 do not enter
    assert timed_median(rows[rows["arm"] == "lustre"]) == pytest.approx((0.99, 0.94, 1.04))


def test_a_row_without_a_fair_reference_counts_nowhere_and_is_named_apart():
    table = efficiency_fixture()
    fcst = (table["arm"] == "shm") & (table["step"] == "fcst") & (table["reference"] == "replay")
    table.loc[fcst, ["verdict", "efficiency", "efficiency_low", "efficiency_high"]] = ["reference not fair"] + [None] * 3
    rows = replay_rows(table)
    assert verdict_sentence(rows, "shm") == (
        "shm: 1 of 1 timed row at the tier's speed or within noise; post write within noise (0.70, band 0.50-1.30); "
        "reference not fair: fcst write; not timed: prep write")
    only_unfair = rows[(rows["arm"] == "shm") & (rows["step"] != "post")]
    assert verdict_sentence(only_unfair).startswith("no timed row has a fair reference; reference not fair: fcst write")
    assert verdict_counts(rows)["reference not fair"] == 1
    assert timed_median(rows[rows["arm"] == "shm"]) == pytest.approx((0.70, 0.50, 1.30))


def test_a_row_not_timed_is_not_timed_whatever_its_verdict_and_an_old_table_is_not_timed():
    table = efficiency_fixture()
    table.loc[1, "verdict"] = AT  # a not-timed row that claims a verdict
    rows = replay_rows(table)
    assert rows.loc[rows["step"].eq("prep") & rows["arm"].eq("lustre"), "verdict"].tolist() == [NOT_TIMED] * 2
    old = replay_rows(table.drop(columns=["timed", "verdict", "efficiency_low", "efficiency_high"]))
    assert not old["timed"].any() and set(old["verdict"]) == {NOT_TIMED}
    assert verdict_sentence(old, "shm") == ("shm: no row moved enough bytes or lasted long enough to time; "
                                            "not timed: prep write, fcst write, post write")
    assert math.isnan(timed_median(old)[0])


# ------------------------------------------------------------------------------------------------ io gap


def test_io_gap_sentence_in_the_issues_words():
    gap = io_gap_fixture()
    assert arm_gap_sentence(gap, "lustre") == (
        "of fcst's 6.0 s of writes, 3.5 s is the tier at its best, 2.1 s the file pattern (1,265 MiB in 38 files "
        "with an fsync each), 0.4 s (0.1-0.7) cycleio")
    assert arm_gap_sentence(gap, "shm") == (
        "of fcst's 1.2 s of writes, 0.9 s (0.8-1.0) is the replay of its 1,265 MiB in 38 files with an fsync each "
        "(the tier's best pattern was not measured), 0.3 s (0.2-0.4) cycleio")
    read = next(gap[(gap["arm"] == "lustre") & (gap["direction"] == "read")].itertuples())
    assert gap_sentence(read) == ("of fcst's 2.0 s of reads, 0.5 s is the tier at its best, 1.4 s (1.3-1.5) the "
                                  "file pattern (400 MiB in 12 files), 0.1 s (0-0.2) cycleio")
    assert arm_gap_sentence(gap.assign(timed=False), "lustre") is None
    assert arm_gap_sentence(gap, "nowhere") is None
    # a replay that beat the best pattern measured is the tier at its best: the parts still add up to the step
    faster = read._replace(pattern_s=-1.5, pattern_s_low=-1.9, pattern_s_high=-1.1, cycleio_s=-0.2,
                           cycleio_s_low=-0.3, cycleio_s_high=0.1, best_reference="easy, 2 tasks")
    assert gap_sentence(faster) == (
        f"of fcst's 2.0 s of reads, {format_seconds(read.replay_s)} ({format_seconds(read.replay_s_low, '')}-"
        f"{format_seconds(read.replay_s_high, '')}) is the tier at its best: its replay of the 400 MiB in 12 files, "
        "1.5 s faster than the best pattern measured (easy, 2 tasks), cycleio within noise (-0.3 to 0.1 s)")
    # a step that beat its replay, band and all: none of its seconds are cycleio's, and no split would add up
    beaten = read._replace(replay_s=2.3, replay_s_low=2.1, replay_s_high=2.6, cycleio_s=-0.3, cycleio_s_low=-0.6,
                           cycleio_s_high=-0.1)
    assert gap_sentence(beaten) == (
        "of fcst's 2.0 s of reads, none is cycleio's: its replay of the 400 MiB in 12 files took 2.3 s (2.1-2.6), "
        "0.3 s more than the step (the tier's best pattern would take 0.5 s)")
    assert gap_sentence(beaten._replace(tier_best_s=float("nan"))).endswith("(the tier's best pattern was not measured)")


def test_two_runs_agree_where_their_bands_overlap():
    from cycleio.report.closeness import bands_agree

    def run(eff, low, high):
        return pd.DataFrame([{"arm": "a", "tier": "t", "step": "fcst", "activity": "run:write", "reference": "replay",
                              "efficiency": eff, "efficiency_low": low, "efficiency_high": high, "timed": True,
                              "verdict": "x"}])

    assert bands_agree(run(0.9, 0.8, 1.0), run(1.05, 0.98, 1.1)) == {"rows": 1, "agree": 1, "disagree": []}
    apart = bands_agree(run(0.6, 0.55, 0.65), run(1.05, 0.98, 1.1))
    assert apart["agree"] == 0 and apart["disagree"] == ["a fcst write: 0.60 (0.55-0.65) against 1.05 (0.98-1.10)"]
    assert bands_agree(run(0.6, 0.55, 0.65), run(1.0, 0.9, 1.1).assign(timed=False))["rows"] == 0
