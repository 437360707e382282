"""Post-processing on the checked-in study of tests/data: records and manifests to tables (aggregate), benchmark
points to the benchmarks and efficiency tables (benchtables), and every figure, without fio or MPI.

The study ``fx`` (tests/data/make_fixtures.py writes it): arms ``lustre`` (the baseline, on the persistent tier,
every offset and duration twice the staged arm's) and ``shm`` (staged); cycles 2026010100 (half: fcst, post
after the cold start) and 2026010106 (dump, prep, fcst, post). Times are multiples of 1/64 s and sizes whole MiB:
every expected number below is worked out by hand from the records, with offsets from the job's start.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import assert_axes_carry_data, assert_png_drawn, bar_sizes

from cycleio.benchmarks.common import COLUMNS
from cycleio.benchmarks.replay import replay_specs
from cycleio.benchmarks.specs import ReplaySpec
from cycleio.report.aggregate import StudyTables, aggregate, load_events
from cycleio.report.benchfigures import fieldio_figure, scaling_figure
from cycleio.report.benchtables import (EFFICIENCY_COLUMNS, benchmark_table, efficiency_table, load_points,
                                        write_benchmark_tables)
from cycleio.report.figures import throughput_figure
from cycleio.records import ARRIVALS, RECORD_FIELDS
from cycleio.report.writefigures import write_strategy_figure, write_times

DATA = Path(__file__).resolve().parent / "data"
RECORDS, POINTS = DATA / "records", DATA / "points"
MiB = 2**20
T0 = 1_795_392_000.0  # the first cycle's jobs start at T0 + 10 (prep), 20 (fcst), 40 (post); the second's 100 s later
ARMS = ("lustre", "shm")
C0, C1 = "2026010100", "2026010106"


def record_files() -> list[Path]:
    """Every job's records in the order the workflow passes them (rules/common.smk all_job_files)."""
    files = [RECORDS / "arms" / arm / "coldstart.records.jsonl" for arm in ARMS]
    files += [RECORDS / "arms" / arm / C1 / "dump.records.jsonl" for arm in ARMS]
    for cycle, steps in ((C0, ("fcst", "post")), (C1, ("prep", "fcst", "post"))):
        files += [RECORDS / "arms" / arm / cycle / f"{step}.records.jsonl" for arm in ARMS for step in steps]
    return files


def point_files() -> list[Path]:
    return sorted(POINTS.rglob("*.csv"))


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fx") / "tables"
    records = record_files()
    manifests = [p.with_name(p.name.replace(".records.jsonl", ".manifest.json")) for p in records]
    aggregate(records, StudyTables(events=out / "io_events.parquet", events_csv=out / "io_events.csv",
                                   summary=out / "step_summary.csv", throughput=out / "phase_throughput.csv",
                                   staging=out / "staging.csv", tiers=out / "tiers.csv"),
              [p for p in manifests if p.exists()])
    return out


def read_csv(tables: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(tables / name, dtype={"cycle": str})


def row_of(frame: pd.DataFrame, **keys) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for column, value in keys.items():
        mask &= frame[column] == value
    assert mask.sum() == 1, f"{mask.sum()} rows for {keys}"
    return frame[mask].iloc[0]


# ------------------------------------------------------------------------------------------------ the fixture


def test_fixture_files_are_what_make_fixtures_writes():
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    make_fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_fixtures)
    assert make_fixtures.main(["--check"]) == 0, "regenerate with: python tests/data/make_fixtures.py"
    # the script spells the production formats out; they must still be the production ones
    assert make_fixtures.RECORD_FIELDS == RECORD_FIELDS
    assert make_fixtures.POINT_COLUMNS == COLUMNS
    assert sorted(record_files()) == sorted(RECORDS.rglob("*.records.jsonl"))
    for path in record_files():
        for line in path.read_text().splitlines():
            assert list(json.loads(line)) == sorted(RECORD_FIELDS), path  # as RecordLog.write writes them
    for path in point_files():
        assert path.read_text().splitlines()[0] == ",".join(COLUMNS), path


# ------------------------------------------------------------------------------------------------ aggregate

