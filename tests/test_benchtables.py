"""Benchmark points and records to the benchmarks, efficiency and io_gap tables (report.benchtables): on the
checked-in study of tests/data (conftest's ``tables``, ``efficiency``, every number worked out by hand from its
points and records), and on paired jobs' events made by hand (conftest's run_event, replay_event): the verdicts, the
bands and the timed threshold."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import C0, C1, FX_T0 as T0, point_files, record_files, replay_event, row_of, run_event
from cycleio.benchmarks.common import COLUMNS
from cycleio.report.aggregate import load_events
from cycleio.report.benchtables import (EFFICIENCY_COLUMNS, TimedThreshold, benchmark_table, efficiency_table, io_gap_table,
                                        load_points, verdict)

MiB = 2**20


# ------------------------------------------------------------------------------------------------ the checked-in study


def test_benchmark_table_of_the_fixture_points():
    bench = benchmark_table(load_points(point_files()), TimedThreshold(min_bytes=32 * MiB, min_seconds=0.1))
    # per tier: io 2 points x (4 reps + 6 max/min/mean), metadata 6 + 9, field I/O 8 + 12 (the replays are records)
    assert len(bench) == 2 * (2 * 10 + 15 + 20)
    assert list(bench.columns) == [*COLUMNS, "timed"]
    assert str(bench["tasks"].dtype) == "Int64" and str(bench["cache_risk"].dtype) == "boolean"
    keys = ["tier", "benchmark", "pattern", "api", "tasks", "operation"]
    assert bench[keys].astype(str).apply(tuple, axis=1).is_monotonic_increasing  # sorted by point
    means = bench[(bench["benchmark"] == "io") & (bench["aggregate"] == "mean")].set_index(
        ["tier", "tasks", "operation"])["bw_MiB_per_s"]
    assert means[("shm", 1, "write")] == (480 + 544) / 2 == 512
    first = bench[(bench["tier"] == "shm") & (bench["benchmark"] == "io") & (bench["tasks"] == 1)
                  & (bench["operation"] == "write")]
    assert first["aggregate"].tolist() == ["rep", "rep", "max", "min", "mean"]
    assert first["bw_MiB_per_s"].tolist() == [480, 544, 544, 480, 512]
    # timed (benchtables.TimedThreshold: 32 MiB in 0.1 s): lustre's io points, 64 MiB in 0.2 s and more, are; shm's
    # 64 MiB in about 0.06 s are not, nor 8 MiB of field I/O, nor a metadata point over in 0.05 s
    timed = bench.groupby(["tier", "benchmark"])["timed"].agg(["all", "any"])
    assert timed.loc[("lustre", "io")].tolist() == [True, True] and not timed.loc[("shm", "io", )]["all"]
    assert not timed.loc[("lustre", "fieldio")]["any"] and not timed.loc[("shm", "fieldio")]["any"]
    stat = bench[(bench["tier"] == "lustre") & (bench["operation"] == "stat")]
    assert not stat["timed"].any() and bench[(bench["tier"] == "lustre") & (bench["operation"] == "create")]["timed"].all()


def test_a_benchmark_point_is_timed_by_its_bytes_and_seconds_and_its_aggregates_by_every_repetition():
    """The threshold the efficiency rows use (TimedThreshold.enough), on a fixed table: each repetition by its own bytes
    and seconds, max/min/mean only when every repetition of the point is timed, a metadata point by time alone."""
    from cycleio.report.benchtables import TimedThreshold, mark_timed

    def point(benchmark, operation, reps, job="a"):
        rows = [{"tier": "t", "benchmark": benchmark, "pattern": "easy", "api": "x", "tasks": 1,
                 "operation": operation, "source": "p.json", "job": job, "aggregate": "rep", "bytes": b,
                 "seconds": sec} for b, sec in reps]
        rows += [{**rows[0], "aggregate": how, "bytes": None, "seconds": None} for how in ("max", "min")]
        return rows + [{**rows[0], "aggregate": "mean"}]

    table = pd.DataFrame(point("io", "write", [(64 * MiB, 0.5), (64 * MiB, 0.6)])            # both timed
                         + point("io", "read", [(64 * MiB, 0.5), (64 * MiB, 0.003)])         # one rep too short
                         + point("io", "read", [(8 * MiB, 0.5), (8 * MiB, 0.5)], job="b")    # too few bytes
                         + point("metadata", "create", [(None, 0.2), (None, 0.3)]))          # by its seconds
    timed = mark_timed(table, TimedThreshold(min_bytes=32 * MiB, min_seconds=0.1)).tolist()
    assert timed == [True] * 5 + [True, False, False, False, False] + [False] * 5 + [True] * 5
    # a stricter threshold is the same helper's
    assert not mark_timed(table, TimedThreshold(min_bytes=128 * MiB, min_seconds=0.1))[:15].any()
    assert TimedThreshold().enough(32 * MiB, 0.1) and not TimedThreshold().enough(32 * MiB - 1, 1.0)
    # a phase bounded by time lasted its bound whatever the tier's speed: a slow tier's few MiB in it are timed, a
    # phase that moved nothing or ended too soon is not
    bounded = pd.DataFrame(point("io", "read", [(8 * MiB, 0.3), (2 * MiB, 0.3)], job="c")
                           + point("io", "write", [(0, 0.3), (8 * MiB, 0.3)], job="d")
                           + point("io", "write", [(8 * MiB, 0.3), (8 * MiB, 0.01)], job="e")).assign(stonewall_s=0.3)
    timed = mark_timed(bounded, TimedThreshold(min_bytes=32 * MiB, min_seconds=0.1)).tolist()
    assert timed == [True] * 5 + [False, True, False, False, False] + [True, False, False, False, False]
    assert TimedThreshold().enough(MiB, 0.3, bounded_by_time=True) and not TimedThreshold().enough(MiB, 0.3)


def test_a_point_with_a_blank_key_is_marked_as_its_repetitions_are():
    """mdtest rows have no job and IOR's summary rows no repetition: read from point files they are nullable
    blanks, and a blank key is a key (it once stopped benchmark_tables: "expected str instance, float found")."""
    from cycleio.report.benchtables import TimedThreshold, mark_timed

    rows = [{"tier": "t", "benchmark": "metadata", "pattern": "easy", "api": "mdtest", "tasks": 2,
             "operation": "create", "source": "easy.n2.rep0.stdout.txt", "job": None, "aggregate": how,
             "bytes": None, "seconds": seconds} for how, seconds in (("rep", 0.5), ("rep", 0.01), ("mean", 0.3))]
    rows += [{**rows[0], "operation": "stat", "aggregate": how, "seconds": 0.4} for how in ("rep", "rep", "mean")]
    table = pd.DataFrame(rows).astype({"job": "string", "source": "string", "bytes": "Int64"})
    assert mark_timed(table, TimedThreshold()).tolist() == [True, False, False, True, True, True]


def test_efficiency_of_the_fixture_by_hand(efficiency):
    shm_fcst = efficiency[(efficiency["arm"] == "shm") & (efficiency["step"] == "fcst")
                          & (efficiency["tier"] == "shm")]
    writes = shm_fcst[shm_fcst["activity"] == "run:write"].set_index("reference")
    # two forecasts of 2 x 16 MiB, each written in 2 x 1 s: 64 MiB in 4 s = 16 MiB/s, against the easy pattern's
    # (480 + 544) / 2 = 512 at 1 task and 1024 at 2 (the best); only the second is paired: 32 MiB in 2 s, against its
    # replay's repetitions at 60 and 68 MiB/s: their median seconds give 2 / (1/60 + 1/68) = 63.75 MiB/s
    assert (writes.loc["replay", "surrogate_bytes"], writes.loc["replay", "surrogate_covered_s"]) == (32 * MiB, 2.0)
    assert writes["surrogate_MiB_per_s"].tolist() == [16.0] * 3
    assert writes["reference_MiB_per_s"].to_dict() == pytest.approx({"easy, 1 task": 512.0, "easy, best": 1024.0,
                                                                     "replay": 63.75})
    assert writes["efficiency"].to_dict() == pytest.approx({"easy, 1 task": 16 / 512, "easy, best": 16 / 1024,
                                                            "replay": 16 / 63.75})
    # the band: the step over its reference's fastest and slowest repetition
    assert writes[["efficiency_low", "efficiency_high"]].loc["replay"].tolist() == pytest.approx([16 / 68, 16 / 60])
    assert writes[["efficiency_low", "efficiency_high"]].loc["easy, 1 task"].tolist() == pytest.approx([16 / 544, 16 / 480])
    # timed: 32 MiB per job (the least that is), 2 s on the step's side and 0.5 s on the replay's
    assert writes.loc["replay", "timed"] and writes.loc["replay", "verdict"] == "slower than the tier"
    assert writes.loc["easy, best", "reference_tasks"] == 2 and not writes["reference_from_cache"].any()
    reads = shm_fcst[shm_fcst["activity"] == "run:read"].set_index("reference")
    # 2 x (8 MiB in 0.5 s, 4 MiB in 0.25 s): 24 MiB in 1.5 s; the page cache held all of the 8 MiB, half of the 4;
    # the paired job's 12 MiB in 0.75 s against a replay at 120 and 136 MiB/s (from the page cache): 127.5 MiB/s
    assert reads.loc["easy, 1 task", "surrogate_MiB_per_s"] == 24 / 1.5 == reads.loc["replay", "surrogate_MiB_per_s"]
    assert reads.loc["replay", "surrogate_cached_fraction"] == pytest.approx((8 * 1.0 + 4 * 0.5) / 12)
    assert reads.loc["replay", "efficiency"] == pytest.approx(16 / 127.5) and reads.loc["replay", "reference_from_cache"]
    assert not reads.loc["replay", "timed"]  # 12 MiB: too little to time
    # the baseline writes its forecasts at half the speed, against lustre's fcst replay at 28 and 36 MiB/s: 31.5
    baseline = row_of(efficiency, arm="lustre", step="fcst", activity="run:write", reference="replay")
    assert (baseline["surrogate_MiB_per_s"], baseline["efficiency"]) == (8.0, pytest.approx(8 / 31.5))
    # copies are timed on the tier they land on and compare with its writes
    copies = efficiency[efficiency["activity"].str.endswith(":copy")]
    assert set(zip(copies["activity"], copies["tier"])) == {("stage_in:copy", "shm"), ("stage_out:copy", "lustre")}
    assert set(copies["reference_operation"]) == {"write"} and "replay" not in set(copies["reference"])
    # parallel copies count once per job, as in step_summary: shm's prep copies 2 MiB [0, 0.5] and 1 MiB [0, 0.25]
    # side by side, 3 MiB in 0.5 s (0.75 s added up); each forecast copies out 2 x 16 MiB side by side in 1 s
    columns = ["surrogate_jobs", "surrogate_bytes", "surrogate_summed_s", "surrogate_covered_s", "surrogate_MiB_per_s"]
    prep_in = row_of(efficiency, arm="shm", step="prep", activity="stage_in:copy", reference="easy, 1 task")
    assert prep_in[columns].tolist() == [1, 3 * MiB, 0.75, 0.5, 6.0]
    fcst_out = row_of(efficiency, arm="shm", step="fcst", activity="stage_out:copy", reference="easy, 1 task")
    assert fcst_out[columns].tolist() == [2, 64 * MiB, 4.0, 2.0, 32.0]
    assert fcst_out["efficiency"] == 32 / 128  # lustre's easy write at 1 task: (96 + 160) / 2
    # every surrogate group (arm, tier, step, activity) against both easy references, run groups also against their
    # replay: shm has 9 groups on shm (prep, fcst, post x read, write, stage-in copy) and 3 stage-out copies on
    # lustre, 6 with a replay; the baseline 6 run groups on lustre, all with a replay
    assert len(efficiency) == (12 * 2 + 6) + (6 * 2 + 6)


def test_efficiency_counts_a_jobs_overlapping_events_once_and_adds_up_the_jobs():
    """Within a job, events that overlap (ranks or streams writing at once) cover their union; two jobs that ran at
    the same time (two arms' or cycles' jobs) are two jobs' worth of seconds."""
    def write(cycle, start, seconds):
        return {"study": "fx", "arm": "shm", "cycle": cycle, "step": "fcst", "phase": "run", "op": "write",
                "tier": "shm", "bytes": 2 * MiB, "t_start": T0 + start, "seconds": seconds, "cached_fraction": math.nan}

    # job C0: [0, 2] and [1, 3] by two ranks, 3 s covered; job C1: [1, 4], beside C0, 3 s; a dump is no job's
    events = pd.DataFrame([write(C0, 0.0, 2.0), write(C0, 1.0, 2.0), write(C1, 1.0, 3.0),
                           {**write(C1, 5.0, 1.0), "step": "dump"}])
    table = efficiency_table(benchmark_table(load_points(point_files())), events)
    assert list(table.columns) == list(EFFICIENCY_COLUMNS) and set(table["step"]) == {"fcst"}
    row = row_of(table, reference="easy, 1 task")
    assert (row["surrogate_jobs"], row["surrogate_bytes"], row["surrogate_summed_s"], row["surrogate_covered_s"]) == (
        2, 6 * MiB, 7.0, 6.0)
    assert row["surrogate_MiB_per_s"] == 6 / 6.0 and row["efficiency"] == 1.0 / 512


