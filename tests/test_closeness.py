"""How close the steps come to the storage, as a user reads it (report.closeness, the efficiency heatmap, the
io_gap figure and sentences), on small hand-made efficiency and io_gap tables: not-timed rows never colour a cell,
never enter a count or a median, and are named as not timed."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

from cycleio.report.closeness import (arm_gap_sentence, gap_sentence, replay_rows, timed_median, verdict_counts,
                                      verdict_sentence)

MiB = 2**20
NAN = math.nan
AT, NOISE, SLOWER, FASTER, NOT_TIMED = ("at the tier's speed", "within noise", "slower than the tier",
                                        "faster than the replay", "not timed")
# arm, tier, step, activity, efficiency, low, high, timed, verdict
REPLAYS = [
    ("lustre", "lustre", "prep", "run:read", 3.0, 2.0, 4.0, False, NOT_TIMED),
    ("lustre", "lustre", "prep", "run:write", 0.2, 0.1, 0.3, False, NOT_TIMED),
    ("lustre", "lustre", "anal", "run:read", 0.98, 0.93, 1.04, True, AT),
    ("lustre", "lustre", "anal", "run:write", 1.01, 0.99, 1.03, True, AT),
    ("lustre", "lustre", "fcst", "run:read", 1.00, 0.95, 1.06, True, AT),
    ("lustre", "lustre", "fcst", "run:write", 0.71, 0.65, 0.78, True, SLOWER),
    ("lustre", "lustre", "post", "run:read", 0.80, 0.71, 1.04, True, NOISE),
    ("lustre", "lustre", "post", "run:write", 1.02, 0.98, 1.05, True, AT),
    ("shm", "shm", "prep", "run:write", 9.0, 5.0, 12.0, False, NOT_TIMED),
    ("shm", "shm", "fcst", "run:write", 1.6, 1.4, 1.8, True, FASTER),
    ("shm", "shm", "post", "run:write", 0.7, 0.5, 1.3, True, NOISE),
]


def through_csv(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as the rules' commands read it back."""
    text = io.StringIO()
    frame.to_csv(text, index=False)
    text.seek(0)
    return pd.read_csv(text)


def efficiency_fixture() -> pd.DataFrame:
    rows = [{"study": "fx", "arm": arm, "tier": tier, "step": step, "activity": activity, "reference": "replay",
             "surrogate_bytes": 64 * MiB if timed else MiB, "efficiency": eff, "reference_repetitions": 5,
             "efficiency_low": low, "efficiency_high": high, "timed": timed, "verdict": verdict}
            for arm, tier, step, activity, eff, low, high, timed, verdict in REPLAYS]
    rows.append({**rows[5], "reference": "easy, best", "efficiency": 0.1, "verdict": SLOWER})  # not a replay
    return through_csv(pd.DataFrame(rows))


GAP_COLUMNS = ["study", "arm", "tier", "step", "direction", "jobs", "files_per_job", "bytes_per_job", "step_s",
               "replay_s", "replay_s_low", "replay_s_high", "best_reference", "best_tool", "best_MiB_per_s",
               "tier_best_s", "pattern_s", "pattern_s_low", "pattern_s_high", "cycleio_s", "cycleio_s_low",
               "cycleio_s_high", "timed"]


def io_gap_fixture() -> pd.DataFrame:
    rows = [
        # the issue's example: the pattern's band rounds to its value, cycleio's does not
        ("lustre", "lustre", "fcst", "write", 2, 38, 1265 * MiB, 6.0, 5.6, 5.3, 5.9, "easy, 2 tasks", "fio", 361.0,
         3.5, 2.1, 2.08, 2.12, 0.4, 0.1, 0.7, True),
        ("lustre", "lustre", "fcst", "read", 2, 12, 400 * MiB, 2.0, 1.9, 1.8, 2.0, "easy, 2 tasks", "fio", 800.0,
         0.5, 1.4, 1.3, 1.5, 0.1, 0.0, 0.2, True),
        # the most seconds of all, but not timed: never picked
        ("lustre", "lustre", "prep", "write", 2, 500, 1 * MiB, 10.0, 0.1, 0.1, 0.1, "easy, 2 tasks", "fio", 361.0,
         0.003, 0.1, 0.1, 0.1, 9.9, 9.9, 9.9, False),
        # the tier's best pattern not measured on shm
        ("shm", "shm", "fcst", "write", 2, 38, 1265 * MiB, 1.2, 0.9, 0.8, 1.0, NAN, NAN, NAN,
         NAN, NAN, NAN, NAN, 0.3, 0.2, 0.4, True),
        # the step faster than its replay: cycleio's part is negative
        ("shm", "shm", "post", "write", 2, 24, 300 * MiB, 0.5, 0.6, 0.55, 0.65, NAN, NAN, NAN,
         NAN, NAN, NAN, NAN, -0.1, -0.15, -0.05, True),
    ]
    return through_csv(pd.DataFrame([("fx", *row) for row in rows], columns=GAP_COLUMNS))


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
    assert verdict_counts(rows) == {AT: 4, NOISE: 2, SLOWER: 1, FASTER: 1, NOT_TIMED: 3}
    # the median of the six timed ratios (0.71 0.97 0.98 1.00 1.01 1.02): prep's 3.0 and 0.2 do not enter
    assert timed_median(rows[rows["arm"] == "lustre"]) == pytest.approx((0.99, 0.94, 1.04))


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