# shm/2026010106/prep, offsets from its start (T0 + 110): stage-in copies [0, 0.5] (2 MiB) and [0, 0.25] (1 MiB)
# side by side, sync [0.5, 0.5625]; their checksums [0.5625, 0.6875] and [0.5625, 0.625]; reads [1, 1.25] and
# [1.25, 1.375]; compute [1.375, 1.875]; generate [1.875, 2]; write 4 MiB [2, 2.5]; rename [2.5, 2.5625];
# stage-out copy [3, 3.25], sync [3.25, 3.375]; checksum [3.375, 3.5]; cleanup [3.5, 3.5625].
SHM_PREP = {
    "t_start": T0 + 110, "wall_s": 3.5625, "stage_in_s": 0.5625, "run_s": 1.5625, "stage_out_s": 0.375,
    "verify_s": 0.125 + 0.125, "cleanup_s": 0.0625,
    "io_s": 0.6875 + 0.375 + 0.5625 + 0.5,  # [0, 0.6875], [1, 1.375], [2, 2.5625], [3, 3.5]
    "run_io_s": 0.375 + 0.5625, "compute_s": 0.5, "codec_s": 0.0, "generate_s": 0.125, "metadata_s": 0.0,
    "staging_s": 0.5625 + 0.375, "io_fraction": 2.125 / 3.5625,
    "bytes_read": 3 * MiB, "bytes_written": 4 * MiB, "bytes_staged_in": 3 * MiB, "bytes_staged_out": 4 * MiB,
    "write_MiB_per_s": 4 / 0.5, "staging_MiB_per_s": 7 / 0.9375,
}
# The baseline's prep: no staging and no checksums on scratch, every offset and duration x2; the job's first
# record is its first read (offset 2).
LUSTRE_PREP = {
    "t_start": T0 + 112, "wall_s": 7.0 - 2.0, "stage_in_s": 0.0, "run_s": 3.125, "stage_out_s": 0.0,
    "verify_s": 0.25, "cleanup_s": 0.0, "io_s": 0.75 + 1.125 + 0.25, "run_io_s": 0.75 + 1.125, "compute_s": 1.0,
    "generate_s": 0.25, "staging_s": 0.0, "io_fraction": 2.125 / 5.0, "bytes_read": 3 * MiB,
    "bytes_written": 4 * MiB, "bytes_staged_in": 0, "bytes_staged_out": 0, "write_MiB_per_s": 4 / 1.0,
}
# shm fcst: reads 8 MiB [2, 2.5] and 4 MiB [2.75, 3] with a locate between; two output hours, each: both ranks
# compute 1 s and generate 0.25 s side by side (counted once), define and encode 0.125 s, write 16 MiB in 1 s,
# rename 0.0625 s; run [2, 8.125] without a gap; stage-in [0, 1.125] plus checksums to 1.375, stage-out
# [9, 10.25] plus checksums to 10.75, cleanup to 11.
SHM_FCST = {
    "wall_s": 11.0, "stage_in_s": 1.125, "run_s": 6.125, "stage_out_s": 1.25, "verify_s": 0.25 + 0.5,
    "cleanup_s": 0.25, "io_s": 1.375 + 0.75 + 2 * 1.0625 + 1.75, "run_io_s": 0.75 + 2 * 1.0625, "compute_s": 2.0,
    "codec_s": 0.25, "generate_s": 0.5, "metadata_s": 0.25 + 0.25, "bytes_read": 12 * MiB,
    "bytes_written": 32 * MiB, "bytes_staged_in": 12 * MiB, "bytes_staged_out": 32 * MiB,
    "write_MiB_per_s": 32 / 2.0, "staging_MiB_per_s": 44 / 2.375,
}


def assert_row(row: pd.Series, expected: dict) -> None:
    for column, value in expected.items():
        assert row[column] == pytest.approx(value, rel=1e-12, abs=1e-9), (column, row[column], value)