def test_efficiency_without_matching_benchmarks_is_empty_with_its_columns(tables):
    events = load_events(record_files())
    bench = benchmark_table(load_points([p for p in point_files() if "metadata" in p.parts]))
    only_replays = efficiency_table(bench, events)
    assert set(only_replays["reference"]) == {"replay"}  # the paired replays are the jobs' own records
    empty = efficiency_table(bench, events[events["phase"] != "replay"])
    assert empty.empty and list(empty.columns) == list(EFFICIENCY_COLUMNS)


def test_a_benchmark_point_too_small_to_time_is_no_tiers_best_in_io_gap():
    """shm's read points (64 MiB in about 0.06 s) are not timed: its reads get no tier's best, its writes do."""
    from cycleio.report.benchtables import io_gap_table

    threshold = TimedThreshold(min_bytes=32 * MiB, min_seconds=0.1)  # the fixture's shm points fall under it
    gap = io_gap_table(benchmark_table(load_points(point_files()), threshold), load_events(record_files()), threshold)
    shm = gap[gap["tier"] == "shm"].set_index(["step", "direction"])
    assert shm.loc[("fcst", "read"), "best_reference"] == "" and pd.isna(shm.loc[("fcst", "read"), "tier_best_s"])
    assert shm.loc[("fcst", "write"), "best_reference"] == "easy, 2 tasks"
    assert gap[gap["tier"] == "lustre"]["tier_best_s"].notna().all()


