"""Records to tables (report.aggregate) on a small fixed study, and on the checked-in study of tests/data: every
expected second is worked out by hand from the records below, and from those of tests/data."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import (C0, C1, FX_ARMS as ARMS, FX_T0 as T0, read_csv, record_files, replay_event, row_of,
                      run_event)
from cycleio.config.calendar import com_dir
from cycleio.config.settings import ArmSettings
from cycleio.report.aggregate import MiB, StudyTables, aggregate, load_events
from cycleio.records import RECORD_FIELDS, Record
from cycleio.config.tierspec import Tier
from cycleio.runner.persistentjobs import run_cleanup

# Both studies start at T0 (conftest's FX_T0): the hand-made one below, and the checked-in one of tests/data.
STAGED = {"a1": ("ssd", "node_local", "ext4"), "a2": ("shm", "memory", "tmpfs")}
PERSISTENT = ("lustre", "lustre", "ext4")
ODD_NAME = 'out/odd,"y".nc'  # a comma and quotes: quoted in CSV


def event(arm, cycle, step, phase, op, start, seconds, nbytes=0, persistent=False, **values) -> dict:
    tier, kind, fs_type = PERSISTENT if persistent else STAGED[arm]
    values = {"strategy": "serial", "host": "node1", **values}
    return asdict(Record(study="s", arm=arm, cycle=cycle, step=step, phase=phase, op=op, tier=tier, tier_kind=kind,
                         fs_type=fs_type, bytes=nbytes, t_start=start, seconds=seconds, **values))


def job_events(arm: str, cycle: str, step: str, t0: float, scale: float) -> list[dict]:
    """One staged job: parallel copies in, overlapping run events, copies out, checks, cleanup.

    Offsets and seconds are multiples of 1/16 scaled by a power of two, so all covered seconds are exact.
    """
    args = (arm, cycle, step)
    events = [
        event(*args, "stage_in", "copy", 0.0, 2.0, 4 * MiB, file="in/a.nc", transfers=1),
        event(*args, "stage_in", "copy", 0.5, 2.5, 2 * MiB, file="in/b.nc", transfers=1),
        event(*args, "stage_in", "copy", 0.5, 1.0, MiB, file="in/c.nc", transfers=1),  # same start, inside b
        event(*args, "stage_in", "sync", 3.0, 0.25, n_files=3),
        event(*args, "run", "read", 4.0, 1.0, 3 * MiB, file="in/a.nc", transfers=3),
        event(*args, "run", "generate", 5.0, 0.5),
        event(*args, "run", "define", 5.5, 0.25, n_files=0),
        event(*args, "run", "encode", 5.75, 0.75, n_files=0),
        event(*args, "run", "compute", 5.0, 3.0, n_files=0),
        event(*args, "run", "write", 6.5, 1.5, 6 * MiB, file="out/x.nc", transfers=2),
        event(*args, "run", "write", 7.0, 2.0, 2 * MiB, file=ODD_NAME, transfers=1),
        event(*args, "run", "rename", 9.0, 0.0, n_files=1),
        event(*args, "stage_out", "copy", 10.0, 1.0, 6 * MiB, persistent=True, file="out/x.nc"),
        event(*args, "stage_out", "copy", 10.0, 0.5, 2 * MiB, persistent=True, file=ODD_NAME),
        event(*args, "stage_out", "sync", 11.0, 0.125, persistent=True, n_files=2),
        event(*args, "verify", "checksum", 11.5, 0.125, 6 * MiB, persistent=True, file="out/x.nc"),
        event(*args, "verify", "checksum", 11.5, 0.0625, 2 * MiB, file=ODD_NAME),
        event(*args, "cleanup", "remove", 12.0, 0.25, n_files=5),
    ]
    for record in events:
        record["t_start"] = t0 + record["t_start"] * scale
        record["seconds"] *= scale
    return events


def study_records() -> dict[str, list[dict]]:
    """Two arms x two cycles of prep (scale 1) and fcst (scale 2), each with a dump; an unstaged post; a coldstart."""
    files = {}
    for arm in STAGED:
        for c, cycle in enumerate(("2026010100", "2026010106")):
            files[f"{arm}/{cycle}/dump"] = [event(arm, cycle, "dump", "run", "write", T0 + 100 * c, 0.5, MiB,
                                                  persistent=True)]
            files[f"{arm}/{cycle}/prep"] = job_events(arm, cycle, "prep", T0 + 100 * c, 1.0)
            files[f"{arm}/{cycle}/fcst"] = job_events(arm, cycle, "fcst", T0 + 100 * c + 40, 2.0)
    files["a1/2026010106/post"] = [  # unstaged: runs on the persistent tier, no staging, no cleanup
        event("a1", "2026010106", "post", "run", "read", T0 + 160, 0.5, MiB, persistent=True),
        event("a1", "2026010106", "post", "run", "write", T0 + 160.25, 0.5, MiB, persistent=True),
        event("a1", "2026010106", "post", "verify", "checksum", T0 + 161, 0.25, MiB, persistent=True),
    ]
    # An arrival with values whose CSV text is not trivial; one record from before transfers and cache_risk existed.
    old_format = event("a1", "2026010100", "coldstart", "run", "write", T0 - 10, 0.1, 123456789, strategy="")
    del old_format["transfers"], old_format["cache_risk"]
    files["a1/2026010100/coldstart"] = [
        event("a1", "2026010100", "coldstart", "run", "write", T0 - 20, 1e-05, 5, file="a b.nc", transfers=1),
        event("a1", "2026010100", "coldstart", "run", "generate", T0 - 20, 2.5e-07, file="", cache_risk=True),
        old_format,
    ]
    return files


def tables_in(folder: Path) -> StudyTables:
    """The tables under the names the workflow gives them (rules/report.smk)."""
    return StudyTables(events=folder / "io_events.parquet", events_csv=folder / "io_events.csv",
                       summary=folder / "step_summary.csv", throughput=folder / "phase_throughput.csv",
                       staging=folder / "staging.csv", tiers=folder / "tiers.csv")


def write_study(root: Path) -> list[Path]:
    paths = []
    for name, records in study_records().items():
        path = root / "arms" / f"{name}.records.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(record, sort_keys=True) + "\n" for record in records))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[list[Path], Path]:
    root = tmp_path_factory.mktemp("study")
    paths = write_study(root)
    aggregate(paths, tables_in(root / "tables"))
    return paths, root / "tables"


def read_table(tables: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(tables / name, dtype={"cycle": str})


# Per job kind, hand-derived from job_events (scale 1 for prep, 2 for fcst) and the post records.
PREP = {"wall_s": 12.25, "stage_in_s": 3.25, "run_s": 5.0, "stage_out_s": 1.125, "verify_s": 0.125,
        "stage_out_verify_s": 1.125 + 0.125, "cleanup_s": 0.25, "io_s": 3.25 + 1.0 + 2.5 + 1.125 + 0.125, "run_io_s": 3.5, "compute_s": 3.0,
        "codec_s": 0.75, "generate_s": 0.5, "metadata_s": 0.25, "bytes_read": 3 * MiB, "bytes_written": 8 * MiB,
        "bytes_staged_in": 7 * MiB, "bytes_staged_out": 8 * MiB, "write_s": 3.5}
FCST = {key: value * 2 if key.endswith("_s") else value for key, value in PREP.items()}
POST = {"wall_s": 1.25, "stage_in_s": 0.0, "run_s": 0.75, "stage_out_s": 0.0, "verify_s": 0.25,
        "stage_out_verify_s": 0.25, "cleanup_s": 0.0,
        "io_s": 1.0, "run_io_s": 0.75, "compute_s": 0.0, "codec_s": 0.0, "generate_s": 0.0, "metadata_s": 0.0,
        "bytes_read": MiB, "bytes_written": MiB, "bytes_staged_in": 0, "bytes_staged_out": 0, "write_s": 0.5}
STEP_COLUMNS = ["study", "arm", "cycle", "step", "t_start", "wall_s", "stage_in_s", "run_s", "stage_out_s", "verify_s",
                "cleanup_s", "archive_s", "stage_out_verify_s", "io_s", "run_io_s", "compute_s", "codec_s", "generate_s", "metadata_s",
                "staging_s", "io_fraction", "bytes_read", "bytes_written", "bytes_staged_in", "bytes_staged_out",
                "bytes_archived", "write_MiB_per_s", "staging_MiB_per_s", "paired_replay_s"]


def test_step_summary_has_the_hand_computed_seconds_and_rates(study):
    _, tables = study
    summary = read_table(tables, "step_summary.csv")
    assert list(summary.columns) == STEP_COLUMNS
    jobs = [(arm, cycle, step) for arm in STAGED for cycle in ("2026010100", "2026010106") for step in ("fcst", "prep")]
    jobs.insert(3, ("a1", "2026010106", "post"))
    assert list(summary[["arm", "cycle", "step"]].itertuples(index=False, name=None)) == jobs
    for row in summary.itertuples(index=False):
        expected = {"prep": PREP, "fcst": FCST, "post": POST}[row.step]
        start = {"prep": 0, "fcst": 40, "post": 60}[row.step] + 100 * (row.cycle == "2026010106")
        assert row.t_start == T0 + start
        for column, value in expected.items():
            if column != "write_s":
                assert getattr(row, column) == value, (row.arm, row.cycle, row.step, column)
        staged_s = expected["stage_in_s"] + expected["stage_out_s"]
        assert row.staging_s == staged_s
        assert row.io_fraction == expected["io_s"] / expected["wall_s"]
        assert row.write_MiB_per_s == expected["bytes_written"] / MiB / expected["write_s"]
        staged_MiB = (expected["bytes_staged_in"] + expected["bytes_staged_out"]) / MiB
        assert row.staging_MiB_per_s == staged_MiB / staged_s if staged_s else math.isnan(row.staging_MiB_per_s)


# (arm, tier, activity): bytes, summed seconds, events, covered seconds; both cycles of prep and fcst (+ a1's post)
PHASE_THROUGHPUT = {
    ("a1", "lustre", "run:read"): (MiB, 0.5, 1, 0.5),
    ("a1", "lustre", "run:write"): (MiB, 0.5, 1, 0.5),
    ("a1", "lustre", "stage_out:copy"): (32 * MiB, 2 * 3 * (1.5 + 0.125), 12, 2 * 3 * 1.125),
    ("a1", "lustre", "verify:checksum"): (25 * MiB, 2 * 3 * 0.125 + 0.25, 5, 2 * 3 * 0.125 + 0.25),
    ("a1", "ssd", "run:read"): (12 * MiB, 2 * 3 * 1.0, 4, 2 * 3 * 1.0),
    ("a1", "ssd", "run:rename"): (0, 0.0, 4, 0.0),
    ("a1", "ssd", "run:write"): (32 * MiB, 2 * 3 * 3.5, 8, 2 * 3 * 2.5),
    ("a1", "ssd", "stage_in:copy"): (28 * MiB, 2 * 3 * 5.75, 16, 2 * 3 * 3.25),
    ("a1", "ssd", "verify:checksum"): (8 * MiB, 2 * 3 * 0.0625, 4, 2 * 3 * 0.0625),
}
PHASE_THROUGHPUT |= {("a2", "shm" if tier == "ssd" else tier, activity): value
                     for (_, tier, activity), value in PHASE_THROUGHPUT.items() if "post" not in activity}
PHASE_THROUGHPUT[("a2", "lustre", "verify:checksum")] = (24 * MiB, 2 * 3 * 0.125, 4, 2 * 3 * 0.125)
del PHASE_THROUGHPUT[("a2", "lustre", "run:read")], PHASE_THROUGHPUT[("a2", "lustre", "run:write")]


def test_phase_throughput_divides_bytes_by_covered_seconds(study):
    _, tables = study
    table = read_table(tables, "phase_throughput.csv")
    assert list(table.columns) == ["study", "arm", "tier", "activity", "bytes", "summed_s", "n_events", "seconds",
                                   "MiB_per_s"]
    assert set(table["study"]) == {"s"}
    assert list(table[["arm", "tier", "activity"]].itertuples(index=False, name=None)) == sorted(PHASE_THROUGHPUT)
    for row in table.itertuples(index=False):
        nbytes, summed_s, n_events, seconds = PHASE_THROUGHPUT[(row.arm, row.tier, row.activity)]
        assert (row.bytes, row.summed_s, row.n_events, row.seconds) == (nbytes, summed_s, n_events, seconds), row
        if seconds:
            assert row.MiB_per_s == nbytes / MiB / seconds
        else:
            assert math.isnan(row.MiB_per_s)


def test_staging_table_per_job_and_direction(study):
    _, tables = study
    staging = read_table(tables, "staging.csv")
    assert len(staging) == 2 * 2 * 2 * 2  # arms x cycles x staged steps x directions
    first = staging.iloc[0].to_dict()
    assert first == {"study": "s", "arm": "a1", "cycle": "2026010100", "step": "fcst", "phase": "stage_in",
                     "node": "node1", "method": "cycleio", "dest_tier": "ssd", "dest_fs_type": "ext4", "n_files": 3, "bytes": 7 * MiB,
                     "copy_s": 2 * 5.75, "t_start": T0 + 40, "wall_s": 2 * 3.25, "MiB_per_s": 7 / (2 * 3.25)}


def test_io_events_keep_every_record_field_and_derived_column(study, tmp_path):
    paths, tables = study
    written = pq.read_table(tables / "io_events.parquet")
    load_events(paths).to_parquet(tmp_path / "pandas.parquet", index=False)
    assert written.schema.equals(pq.read_schema(tmp_path / "pandas.parquet"), check_metadata=True)
    assert written.equals(pq.read_table(tmp_path / "pandas.parquet"))
    events = written.to_pandas()
    assert list(events.columns) == [*RECORD_FIELDS, "MiB", "MiB_per_s", "t_end"]
    assert len(events) == sum(len(records) for records in study_records().values())
    assert events["cycle"].tolist()[0] == "2026010100" and events["step"].tolist()[0] == "coldstart"
    old = events[events["bytes"] == 123456789].iloc[0]
    assert math.isnan(old["transfers"]) and old["cache_risk"] is None and old["strategy"] == ""
    renames = events[events["op"] == "rename"]
    assert (renames["MiB_per_s"].isna()).all() and (renames["MiB"] == 0).all()


def test_io_events_csv_reads_back_as_the_events(study):
    """The CSV of every event holds the same rows and values as the parquet (odd names quoted)."""
    paths, tables = study
    events = load_events(paths)
    back = pd.read_csv(tables / "io_events.csv", dtype={"cycle": str, "fs_type": str}, keep_default_na=False,
                       na_values=[""])
    assert list(back.columns) == list(events.columns) and len(back) == len(events)
    assert back["file"].tolist().count(ODD_NAME) == events["file"].tolist().count(ODD_NAME) > 0
    pd.testing.assert_series_equal(back["bytes"], events["bytes"], check_dtype=False)
    pd.testing.assert_series_equal(back["seconds"], events["seconds"], check_dtype=False)


def test_a_stage_out_checking_its_copies_as_it_goes_counts_their_time_once():
    """Streams copy one file while they checksum another: stage_out_s and verify_s each count their own phase, and
    stage_out_verify_s their time together once (what_staging_buys.png draws it, so a bar adds up to the job)."""
    from cycleio.report.aggregate import step_summary

    args = ("a1", "2026010106", "fcst")
    events = pd.DataFrame([event(*args, "stage_out", "copy", 0.0, 1.0, MiB, persistent=True),
                           event(*args, "verify", "checksum", 0.5, 1.0, MiB, persistent=True)])
    events["t_end"] = events["t_start"] + events["seconds"]
    row = step_summary(events).iloc[0]
    assert (row["stage_out_s"], row["verify_s"], row["stage_out_verify_s"]) == (1.0, 1.0, 1.5)


def test_a_cleanup_jobs_records_reach_io_events_and_step_summary(tmp_path):
    """The cleanup job (cycles.keep) removes a cycle from the persistent tier in its cleanup phase: the rules pass
    its records to aggregate (workflow.dependencies.measured_jobs) and the tables keep them as a job of the cycle."""
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    arm = ArmSettings(study="s", arm="a1", start="2026010100", seed=7, resolution="C12", levels=4, persistent=lustre)
    for run, n_files in (("gdas", 3), ("enkfgdas", 2)):
        folder = tmp_path / "lustre" / "s" / "a1" / com_dir("2026010100", run) / "model"
        folder.mkdir(parents=True)
        for index in range(n_files):
            (folder / f"f{index}.nc").write_bytes(b"x" * MiB)
    records, manifest = tmp_path / "cleanup.records.jsonl", tmp_path / "cleanup.manifest.json"
    run_cleanup(arm, "2026010100", records, manifest)
    paths = write_study(tmp_path / "study")
    aggregate([*paths, records], tables_in(tmp_path / "tables"), [manifest])

    events = pd.read_parquet(tmp_path / "tables" / "io_events.parquet")
    removed = events[events["step"] == "cleanup"]
    assert removed[["arm", "cycle", "phase", "op", "tier"]].drop_duplicates().values.tolist() == [
        ["a1", "2026010100", "cleanup", "remove", "lustre"]]
    assert (removed["n_files"].sum(), removed["bytes"].sum()) == (5, 5 * MiB)
    summary = read_table(tmp_path / "tables", "step_summary.csv")
    row = summary[summary["step"] == "cleanup"]
    assert row[["arm", "cycle"]].values.tolist() == [["a1", "2026010100"]]
    row = row.iloc[0]
    # one removal after the other: the cleanup phase is their seconds, the job's wall from the first to the last
    # (to a microsecond: covered time is taken from ends at epoch seconds)
    assert row["cleanup_s"] == pytest.approx(removed["seconds"].sum(), abs=1e-6) and row["cleanup_s"] > 0
    end = (removed["t_start"] + removed["seconds"]).max()
    assert row["wall_s"] == pytest.approx(end - removed["t_start"].min(), abs=1e-6)
    assert (row["io_s"], row["bytes_written"], row["run_s"]) == (0.0, 0, 0.0)
    assert len(summary) == 2 * 2 * 2 + 1 + 1  # arms x cycles x (prep, fcst), a1's post, and the cleanup


def test_a_malformed_record_stops_aggregation_naming_file_and_line(tmp_path):
    paths = write_study(tmp_path)
    lines = paths[1].read_text().splitlines()
    paths[1].write_text("\n".join(lines[:4] + [lines[4][:-20]] + lines[5:]) + "\n")
    with pytest.raises(ValueError, match=rf"{paths[1].name}, line 5, column \d+: not JSON"):
        aggregate(paths, tables_in(tmp_path / "tables"))
    assert not (tmp_path / "tables").exists()


def test_aggregate_without_records_says_so(tmp_path):
    empty = tmp_path / "a.records.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no records to aggregate"):
        aggregate([empty], tables_in(tmp_path / "tables"))


def test_a_jobs_wall_time_leaves_its_paired_replay_out():
    from cycleio.report.aggregate import step_summary

    events = pd.DataFrame([run_event("fcst", "write", "c1", 0, 1, 1.0), run_event("fcst", "write", "c1", 9, 1, 1.0)])
    replays = pd.DataFrame([{**replay_event("fcst", "wall", "c1", 1.0, 0, 8.0, 0)}])
    for frame in (events, replays):
        frame["t_end"] = frame["t_start"] + frame["seconds"]
    summary = step_summary(events, replays).iloc[0]
    assert (summary["wall_s"], summary["paired_replay_s"]) == (2.0, 8.0)


# ------------------------------------------------------------------------------------------------ the checked-in study
# The same tables of the study of tests/data (conftest's ``tables``), every number worked out by hand from its records

# shm/2026010106/prep, offsets from its start (T0 + 110): stage-in copies [0, 0.5] (2 MiB) and [0, 0.25] (1 MiB)
# side by side, sync [0.5, 0.5625]; their checksums [0.5625, 0.6875] and [0.5625, 0.625]; reads [1, 1.25] and
# [1.25, 1.375]; compute [1.375, 1.875]; generate [1.875, 2]; write 4 MiB [2, 2.5]; rename [2.5, 2.5625];
# stage-out copy [3, 3.25], sync [3.25, 3.375]; checksum [3.375, 3.5]; cleanup [3.5, 3.5625].
SHM_PREP = {
    "t_start": T0 + 110, "wall_s": 3.5625, "stage_in_s": 0.5625, "run_s": 1.5625, "stage_out_s": 0.375,
    "verify_s": 0.125 + 0.125, "stage_out_verify_s": 0.375 + 0.125 + 0.125, "cleanup_s": 0.0625,
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
    "verify_s": 0.25, "stage_out_verify_s": 0.25, "cleanup_s": 0.0, "io_s": 0.75 + 1.125 + 0.25, "run_io_s": 0.75 + 1.125, "compute_s": 1.0,
    "generate_s": 0.25, "staging_s": 0.0, "io_fraction": 2.125 / 5.0, "bytes_read": 3 * MiB,
    "bytes_written": 4 * MiB, "bytes_staged_in": 0, "bytes_staged_out": 0, "write_MiB_per_s": 4 / 1.0,
}
# shm fcst: reads 8 MiB [2, 2.5] and 4 MiB [2.75, 3] with a locate between; two output hours, each: both ranks
# compute 1 s and generate 0.25 s side by side (counted once), define and encode 0.125 s, write 16 MiB in 1 s,
# rename 0.0625 s; run [2, 8.125] without a gap; stage-in [0, 1.125] plus checksums to 1.375, stage-out
# [9, 10.25] plus checksums to 10.75, cleanup to 11.
SHM_FCST = {
    "wall_s": 11.0, "stage_in_s": 1.125, "run_s": 6.125, "stage_out_s": 1.25, "verify_s": 0.25 + 0.5,
    "stage_out_verify_s": 1.75 + 0.25, "cleanup_s": 0.25, "io_s": 1.375 + 0.75 + 2 * 1.0625 + 1.75, "run_io_s": 0.75 + 2 * 1.0625, "compute_s": 2.0,
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
FX_PHASE_THROUGHPUT = {
    ("shm", "lustre", "stage_out:copy"): (76 * MiB, 2 * (2.25 + 0.3125) + 0.375, 14, 2 * (1.25 + 0.1875) + 0.375),
    ("shm", "lustre", "verify:checksum"): (76 * MiB, 2 * (1.0 + 0.125) + 0.125, 9, 2 * (0.5 + 0.0625) + 0.125),
    ("shm", "shm", "run:read"): (91 * MiB, 2 * (0.75 + 1.0) + 0.375, 10, 2 * (0.75 + 1.0) + 0.375),
    ("shm", "shm", "run:rename"): (0, 2 * (0.125 + 0.125) + 0.0625, 9, 2 * (0.125 + 0.125) + 0.0625),
    ("shm", "shm", "run:write"): (76 * MiB, 2 * (2.0 + 0.5) + 0.5, 9, 2 * (2.0 + 0.5) + 0.5),
    ("shm", "shm", "stage_in:copy"): (91 * MiB, 2 * (1.625 + 1.0625) + 0.8125, 15, 2 * (1.125 + 0.5625) + 0.5625),
    ("shm", "shm", "verify:checksum"): (91 * MiB, 2 * (0.375 + 0.5) + 0.1875, 10, 2 * (0.25 + 0.25) + 0.125),
}
FX_PHASE_THROUGHPUT |= {("lustre", "lustre", activity): (nbytes, 2 * summed, n, 2 * covered)
                     for (arm, tier, activity), (nbytes, summed, n, covered) in FX_PHASE_THROUGHPUT.items()
                     if tier == "shm" and activity.startswith("run:")}
FX_PHASE_THROUGHPUT[("lustre", "lustre", "verify:checksum")] = (76 * MiB, 2 * 2.375, 9, 2 * 1.25)


def test_phase_throughput_of_the_fixture_by_hand(tables):
    table = read_csv(tables, "phase_throughput.csv")
    assert list(table[["arm", "tier", "activity"]].itertuples(index=False, name=None)) == sorted(FX_PHASE_THROUGHPUT)
    for row in table.itertuples(index=False):
        nbytes, summed_s, n_events, seconds = FX_PHASE_THROUGHPUT[(row.arm, row.tier, row.activity)]
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
                   "node": "vm", "method": "cycleio", "dest_tier": "lustre", "dest_fs_type": "ext4", "n_files": 2,
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


def test_staging_table_has_a_row_per_node_of_a_job_over_several():
    """runner.nodes: each node's copies carry its host; the slowest node is its own row."""
    from cycleio.report.aggregate import staging_table

    rows = []
    for node, seconds in (("n1", 1.0), ("n2", 4.0), ("n3", 2.0)):
        for phase in ("stage_in", "stage_out"):
            rows.append({"study": "s", "arm": "node_local", "cycle": "2026010100", "step": "fcst", "phase": phase,
                         "op": "copy", "tool": "cycleio", "tier": "node_local", "fs_type": "tmpfs", "host": node,
                         "bytes": MiB, "seconds": seconds, "t_start": 10.0, "t_end": 10.0 + seconds})
    table = staging_table(pd.DataFrame(rows))
    assert len(table) == 6 and sorted(set(table["node"])) == ["n1", "n2", "n3"]
    slowest = table.loc[table["wall_s"].idxmax()]
    assert slowest["node"] == "n2" and slowest["MiB_per_s"] == 1 / 4.0