def test_step_summary_of_the_fixture_by_hand(tables):
    summary = read_csv(tables, "step_summary.csv")
    jobs = [(arm, cycle, step) for arm in ARMS for cycle, steps in ((C0, ("fcst", "post")),
                                                                    (C1, ("fcst", "post", "prep")))
            for step in steps]
    # the cold start and the observation dumps arrive from outside the cycle: no rows of their own
    assert list(summary[["arm", "cycle", "step"]].itertuples(index=False, name=None)) == jobs
    assert_row(row_of(summary, arm="shm", cycle=C1, step="prep"), SHM_PREP)
    assert_row(row_of(summary, arm="lustre", cycle=C1, step="prep"), LUSTRE_PREP)
    for cycle in (C0, C1):
        assert_row(row_of(summary, arm="shm", cycle=cycle, step="fcst"), SHM_FCST)
        baseline = row_of(summary, arm="lustre", cycle=cycle, step="fcst")
        assert baseline["write_MiB_per_s"] == 32 / 4.0 and baseline["run_s"] == 2 * 6.125
        assert math.isnan(baseline["staging_MiB_per_s"])
        # post: 2 x 2 MiB of GRIB2 in 2 x 0.25 s; decode and encode are codec, locate is metadata
        post = row_of(summary, arm="shm", cycle=cycle, step="post")
        assert (post["write_MiB_per_s"], post["codec_s"], post["metadata_s"]) == (4 / 0.5, 0.375, 0.125)


# (arm, tier, activity): bytes, summed seconds, events, covered seconds, over both cycles (the prep only in the
# second). The staged arm's run I/O lands on shm, its copies out and their checksums on lustre; arrivals (cold
# start, dumps: writes and renames on lustre) are left out.
PHASE_THROUGHPUT = {
    ("shm", "lustre", "stage_out:copy"): (76 * MiB, 2 * (2.25 + 0.3125) + 0.375, 14, 2 * (1.25 + 0.1875) + 0.375),
    ("shm", "lustre", "verify:checksum"): (76 * MiB, 2 * (1.0 + 0.125) + 0.125, 9, 2 * (0.5 + 0.0625) + 0.125),
    ("shm", "shm", "run:read"): (91 * MiB, 2 * (0.75 + 1.0) + 0.375, 10, 2 * (0.75 + 1.0) + 0.375),
    ("shm", "shm", "run:rename"): (0, 2 * (0.125 + 0.125) + 0.0625, 9, 2 * (0.125 + 0.125) + 0.0625),
    ("shm", "shm", "run:write"): (76 * MiB, 2 * (2.0 + 0.5) + 0.5, 9, 2 * (2.0 + 0.5) + 0.5),
    ("shm", "shm", "stage_in:copy"): (91 * MiB, 2 * (1.625 + 1.0625) + 0.8125, 15, 2 * (1.125 + 0.5625) + 0.5625),
    ("shm", "shm", "verify:checksum"): (91 * MiB, 2 * (0.375 + 0.5) + 0.1875, 10, 2 * (0.25 + 0.25) + 0.125),
}
PHASE_THROUGHPUT |= {("lustre", "lustre", activity): (nbytes, 2 * summed, n, 2 * covered)
                     for (arm, tier, activity), (nbytes, summed, n, covered) in PHASE_THROUGHPUT.items()
                     if tier == "shm" and activity.startswith("run:")}
PHASE_THROUGHPUT[("lustre", "lustre", "verify:checksum")] = (76 * MiB, 2 * 2.375, 9, 2 * 1.25)


def test_phase_throughput_of_the_fixture_by_hand(tables):
    table = read_csv(tables, "phase_throughput.csv")
    assert list(table[["arm", "tier", "activity"]].itertuples(index=False, name=None)) == sorted(PHASE_THROUGHPUT)
    for row in table.itertuples(index=False):
        nbytes, summed_s, n_events, seconds = PHASE_THROUGHPUT[(row.arm, row.tier, row.activity)]
        assert (row.bytes, row.summed_s, row.n_events, row.seconds) == (nbytes, summed_s, n_events, seconds), row
        assert row.MiB_per_s == nbytes / MiB / seconds
    # e.g. the staged arm's copies out: 76 MiB over the 3.25 s they cover, though they add up to 5.5 s
    assert row_of(table, arm="shm", activity="stage_out:copy")["MiB_per_s"] == 76 / 3.25