def test_points_over_several_nodes_are_points_of_their_own_and_no_steps_reference():
    """The fixture's io points again at 3 nodes (three times the tasks and the bandwidth): rows of their own,
    sorted by nodes then tasks; the references a step's one-node job is compared with stay the one-node ones."""
    from cycleio.report.benchtables import io_gap_table

    points = load_points(point_files())
    io = points[points["benchmark"] == "io"].copy()
    io["nodes"], io["tasks"], io["bw_MiB_per_s"] = 3, io["tasks"] * 3, io["bw_MiB_per_s"] * 3
    one = benchmark_table(points)
    both = benchmark_table(pd.concat([points, io], ignore_index=True))
    assert len(both) == len(one) + len(io)
    lustre = both[(both["tier"] == "lustre") & (both["benchmark"] == "io") & (both["operation"] == "write")]
    assert list(dict.fromkeys(zip(lustre["nodes"], lustre["tasks"]))) == [(1, 1), (1, 2), (3, 3), (3, 6)]
    assert both["timed"].sum() == one["timed"].sum() + io.shape[0] - (~benchmark_table(io)["timed"]).sum()
    events = load_events(record_files())
    assert io_gap_table(both, events).equals(io_gap_table(one, events))
    assert efficiency_table(both, events).equals(efficiency_table(one, events))


