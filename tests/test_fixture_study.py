"""The checked-in study of tests/data (conftest's ``tables``, ``efficiency``): its files are what
tests/data/make_fixtures.py writes, in the production formats, and every table built from its records counts the
same jobs. Each table's and figure's numbers are worked out by hand in the test module of its report module
(test_aggregate, test_benchtables, test_throughputfigure, test_writefigures, test_benchfigures, test_report_answers,
test_answerfigures).
"""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
from conftest import FX_DATA as DATA, FX_RECORDS as RECORDS, point_files, read_csv, record_files
from cycleio.benchmarks.common import COLUMNS
from cycleio.benchmarks.pairedspecs import replay_specs
from cycleio.benchmarks.specs import ReplaySpec
from cycleio.records import ARRIVALS, RECORD_FIELDS


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


# ------------------------------------------------------------------------------------------------ the tables


def test_every_table_counts_the_same_records_the_cycles_own(tables, efficiency):
    """The cold start and the dumps (records.ARRIVALS) stay in io_events, and no table of the cycles' I/O nor the
    replay counts them: step_summary, staging, efficiency and the replay plans hold the same jobs' bytes."""
    events = pd.read_parquet(tables / "io_events.parquet")
    assert set(events["step"]) & set(ARRIVALS) == {"coldstart", "dump"}  # both arrive on lustre, run:write, in the fixture
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