def test_staging_table_of_the_fixture_by_hand(tables):
    staging = read_csv(tables, "staging.csv")
    assert set(staging["arm"]) == {"shm"}  # the baseline does not stage
    assert len(staging) == (2 + 2 + 3 * 2)  # fcst and post of both cycles, prep of the second; in and out
    out = row_of(staging, cycle=C1, step="fcst", phase="stage_out").to_dict()
    # two 16 MiB copies side by side [9, 10] and their sync [10, 10.25], from fcst's start T0 + 120
    assert out == {"study": "fx", "arm": "shm", "cycle": C1, "step": "fcst", "phase": "stage_out",
                   "method": "cycleio", "dest_tier": "lustre", "dest_fs_type": "ext4", "n_files": 2,
                   "bytes": 32 * MiB, "copy_s": 2.25, "t_start": T0 + 129, "wall_s": 1.25, "MiB_per_s": 32 / 1.25}
    into = row_of(staging, cycle=C1, step="fcst", phase="stage_in")
    assert (into["dest_tier"], into["n_files"], into["bytes"], into["copy_s"], into["wall_s"]) == (
        "shm", 2, 12 * MiB, 1.625, 1.125)


def test_io_events_of_the_fixture_keep_every_record(tables):
    events = pd.read_parquet(tables / "io_events.parquet")
    lines = sum(len(p.read_text().splitlines()) for p in record_files())
    assert len(events) == lines == len(pd.read_csv(tables / "io_events.csv"))
    assert set(events["step"]) == {"coldstart", "dump", "prep", "fcst", "post"}  # arrivals too
    assert events.iloc[0][["arm", "step"]].tolist() == ["lustre", "coldstart"]  # by arm, cycle, step, t_start
    increment = events[(events["arm"] == "shm") & (events["op"] == "read") & events["file"].str.endswith("atminc.nc")]
    assert increment["cached_fraction"].tolist() == [0.5, 0.5] and not increment["cache_risk"].any()
    baseline_reads = events[(events["arm"] == "lustre") & (events["op"] == "read") & (events["phase"] == "run")]
    assert baseline_reads["cache_risk"].all() and baseline_reads["cached_fraction"].notna().all()
    assert events.loc[events["op"] != "read", "cached_fraction"].isna().all()
    write = row_of(events, arm="shm", step="prep", op="write", phase="run")
    assert (write["MiB"], write["MiB_per_s"], write["t_end"]) == (4.0, 8.0, T0 + 112.5)
    assert set(events["op"]) >= {"generate", "encode", "decode", "define", "locate", "rename", "compute",
                                 "write_effective", "write_final", "remove", "sync", "checksum", "copy"}


def test_tiers_table_takes_each_arms_first_job_per_role(tables):
    tiers = read_csv(tables, "tiers.csv")
    found = {(row.arm, row.role): row for row in tiers.itertuples(index=False)}
    assert sorted(found) == [("lustre", "persistent"), ("lustre", "scratch"), ("shm", "persistent"), ("shm", "scratch")]
    # make_fixtures numbers the jobs in workflow order, each finding 1 MiB less free: the cold starts are jobs 0
    # and 1 (persistent only), the dumps 2 and 3, the first fcst jobs 4 (lustre) and 5 (shm)
    assert found[("lustre", "persistent")].free_bytes == 80 * 2**30
    assert found[("shm", "persistent")].free_bytes == 80 * 2**30 - MiB
    assert found[("lustre", "scratch")].free_bytes == 80 * 2**30 - 4 * MiB
    shm = found[("shm", "scratch")]
    assert (shm.tier, shm.fs_type, shm.mount_point, shm.free_bytes, shm.host) == (
        "shm", "tmpfs", "/dev/shm", 20 * 2**30 - 5 * MiB, "vm")


# ------------------------------------------------------------------------------------------------ benchtables