# ------------------------------------------------------------------------------------------- paired jobs, by hand

@pytest.mark.parametrize("efficiency, low, high, timed, expected", [
    (0.95, 0.90, 1.02, True, "at the tier's speed"),
    (1.15, 1.10, 1.20, True, "at the tier's speed"),  # the tolerance's edge
    (0.70, 0.60, 1.05, True, "within noise"),  # outside the tolerance, but the band holds 1.0
    (0.70, 0.65, 0.78, True, "slower than the tier"),
    (1.60, 1.40, 1.90, True, "faster than the replay"),
    (0.20, 0.19, 0.21, False, "not timed"),
    (math.nan, math.nan, math.nan, True, "not timed"),
])
def test_verdict_of_a_ratio_and_its_band(efficiency, low, high, timed, expected):
    assert verdict(efficiency, low, high, timed, tolerance=0.15) == expected


def paired_events() -> pd.DataFrame:
    """Two cycles of fcst; only the second is paired: 256 MiB written in 2 s (128 MiB/s) against replays of
    1.6 and 2.4 s (160 and 106.7 MiB/s); and a prep of 1 MiB in 0.01 s against a replay of 0.008 s."""
    rows = [run_event("fcst", "write", "c0", 0, 256, 4.0),  # not paired: never in a replay row
            run_event("fcst", "write", "c1", 100, 128, 1.0), run_event("fcst", "write", "c1", 101, 128, 1.0),
            replay_event("fcst", "write", "c1", 103, 256, 1.6, 0), replay_event("fcst", "write", "c1", 105, 256, 2.4, 1),
            run_event("prep", "write", "c1", 90, 1, 0.01),
            replay_event("prep", "write", "c1", 91, 1, 0.008, 0), replay_event("prep", "write", "c1", 92, 1, 0.008, 1)]
    return pd.DataFrame(rows)