# ------------------------------------------------------------------------------------------------ heatmap


def test_heatmap_cells_colour_timed_rows_only_and_mark_the_close_ones():
    from cycleio.report.answerfigures import efficiency_cells, efficiency_matrix

    cells = efficiency_cells(efficiency_fixture()).set_index(["arm", "step", "direction"])
    assert len(cells) == len(REPLAYS)
    untimed = cells[~cells["timed"]]
    assert untimed["shade"].isna().all() and set(untimed["label"]) == {"not timed"}  # no colour, no ratio shown
    assert cells.loc[("lustre", "fcst", "write"), "shade"] == pytest.approx(math.log2(0.71))
    assert cells.loc[("lustre", "fcst", "write"), "label"] == "0.71\n0.65-0.78"
    assert cells.loc[("lustre", "post", "read"), "label"] == "0.80 ≈\n0.71-1.04"  # within noise
    assert cells.loc[("lustre", "anal", "write"), "label"] == "1.01 =\n0.99-1.03"  # at the tier's speed
    shade = efficiency_matrix(cells.reset_index())
    assert list(shade.index) == ["lustre", "shm"]
    assert list(shade.columns) == [(s, d) for s in ("prep", "anal", "fcst", "post") for d in ("read", "write")]
    assert int(shade.notna().to_numpy().sum()) == 8  # the timed rows
    assert math.isnan(shade.loc["shm", ("anal", "read")])  # no replay there: no cell either


@pytest.mark.parametrize("table", ["fixture", "all not timed", "empty", "none"])
def test_heatmap_writes_png_and_svg(tmp_path, table):
    from cycleio.report.answerfigures import efficiency_heatmap

    efficiency = {"fixture": efficiency_fixture(), "all not timed": efficiency_fixture().assign(timed=False),
                  "empty": efficiency_fixture().iloc[0:0], "none": None}[table]
    paths = [tmp_path / "heatmap.png", tmp_path / "heatmap.svg"]
    efficiency_heatmap(efficiency, paths, "fx")
    assert all(p.stat().st_size > 0 for p in paths)


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
    # a part whose whole band is below zero took none of the seconds: the sentence says by how much it was beaten
    faster = read._replace(pattern_s=-1.5, pattern_s_low=-1.9, pattern_s_high=-1.1, cycleio_s=-0.2,
                           cycleio_s_low=-0.3, cycleio_s_high=-0.1, best_reference="easy, 2 tasks")
    assert gap_sentence(faster) == (
        "of fcst's 2.0 s of reads, 0.5 s is the tier at its best, none for the file pattern (400 MiB in 12 files) (its "
        "replay beat the tier's best pattern, easy, 2 tasks by 1.5 s), none for cycleio (the step beat its replay by "
        "0.2 s)")
    assert gap_sentence(faster._replace(cycleio_s_high=0.1)).endswith("cycleio within noise (-0.3 to 0.1 s)")


def test_gap_segments_stack_to_the_steps_seconds():
    from cycleio.report.answerfigures import gap_segments

    lustre, _, _, shm, shm_post = io_gap_fixture().itertuples()
    segments = gap_segments(lustre)
    assert [s["part"] for s in segments] == ["tier_best_s", "pattern_s", "cycleio_s"]
    assert [s["left"] for s in segments] == pytest.approx([0, 3.5, 5.6])
    assert segments[-1]["left"] + segments[-1]["seconds"] == pytest.approx(lustre.step_s)
    assert (segments[2]["x_low"], segments[2]["x_high"]) == pytest.approx((5.7, 6.3))
    assert math.isnan(segments[0]["x_low"])  # the tier's best has no band
    assert [s["part"] for s in gap_segments(shm)] == ["replay_s", "cycleio_s"]
    assert gap_segments(shm_post)[-1]["seconds"] == -0.1


@pytest.mark.parametrize("table", ["fixture", "blank tier_best_s", "empty", "none"])
def test_io_gap_figure_writes_png_and_svg(tmp_path, table):
    from cycleio.report.answerfigures import io_gap_figure

    gap = {"fixture": io_gap_fixture(), "blank tier_best_s": io_gap_fixture().assign(tier_best_s=NAN, pattern_s=NAN),
           "empty": io_gap_fixture().iloc[0:0], "none": None}[table]
    paths = [tmp_path / "io_gap.png", tmp_path / "io_gap.svg"]
    io_gap_figure(gap, paths, "fx")
    assert all(p.stat().st_size > 0 for p in paths)


def test_io_gap_command_draws_from_the_table(tmp_path):
    from cycleio.cli import main

    io_gap_fixture().to_csv(tmp_path / "io_gap.csv", index=False)
    assert main(["io-gap-figure", "--io-gap", str(tmp_path / "io_gap.csv"), "--png", str(tmp_path / "g.png"),
                 "--svg", str(tmp_path / "g.svg"), "--title", "fx"]) == 0
    assert (tmp_path / "g.png").stat().st_size > 0 and (tmp_path / "g.svg").stat().st_size > 0


# ------------------------------------------------------------------------------------------------ captions


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