def test_benchmark_table_of_the_fixture_points():
    bench = benchmark_table(load_points(point_files()))
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
    # timed (benchtables.Timing: 32 MiB in 0.1 s): lustre's io points, 64 MiB in 0.2 s and more, are; shm's
    # 64 MiB in about 0.06 s are not, nor 8 MiB of field I/O, nor a metadata point over in 0.05 s
    timed = bench.groupby(["tier", "benchmark"])["timed"].agg(["all", "any"])
    assert timed.loc[("lustre", "io")].tolist() == [True, True] and not timed.loc[("shm", "io", )]["all"]
    assert not timed.loc[("lustre", "fieldio")]["any"] and not timed.loc[("shm", "fieldio")]["any"]
    stat = bench[(bench["tier"] == "lustre") & (bench["operation"] == "stat")]
    assert not stat["timed"].any() and bench[(bench["tier"] == "lustre") & (bench["operation"] == "create")]["timed"].all()


def test_a_benchmark_point_is_timed_by_its_bytes_and_seconds_and_its_aggregates_by_every_repetition():
    """The threshold the efficiency rows use (Timing.enough), on a fixed table: each repetition by its own bytes
    and seconds, max/min/mean only when every repetition of the point is timed, a metadata point by time alone."""
    from cycleio.report.benchtables import Timing, mark_timed

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
    timed = mark_timed(table, Timing(min_bytes=32 * MiB, min_seconds=0.1)).tolist()
    assert timed == [True] * 5 + [True, False, False, False, False] + [False] * 5 + [True] * 5
    # a stricter threshold is the same helper's
    assert not mark_timed(table, Timing(min_bytes=128 * MiB, min_seconds=0.1))[:15].any()
    assert Timing().enough(32 * MiB, 0.1) and not Timing().enough(32 * MiB - 1, 1.0)