def no_benchmarks() -> pd.DataFrame:
    return pd.DataFrame(columns=["tier", "benchmark", "pattern", "operation", "tasks", "aggregate", "bw_MiB_per_s",
                                 "tool", "cache_risk"])


def test_replay_rows_pair_only_the_paired_jobs_and_carry_the_replays_band():
    table = efficiency_table(no_benchmarks(), paired_events())
    fcst = table[(table["step"] == "fcst") & (table["reference"] == "replay")].iloc[0]
    assert (fcst["surrogate_jobs"], fcst["surrogate_bytes"], fcst["surrogate_covered_s"]) == (1, 256 * MiB, 2.0)
    assert fcst["reference_MiB_per_s"] == pytest.approx(256 / 2.0)  # the median of 160 and 106.7
    assert fcst["efficiency"] == pytest.approx(1.0)
    assert (fcst["efficiency_low"], fcst["efficiency_high"]) == (pytest.approx(128 / 160), pytest.approx(128 / (256 / 2.4)))
    assert fcst["reference_repetitions"] == 2 and fcst["timed"] and fcst["verdict"] == "at the tier's speed"


def test_a_write_is_compared_with_the_repetitions_that_wrote_new_files_and_banded_by_all():
    """As the step did, the reference writes new files; the repetitions that rewrote files just deleted (pages
    just freed, the fast end on a VM with free page reporting) widen the band but are not the reference."""
    rows = [run_event("fcst", "write", "c1", 100, 256, 2.0),
            replay_event("fcst", "write", "c1", 103, 256, 2.2, 0, "new files"),
            replay_event("fcst", "write", "c1", 106, 256, 0.5, 1, "rewritten files"),
            replay_event("fcst", "write", "c1", 107, 256, 1.8, 2, "new files")]
    fcst = efficiency_table(no_benchmarks(), pd.DataFrame(rows)).query("reference == 'replay'").iloc[0]
    assert fcst["reference_MiB_per_s"] == pytest.approx(256 / 2.0)  # rep 0 and 2: the median of 2.2 and 1.8 s
    assert fcst["efficiency"] == pytest.approx(1.0) and fcst["reference_repetitions"] == 3
    assert (fcst["efficiency_low"], fcst["efficiency_high"]) == (pytest.approx(0.5 / 2.0), pytest.approx(2.2 / 2.0))
    gap = io_gap_table(no_benchmarks(), pd.DataFrame(rows)).iloc[0]
    assert gap["replay_s"] == pytest.approx(2.0) and (gap["replay_s_low"], gap["replay_s_high"]) == (0.5, 2.2)


def test_too_little_or_too_short_to_time_is_marked_not_timed_and_keeps_its_ratio():
    table = efficiency_table(no_benchmarks(), paired_events())
    prep = table[table["step"] == "prep"].iloc[0]
    assert not prep["timed"] and prep["verdict"] == "not timed"
    assert prep["efficiency"] == pytest.approx(100 / 125)  # kept, but no verdict uses it
    # a lower threshold times it (min_seconds still refuses its 0.01 s)
    assert not efficiency_table(no_benchmarks(), paired_events(), TimedThreshold(min_bytes=0)).query("step == 'prep'")["timed"].item()
    assert efficiency_table(no_benchmarks(), paired_events(), TimedThreshold(min_bytes=0, min_seconds=0.005)).query(
        "step == 'prep'")["timed"].item()


def test_io_gap_splits_a_steps_seconds_into_the_tier_the_pattern_and_cycleio():
    bench = pd.DataFrame([{"tier": "disk", "benchmark": "io", "pattern": "easy", "operation": "write", "tasks": 1,
                           "aggregate": "mean", "bw_MiB_per_s": 256.0, "tool": "fio", "cache_risk": False}])
    gap = io_gap_table(bench, paired_events()).set_index("step")
    fcst = gap.loc["fcst"]
    assert (fcst["step_s"], fcst["replay_s"], fcst["tier_best_s"]) == (2.0, 2.0, 1.0)
    assert (fcst["pattern_s"], fcst["cycleio_s"]) == (1.0, 0.0)
    assert (fcst["replay_s_low"], fcst["replay_s_high"]) == (1.6, 2.4)
    assert (fcst["cycleio_s_low"], fcst["cycleio_s_high"]) == (pytest.approx(-0.4), pytest.approx(0.4))
    assert fcst["best_reference"] == "easy, 1 task" and fcst["timed"] and not gap.loc["prep", "timed"]


