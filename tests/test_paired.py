"""The study's efficiency answer: the paired replay inside a job (real fio), and the verdicts, bands and the
timed threshold of efficiency.csv and io_gap.csv on fixed tables (no tools)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from conftest import require_tool
from cycleio.benchmarks.paired import PairedReplay
from cycleio.report.benchtables import Timing, efficiency_table, io_gap_table, verdict
from cycleio.records import RecordLog
from cycleio.config.tierspec import Tier
from cycleio.storage.tiers import TierSite

MiB = 2**20
T0 = 1_800_000_000.0


# ------------------------------------------------------------------------------------------- verdicts

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


def run_event(step: str, op: str, cycle: str, t: float, mib: float, seconds: float, **extra) -> dict:
    return {"study": "s", "arm": "a", "tier": "disk", "step": step, "phase": "run", "op": op, "cycle": cycle,
            "t_start": T0 + t, "seconds": seconds, "bytes": int(mib * MiB), "n_files": 1, "nranks": 1,
            "cached_fraction": 1.0 if op == "read" else None, "repetition": 0, **extra}


def replay_event(step: str, op: str, cycle: str, t: float, mib: float, seconds: float, rep: int,
                 files: str | None = None) -> dict:
    return {**run_event(step, op, cycle, t, mib, seconds), "phase": "replay", "repetition": rep,
            "n_files": 4, "cached_fraction": 1.0 if op == "read" else None, "file": files}


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
    assert not efficiency_table(no_benchmarks(), paired_events(), Timing(min_bytes=0)).query("step == 'prep'")["timed"].item()
    assert efficiency_table(no_benchmarks(), paired_events(), Timing(min_bytes=0, min_seconds=0.005)).query(
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


def test_a_jobs_wall_time_leaves_its_paired_replay_out():
    from cycleio.report.aggregate import step_summary

    events = pd.DataFrame([run_event("fcst", "write", "c1", 0, 1, 1.0), run_event("fcst", "write", "c1", 9, 1, 1.0)])
    replays = pd.DataFrame([{**replay_event("fcst", "wall", "c1", 1.0, 0, 8.0, 0)}])
    for frame in (events, replays):
        frame["t_end"] = frame["t_start"] + frame["seconds"]
    summary = step_summary(events, replays).iloc[0]
    assert (summary["wall_s"], summary["paired_replay_s"]) == (2.0, 8.0)


# ------------------------------------------------------------------------------- the replay itself

@pytest.mark.tool
def test_paired_replay_repeats_the_steps_reads_and_writes_with_fio(tmp_path):
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="fcst")
    for op, nbytes, transfers in (("write", 300_000, 5), ("write", 100_000, 2), ("read", 50_000, 1)):
        records.add(phase="run", op=op, bytes=nbytes, seconds=0.1, transfers=transfers,
                    cached_fraction=1.0 if op == "read" else None, **site.fields())
    folder = site.root / ".replay.fcst"
    PairedReplay(repetitions=2, transfer_size_bytes=65536, max_files=10, min_bytes=0, min_seconds=0).run(
        "fcst", records, site, folder, tmp_path / "raw", "[test]")
    replays = [r for r in records.records if r.phase == "replay"]
    timed = [(r.op, r.repetition) for r in replays if r.op != "wall"]
    assert timed == [("read", 0), ("write", 0), ("read", 1), ("write", 1)]  # in the step's order, each repetition
    writes = [r for r in replays if r.op == "write"]
    assert {r.bytes for r in writes} == {2 * 196608} and all(r.seconds > 0 and r.tool == "fio" for r in writes)
    assert all(r.cached_fraction == 1.0 for r in replays if r.op == "read")  # warm, as the step's were
    [wall] = [r for r in replays if r.op == "wall"]
    assert wall.t_start <= min(r.t_start for r in writes) and wall.seconds >= sum(r.seconds for r in replays
                                                                                   if r.op != "wall")
    # each write repetition lands new files in a folder of its own; all are gone when the replay ends
    # even repetitions write new files, odd ones where the last repetition's files were (deleted first): the band spans
    # the two page states (see benchmarks.paired); all are gone when the replay ends
    assert [r.file for r in writes] == ["new files", "rewritten files"]
    folders = [json.loads((tmp_path / "raw" / f"fcst-write.rep{rep}.json").read_text())["global options"]["directory"]
               for rep in (0, 1)]
    assert folders[0] != folders[1] and not folder.exists()


def test_reads_or_writes_too_little_to_time_are_not_replayed(tmp_path):
    """No fio runs for them (the row could not be timed anyway); the job still says it was paired."""
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="prep")
    records.add(phase="run", op="write", bytes=300_000, t_start=T0, seconds=0.001, transfers=1, **site.fields())
    PairedReplay(fio_path="no-such-fio").run("prep", records, site, site.root / ".replay", tmp_path / "raw", "[t]")
    assert [(r.phase, r.op) for r in records.records] == [("run", "write"), ("replay", "wall")]


def test_a_tier_without_room_for_the_replay_leaves_the_step_alone(tmp_path, monkeypatch):
    from cycleio.config.tierspec import TierError

    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="fcst")
    records.add(phase="run", op="write", bytes=64 * MiB, t_start=T0, seconds=0.5, transfers=8, **site.fields())

    def full(nbytes, what):
        raise TierError(f"tier 'disk': {what} needs {nbytes} bytes but only 0 are free")

    monkeypatch.setattr(site, "require_space", full)
    PairedReplay().run("fcst", records, site, site.root / ".replay", tmp_path / "raw", "[t]")
    assert [(r.phase, r.op) for r in records.records] == [("run", "write"), ("replay", "wall")]


def test_a_paired_job_whose_io_was_not_replayed_keeps_a_not_timed_row():
    events = pd.DataFrame([run_event("anal", "write", "c1", 0, 1, 0.01),
                           {**replay_event("anal", "wall", "c1", 1, 0, 0.001, 0), "bytes": 0}])
    [row] = efficiency_table(no_benchmarks(), events).to_dict("records")
    assert (row["reference"], row["timed"], row["verdict"]) == ("replay", False, "not timed")
    assert math.isnan(row["efficiency"]) and row["reference_repetitions"] == 0
    assert io_gap_table(no_benchmarks(), events).empty


def test_a_job_without_a_paired_replay_gets_none():
    assert PairedReplay.from_settings({}) is None
    assert PairedReplay.from_settings({"repetitions": 3}).repetitions == 3


@pytest.mark.tool
def test_a_rewrite_repetition_survives_a_tier_that_let_the_last_ones_files_go(tmp_path, monkeypatch):
    """make_room removes kept replay folders when the tier is short of room; the rewrite repetition then finds its
    predecessor's folder gone already, and goes on."""
    import shutil

    import cycleio.benchmarks.paired as paired

    require_tool("fio", "the paired replay runs fio")

    def no_room(kept, nbytes, path, memory):
        while kept:
            shutil.rmtree(kept.pop(0), ignore_errors=True)

    monkeypatch.setattr(paired, "make_room", no_room)
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="fcst")
    records.add(phase="run", op="write", bytes=300_000, t_start=T0, seconds=0.1, transfers=5, **site.fields())
    PairedReplay(repetitions=2, transfer_size_bytes=65536, min_bytes=0, min_seconds=0).run(
        "fcst", records, site, site.root / ".replay", tmp_path / "raw", "[t]")
    assert [r.file for r in records.records if r.phase == "replay" and r.op == "write"] == ["new files",
                                                                                          "rewritten files"]


def test_a_row_against_a_benchmark_point_too_small_to_time_is_not_timed():
    point = {"tier": "disk", "benchmark": "io", "pattern": "easy", "operation": "write", "tasks": 1, "tool": "fio",
             "cache_risk": False, "bw_MiB_per_s": 256.0, "aggregate": "mean"}
    events = paired_events()
    for timed in (True, False):
        bench = pd.DataFrame([{**point, "timed": timed}])
        row = efficiency_table(bench, events).query("step == 'fcst' and reference == 'easy, 1 task'").iloc[0]
        assert row["timed"] == timed and (row["verdict"] == "not timed") != timed