@pytest.fixture(scope="module")
def efficiency(tables, tmp_path_factory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("bench")
    write_benchmark_tables(point_files(), tables / "io_events.parquet", benchmarks_csv=out / "benchmarks.csv",
                           benchmarks_parquet=out / "benchmarks.parquet", efficiency=out / "efficiency.csv",
                           io_gap=out / "io_gap.csv")
    return pd.read_csv(out / "efficiency.csv")


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


def test_every_table_counts_the_same_records_the_cycles_own(tables, efficiency):
    """The cold start and the dumps (records.ARRIVALS) stay in io_events, and no table of the cycles' I/O nor the
    replay counts them: step_summary, staging, efficiency and the replay plans hold the same jobs' bytes."""
    events = pd.read_parquet(tables / "io_events.parquet")
    assert set(events["step"]) & set(ARRIVALS) == set(ARRIVALS)  # both arrive on lustre, run:write, in the fixture
    summary, staging = read_csv(tables, "step_summary.csv"), read_csv(tables, "staging.csv")
    steps = set(summary["step"])
    assert steps == {"prep", "fcst", "post"}
    assert set(staging["step"]) <= steps and set(efficiency["step"]) <= steps
    for tier in ("lustre", "shm"):
        plans = replay_specs(events, tier, ReplaySpec())
        assert {plan["step"] for plan in plans} == steps, tier
    # the same records: each arm's run bytes per step in efficiency are step_summary's, summed over the cycles
    groups = efficiency.drop_duplicates(["arm", "tier", "step", "activity"]).set_index(["arm", "step", "activity"])
    by_step = summary.groupby(["arm", "step"])[["bytes_read", "bytes_written", "bytes_staged_in"]].sum()
    for (arm, step), row in by_step.iterrows():
        assert groups.loc[(arm, step, "run:read"), "surrogate_bytes"] == row["bytes_read"], (arm, step)
        assert groups.loc[(arm, step, "run:write"), "surrogate_bytes"] == row["bytes_written"], (arm, step)
        if row["bytes_staged_in"]:
            assert groups.loc[(arm, step, "stage_in:copy"), "surrogate_bytes"] == row["bytes_staged_in"], (arm, step)
    # phase_throughput counts the same writes: each arm's run writes over both cycles
    throughput = read_csv(tables, "phase_throughput.csv")
    run_writes = throughput[throughput["activity"] == "run:write"].groupby("arm")["bytes"].sum()
    assert run_writes.to_dict() == summary.groupby("arm")["bytes_written"].sum().to_dict()


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


# ------------------------------------------------------------------------------------------------ figures


def test_throughput_figure_draws_the_tables(tables, tmp_path, drawn_figures):
    throughput, summary = read_csv(tables, "phase_throughput.csv"), read_csv(tables, "step_summary.csv")
    out = tmp_path / "throughput.png"
    throughput_figure(throughput, summary, out, "fx")
    (fig,) = drawn_figures
    assert_png_drawn(out, (14, 5.6))
    assert_axes_carry_data(fig)
    left, right = fig.axes[:2]
    # left: one bar per arm and copy, read or write activity, as tall as its MiB/s (verify and rename are left out)
    expected = [91 / 7.75, 76 / 11.0,  # the baseline's reads and writes on lustre
                91 / 3.9375, 91 / 3.875, 76 / 5.5, 76 / 3.25]  # shm: stage-in, reads, writes, stage-out
    assert sorted(bar_sizes(left)) == pytest.approx(sorted(expected))
    # right: per arm, the seconds of the full cycle C1 (the half cycle C0 left out), every job's phases (run split
    # into storage I/O, CPU, generate, the rest) and what no phase times, up to the jobs' wall times: lustre
    # 13.25 + 4.875 + 3.375 of phases and 6.5 s of job start-up and bookkeeping; shm 15.8125 + 2.5625
    per_arm = {}
    for bar in right.patches:
        per_arm[round(bar.get_y(), 6)] = per_arm.get(round(bar.get_y(), 6), 0.0) + bar.get_width()
    assert [per_arm[y] for y in sorted(per_arm)] == pytest.approx([28.0, 18.375])  # lustre, shm
    # the same totals as what_staging_buys.png (a full cycle's wall time, the sum of its jobs')
    from cycleio.report.answerfigures import staging_parts
    from cycleio.report.answers import cycle_totals

    assert staging_parts(cycle_totals(summary))["wall_s"].tolist() == [28.0, 18.375]
    assert [t.get_text() for t in right.texts] == [" 28.00 s", " 18.38 s"]
    # the legends sit outside the data, and the right one has no stray title
    assert left.get_legend().get_bbox_to_anchor().y0 < left.get_window_extent().y0
    assert right.get_legend().get_title().get_text() == ""


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


@pytest.fixture(scope="module")
def bench() -> pd.DataFrame:
    return benchmark_table(load_points(point_files()))


def test_scaling_figure_draws_the_fixture_points(bench, tmp_path, drawn_figures):
    out = tmp_path / "scaling.png"
    scaling_figure(bench, out, "fx")
    (fig,) = drawn_figures
    assert_png_drawn(out, (17, 5.2))
    assert_axes_carry_data(fig)
    write, read, metadata = fig.axes
    for ax, means in ((write, {"lustre / easy": [128, 256], "shm / easy": [512, 1024]}),
                      (read, {"lustre / easy": [256, 512], "shm / easy": [1024, 2048]})):
        # one line per tier and pattern through the means at 1 and 2 tasks (replays and field I/O are not here)
        lines = {c.get_label(): list(c.lines[0].get_ydata()) for c in ax.containers}
        assert lines == means
        assert list(ax.containers[0].lines[0].get_xdata()) == [1, 2]
    assert read.get_title() == "read (reads may come from the page cache)"
    # metadata: the mean operations per second of each tier at its largest task count (1)
    assert sorted(bar_sizes(metadata)) == sorted([5500, 22000, 4400, 55000, 110000, 44000])


def test_fieldio_figure_draws_the_fixture_points(bench, tmp_path, drawn_figures):
    out = tmp_path / "fieldio.png"
    fieldio_figure(bench, out, "fx")
    (fig,) = drawn_figures
    assert_png_drawn(out, (15, 4.3 * 2 + 1))
    assert_axes_carry_data(fig)
    (appended, appended_latency), (per_field, per_field_latency) = (fig.axes[:2], fig.axes[2:4])
    assert appended.get_title().startswith("appended: field I/O")
    # bandwidth: pattern 1's write and read per tier, then the easy pattern at the same 2 tasks
    easy = [256, 512, 1024, 2048]
    assert sorted(bar_sizes(appended)) == sorted([64, 130, 640, 1300] + easy)
    assert sorted(bar_sizes(per_field)) == sorted([32, 100, 320, 1000] + easy)
    # the latency axes: whole decades, one plain label each, no minor labels to crowd them
    for ax in (appended_latency, per_field_latency):
        labels = [t.get_text() for t in ax.get_yticklabels()]
        low, high = ax.get_ylim()
        assert labels and all(label and float(label) > 0 for label in labels)
        assert math.log10(low).is_integer() and math.log10(high).is_integer()
        assert all(not t.get_text() for t in ax.get_yticklabels(minor=True))
    # 8 MiB of field I/O per point is too small to time: every field-I/O bar is hatched, the easy pattern's
    # lustre points (64 MiB and more in 0.2 s and more) are not
    hatched = [bar.get_hatch() for bar in appended.patches if bar.get_height() > 0]
    assert hatched.count("///") >= 4
    # latency: the mean over the repetitions of one field operation's latency, in ms
    shm_write = 1e3 * (2 / 600 + 2 / 680) / 2
    assert [size for size in bar_sizes(appended_latency) if size == pytest.approx(shm_write)]
    assert len(bar_sizes(appended_latency)) == len(bar_sizes(per_field_latency)) == 4


def test_benchmark_figures_say_when_a_benchmark_is_missing(bench, tmp_path, drawn_figures):
    replays = bench[bench["benchmark"] == "replay"]
    scaling_figure(replays, tmp_path / "s.png", "fx")
    fieldio_figure(replays, tmp_path / "f.png", "fx")
    assert_png_drawn(tmp_path / "s.png", (17, 5.2), min_inked=0.001)
    assert_png_drawn(tmp_path / "f.png", (8, 4), min_inked=0.001)
    for fig in drawn_figures:
        assert_axes_carry_data(fig)  # every panel says there is nothing to show
    said = [t.get_text() for fig in drawn_figures for ax in fig.axes for t in ax.texts]
    assert said == ["no write benchmark", "no read benchmark", "no metadata benchmark", "no field-I/O benchmark"]


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


def test_the_timeline_from_the_fixed_records(tables):
    """cycle_timeline on the fx study: each job's phases per rank and the forecast's output hours, from the
    arm's first record (offsets from the records, multiples of 1/64 s)."""
    from cycleio.report.answerfigures import timeline_table
    from cycleio.records import cycle_records

    timeline = timeline_table(cycle_records(pd.read_parquet(tables / "io_events.parquet")))
    shm = timeline[(timeline["arm"] == "shm") & (timeline["cycle"] == C1)].set_index(["step", "rank", "kind", "what"])
    assert shm.loc[("fcst", 0, "phase", "stage_in"), ["seconds", "t_from_arm_start_s"]].tolist() == [1.125, 100.0]
    assert shm.loc[("fcst", 1, "phase", "run"), "seconds"] == 4.875
    assert shm.loc[("fcst", 0, "output", "f006"), ["seconds", "t_from_arm_start_s"]].tolist() == [1.5, 106.5625]
    assert shm.loc[("fcst", 1, "wait", "f003"), "seconds"] == 1.3125
    assert set(shm.loc["post"].index.get_level_values("what")) == {"stage_in", "run", "verify", "stage_out", "cleanup"}


def test_a_benchmark_point_too_small_to_time_is_no_tiers_best_in_io_gap():
    """shm's read points (64 MiB in about 0.06 s) are not timed: its reads get no tier's best, its writes do."""
    from cycleio.report.benchtables import io_gap_table

    gap = io_gap_table(benchmark_table(load_points(point_files())), load_events(record_files()))
    shm = gap[gap["tier"] == "shm"].set_index(["step", "direction"])
    assert shm.loc[("fcst", "read"), "best_reference"] == "" and pd.isna(shm.loc[("fcst", "read"), "tier_best_s"])
    assert shm.loc[("fcst", "write"), "best_reference"] == "easy, 2 tasks"
    assert gap[gap["tier"] == "lustre"]["tier_best_s"].notna().all()