def test_io_gap_sets_a_replay_of_fewer_bytes_than_its_step_at_the_replays_rate_for_the_steps_bytes():
    """benchmarks.replay.max_files caps a size class: the default study's forecast wrote 1,265 MiB and its replay
    971 MiB; the replay's own seconds made cycleio's share look 0.5 s larger than the efficiency row said."""
    rows = [run_event("fcst", "write", "c1", 100, 400, 2.0),
            replay_event("fcst", "write", "c1", 103, 300, 1.2, 0, "new files"),
            replay_event("fcst", "write", "c1", 106, 300, 0.6, 1, "rewritten files"),
            replay_event("fcst", "write", "c1", 108, 300, 1.5, 2, "new files")]
    gap = io_gap_table(no_benchmarks(), pd.DataFrame(rows)).iloc[0]
    # the new-file repetitions' median, 1.35 s for 300 MiB, is 1.8 s for the step's 400 MiB
    assert gap["replay_s"] == pytest.approx(1.8) and gap["cycleio_s"] == pytest.approx(0.2)
    assert (gap["replay_s_low"], gap["replay_s_high"]) == (pytest.approx(0.8), pytest.approx(2.0))
    row = efficiency_table(no_benchmarks(), pd.DataFrame(rows)).query("reference == 'replay'").iloc[0]
    assert row["efficiency"] == pytest.approx(gap["replay_s"] / gap["step_s"])  # the two answers agree


def test_a_paired_job_whose_io_was_not_replayed_keeps_a_not_timed_row():
    events = pd.DataFrame([run_event("anal", "write", "c1", 0, 1, 0.01),
                           {**replay_event("anal", "wall", "c1", 1, 0, 0.001, 0), "bytes": 0}])
    [row] = efficiency_table(no_benchmarks(), events).to_dict("records")
    assert (row["reference"], row["timed"], row["verdict"]) == ("replay", False, "not timed")
    assert math.isnan(row["efficiency"]) and row["reference_repetitions"] == 0
    assert io_gap_table(no_benchmarks(), events).empty


def test_a_row_against_a_benchmark_point_too_small_to_time_is_not_timed():
    point = {"tier": "disk", "benchmark": "io", "pattern": "easy", "operation": "write", "tasks": 1, "tool": "fio",
             "cache_risk": False, "bw_MiB_per_s": 256.0, "aggregate": "mean"}
    events = paired_events()
    for timed in (True, False):
        bench = pd.DataFrame([{**point, "timed": timed}])
        row = efficiency_table(bench, events).query("step == 'fcst' and reference == 'easy, 1 task'").iloc[0]
        assert row["timed"] == timed and (row["verdict"] == "not timed") != timed


def fresh_pairs(step_fresh: float | None, rewrite_fresh: float = 250.0, kind: str = "disk") -> pd.DataFrame:
    """One forecast writing 256 MiB in 1.0 s, having met ``step_fresh`` MiB of fresh pages; its new-file
    repetitions (1.0 and 0.8 s, 0 and 8 fresh MiB) and its rewrite (0.25 s, ``rewrite_fresh`` fresh MiB)."""
    tier = {"tier_kind": kind, "fs_type": "tmpfs" if kind == "memory" else "ext4"}
    return pd.DataFrame([
        run_event("fcst", "write", "c1", 100, 256, 1.0, fresh_MiB=step_fresh, **tier),
        {**replay_event("fcst", "write", "c1", 103, 256, 1.0, 0, "new files"), "fresh_MiB": 0.0, **tier},
        {**replay_event("fcst", "write", "c1", 105, 256, 0.25, 1, "rewritten files"), "fresh_MiB": rewrite_fresh, **tier},
        {**replay_event("fcst", "write", "c1", 106, 256, 0.8, 2, "new files"), "fresh_MiB": 8.0, **tier}])


def replay_row(events: pd.DataFrame) -> pd.Series:
    return efficiency_table(no_benchmarks(), events).query("reference == 'replay'").iloc[0]


def on_the_line(taken: float) -> float:
    """fresh_pairs' reference seconds where the step's fresh pages took ``taken`` MiB: on the least-squares line
    through its repetitions' (share, seconds for 256 MiB): (0, 1.0), (250/256, 0.25), (8/256, 0.8), held within
    their shares."""
    x = [0.0, 250 / 256, 8 / 256]
    y = [1.0, 0.25, 0.8]
    mx, my = sum(x) / 3, sum(y) / 3
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x)
    return my + slope * (min(max(taken / 256, 0.0), 250 / 256) - mx)


@pytest.mark.parametrize("step_fresh, taken", [
    (0.0, 0.0),  # the lowest share a repetition met
    (8.0, 8.0),
    (130.0, 130.0),  # on the line
    (250.0, 250.0),  # at the rewrite's share, the highest a repetition met
    (2000.0, 256.0),  # more than the file: it can fill its own bytes only, held at the rewrite's share
])
def test_a_write_is_compared_with_its_replay_at_the_share_of_fresh_pages_the_step_met(step_fresh, taken):
    """On a VM that hands freed memory to its host, a buffered write runs fast into pages freed a moment before:
    the reference is the replay's seconds at the step's share of them (report.pairedreference), on the line
    through its repetitions, the new-file ones (few fresh pages) and the rewrite (many)."""
    reference_s = on_the_line(taken)
    row = replay_row(fresh_pairs(step_fresh))
    assert row["reference_MiB_per_s"] == pytest.approx(256 / reference_s)
    assert row["efficiency"] == pytest.approx(reference_s / 1.0)
    assert row["surrogate_fresh_share"] == pytest.approx(taken / 256)
    # the band spans every repetition, as without the probe: 0.25 s to 1.0 s for the step's 1.0 s
    assert (row["efficiency_low"], row["efficiency_high"]) == (pytest.approx(0.25), pytest.approx(1.0))
    gap = io_gap_table(no_benchmarks(), fresh_pairs(step_fresh)).iloc[0]
    assert gap["replay_s"] == pytest.approx(reference_s)  # the two answers agree


@pytest.mark.parametrize("events, why", [
    (fresh_pairs(None), "the step was not probed (a machine that keeps its freed memory)"),
    (fresh_pairs(130.0, rewrite_fresh=40.0), "the repetitions met nearly the same share: no line through them"),
    (fresh_pairs(130.0, kind="memory"), "tmpfs takes 4 KiB pages, which the huge-page probe does not see"),
])
def test_without_a_share_to_place_it_a_write_is_compared_with_its_new_file_repetitions(events, why):
    row = replay_row(events)
    assert row["reference_MiB_per_s"] == pytest.approx(256 / 0.9), why  # the median of 1.0 and 0.8 s


def test_reads_are_never_placed_by_fresh_pages():
    events = pd.DataFrame([run_event("fcst", "read", "c1", 100, 256, 1.0, fresh_MiB=200.0),
                           {**replay_event("fcst", "read", "c1", 103, 256, 0.5, 0), "fresh_MiB": None},
                           {**replay_event("fcst", "read", "c1", 105, 256, 0.7, 1), "fresh_MiB": None}])
    assert replay_row(events)["reference_MiB_per_s"] == pytest.approx(256 / 0.6)
    assert math.isnan(replay_row(events)["surrogate_fresh_share"])  # the share is said of writes only


def test_a_step_s_fresh_pages_are_what_each_file_found_up_to_its_own_bytes():
    from cycleio.report.pairedreference import fresh_written_MiB

    io = pd.DataFrame({"bytes": [100 * MiB, 100 * MiB, 50 * MiB], "fresh_MiB": [300.0, 20.0, None]})
    assert fresh_written_MiB(io) == pytest.approx(120.0)  # the last file was not probed: none counted
    assert math.isnan(fresh_written_MiB(io.assign(fresh_MiB=None)))  # nothing probed
    assert math.isnan(fresh_written_MiB(io.drop(columns="fresh_MiB")))  # records from before the probe


def test_fresh_pages_are_counted_where_the_step_met_them_file_by_file():
    """Pages freed while a step runs (by a job beside it, by the step itself) show in the probe before the next
    file (hostmemory.fresh_before_write): a step whose first half found fresh pages and second half none met a
    share of one half."""
    events = fresh_pairs(250.0)
    first = events.iloc[0]
    late = {**first.to_dict(), "t_start": first["t_start"] + 5.0, "bytes": 128 * MiB, "seconds": 0.5, "fresh_MiB": 0.0}
    events.loc[0, ["bytes", "seconds"]] = [128 * MiB, 0.5]
    row = replay_row(pd.concat([events, pd.DataFrame([late])], ignore_index=True))
    assert row["surrogate_fresh_share"] == pytest.approx(0.5)
    assert row["reference_MiB_per_s"] == pytest.approx(256 / on_the_line(128.0))


def unmatched_job(cycle: str = "c2") -> pd.DataFrame:
    """A paired job whose step met no fresh page (share 0) while every repetition of its replay met fresh pages for
    all its bytes (share 1): its replay did not meet its step's page state (pairedreference.page_state_met)."""
    events = fresh_pairs(0.0).assign(cycle=cycle)
    events.loc[events["phase"] == "replay", ["fresh_MiB", "seconds"]] = [256.0, 0.25]
    return events


def test_a_job_whose_replay_met_another_page_state_than_its_step_is_left_out_of_its_row():
    both = pd.concat([fresh_pairs(130.0), unmatched_job()], ignore_index=True)
    row, alone = replay_row(both), replay_row(fresh_pairs(130.0))
    assert (row["surrogate_jobs"], row["jobs_unmatched"], alone["jobs_unmatched"]) == (1, 1, 0)
    for column in ("reference_MiB_per_s", "efficiency", "efficiency_low", "efficiency_high", "surrogate_fresh_share"):
        assert row[column] == pytest.approx(alone[column]), column
    gap, gap_alone = (io_gap_table(no_benchmarks(), events).iloc[0] for events in (both, fresh_pairs(130.0)))
    assert (gap["jobs"], gap["replay_s"]) == (1, pytest.approx(gap_alone["replay_s"]))


def test_a_row_whose_every_job_met_another_page_state_than_its_replay_has_no_fair_reference():
    row = replay_row(unmatched_job())
    assert row["verdict"] == "reference not fair" and row["jobs_unmatched"] == 1 and math.isnan(row["efficiency"])
    assert not io_gap_table(no_benchmarks(), unmatched_job()).iloc[0]["timed"]


def test_page_states_are_compared_only_where_they_were_told():
    from cycleio.report.benchtables import paired_jobs
    from cycleio.report.pairedreference import page_state_met

    job = paired_jobs(unmatched_job())
    assert not page_state_met(job)
    assert page_state_met(paired_jobs(unmatched_job().assign(fresh_MiB=None)))  # a machine that keeps its memory
    assert page_state_met(job.assign(memory_tier=True))  # tmpfs: the probe cannot tell (reference_fair says so)
    assert page_state_met(paired_jobs(unmatched_job().assign(op="read")))


def test_a_write_on_a_memory_tier_of_a_probed_machine_has_no_fair_reference():
    """tmpfs takes 4 KiB pages, which the probe does not see: on a machine that hands freed memory to its host the
    replay's writes there say more of the page state than of the step (pairedreference.reference_fair)."""
    row = replay_row(fresh_pairs(130.0, kind="memory"))
    assert row["verdict"] == "reference not fair" and row["timed"]
    assert math.isnan(row["efficiency"]) and math.isnan(row["efficiency_low"]) and math.isnan(row["efficiency_high"])
    assert row["surrogate_MiB_per_s"] == pytest.approx(256.0) and row["reference_MiB_per_s"] == pytest.approx(256 / 0.9)
    # where nothing was probed (a machine that keeps its freed memory) the two page states agree: a fair reference
    assert replay_row(fresh_pairs(None, kind="memory"))["verdict"] == "at the tier's speed"
    assert not io_gap_table(no_benchmarks(), fresh_pairs(130.0, kind="memory")).iloc[0]["timed"]  # no split either


def test_a_write_on_a_memory_tier_of_a_probed_machine_not_replayed_says_its_reference_is_not_fair():
    """Such writes are not replayed (benchmarks.paired): the job's replay has only its wall record, and the row
    still says why it has no ratio, where an unreplayed write too short to time says not timed."""
    events = fresh_pairs(130.0, kind="memory")
    wall = {**replay_event("fcst", "wall", "c1", 103, 0, 0.01, 0), "tier_kind": "memory", "fs_type": "tmpfs"}
    unreplayed = pd.concat([events[events["phase"] != "replay"], pd.DataFrame([wall])], ignore_index=True)
    row = replay_row(unreplayed)
    assert row["verdict"] == "reference not fair" and row["timed"] and math.isnan(row["efficiency"])
    short = unreplayed.assign(seconds=unreplayed["seconds"].where(unreplayed["phase"] == "replay", 0.001))
    assert replay_row(short)["verdict"] == "not timed"

