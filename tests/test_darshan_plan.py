"""Turning a Darshan log into the replay's per-rank operations: DXT, counters, scale, ranks (no MPI here)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import darshan
import numpy as np
import pandas as pd
import pytest

from cycleio.darshan.logs import DarshanLogError, read_log
from cycleio.darshan.plan import (FSYNC, OPEN, READ, WRITE, make_plan, synthesise_offsets, synthesise_sizes)

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
MACSIO = next(LOGS.glob("shane_macsio_*.darshan"))


@functools.cache
def log_of(path: Path):
    """The log at ``path``, read once (0.1-0.2 s each): a test that changes a log changes a deep copy of it."""
    return read_log(path)


def totals(plan, kind):
    return int(sum((r["kind"] == kind).sum() for r in plan.ranks)), plan.bytes("read" if kind == READ else "write")


def logged(plan, direction):
    return (sum(f.logged_ops[direction] for f in plan.files), sum(f.logged_bytes[direction] for f in plan.files))


@pytest.mark.parametrize("name, ranks", [("ior_hdf5_example.darshan", 1), ("ior_hdf5_example.darshan", 4),
                                         ("dxt.darshan", 1), (MACSIO.name, 4), ("noposix.darshan", 4)])
def test_at_scale_1_the_plan_issues_what_the_log_counted(name, ranks):
    plan = make_plan(log_of(LOGS / name), ranks)
    for kind, direction in ((READ, "read"), (WRITE, "write")):
        assert totals(plan, kind) == logged(plan, direction)
    for file in plan.files:  # per file as well
        for kind, direction in ((READ, "read"), (WRITE, "write")):
            mine = [r["length"][(r["file"] == file.index) & (r["kind"] == kind)] for r in plan.ranks]
            assert sum(len(m) for m in mine) == file.logged_ops[direction]
            assert sum(int(m.sum()) for m in mine) == file.logged_bytes[direction]


def test_dxt_keeps_the_logged_offsets_lengths_and_each_ranks_order():
    job = log_of(LOGS / "ior_hdf5_example.darshan")
    plan = make_plan(job, 4)
    assert {f.source for f in plan.files} == {"dxt"}
    for trace in job.dxt["DXT_POSIX"]:
        mine = plan.ranks[trace["rank"]]
        data = np.isin(mine["kind"], (READ, WRITE))
        segments = pd.concat([trace["write_segments"].assign(kind=WRITE), trace["read_segments"].assign(kind=READ)])
        segments = segments.sort_values("start_time", kind="stable")
        assert mine["offset"][data].tolist() == segments["offset"].tolist()
        assert mine["length"][data].tolist() == segments["length"].tolist()
        assert mine["kind"][data].tolist() == segments["kind"].tolist()


def test_ranks_are_dealt_over_the_replays():
    job = log_of(LOGS / "ior_hdf5_example.darshan")
    one, two = make_plan(job, 1), make_plan(job, 2)
    assert len(one.ranks) == 1 and len(two.ranks) == 2
    per_log_rank = {t["rank"]: len(t["read_segments"]) + len(t["write_segments"]) for t in job.dxt["DXT_POSIX"]}
    data = lambda r: int(np.isin(r["kind"], (READ, WRITE)).sum())  # noqa: E731
    assert data(two.ranks[0]) == per_log_rank[0] + per_log_rank[2]
    assert data(two.ranks[1]) == per_log_rank[1] + per_log_rank[3]


def test_a_shared_files_counters_are_cut_into_one_piece_per_replay_rank():
    plan = make_plan(log_of(LOGS / "example.darshan"), 4, scale=1e-5)
    writes = [int((r["kind"] == WRITE).sum()) for r in plan.ranks]
    assert sum(writes) == 16402 and max(writes) - min(writes) <= 1
    opens = [int((r["kind"] == OPEN).sum()) for r in plan.ranks]
    assert sum(opens) == int(log_of(LOGS / "example.darshan").counters["POSIX"]["POSIX_OPENS"].sum())


@pytest.mark.parametrize("scale", [0.5, 0.01, 1e-5, 20])  # above 1: a small job made long enough to time
def test_scaled_bytes_stay_within_a_byte_per_stream_of_scale_times_logged(scale):
    for name in ("ior_hdf5_example.darshan", "example.darshan", "dxt.darshan"):
        plan = make_plan(log_of(LOGS / name), 1, scale=scale)
        for direction, kind in (("read", READ), ("write", WRITE)):
            ops, nbytes = logged(plan, direction)
            assert totals(plan, kind)[0] == ops  # scaling keeps every call
            assert abs(plan.bytes(direction) - nbytes * scale) <= max(0.01 * nbytes * scale, len(plan.files) + 1)


def test_counter_synthesis_sizes_follow_the_histogram_and_the_common_sizes():
    # 16 calls of 256 KiB and 4 small ones (0-100 bytes): 4 MiB + 200 bytes
    hist = [4, 0, 0, 0, 16, 0, 0, 0, 0, 0]
    sizes = synthesise_sizes(20, 16 * 262144 + 200, hist, {262144: 16, 50: 4})
    assert sizes.sum() == 16 * 262144 + 200 and len(sizes) == 20
    assert (sizes == 262144).sum() == 16 and (sizes == 50).sum() == 4
    # no common sizes: each bin's calls sized alike within the bin, the bytes exact
    sizes = synthesise_sizes(20, 3_000_000, hist, {})
    assert sizes.sum() == 3_000_000
    large = sizes[sizes > 100]
    assert len(large) == 16 and ((large >= 102401) & (large <= 1048576)).all()
    # a histogram that disagrees with the calls: alike sizes, the bytes still exact
    assert synthesise_sizes(3, 10, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0], {}).sum() == 10


def test_counter_synthesis_offsets_consecutive_then_gapped_then_rewinding():
    sizes = np.full(6, 10, dtype=np.int64)
    offsets = synthesise_offsets(sizes, extent=100, consecutive=2, sequential=4)
    assert offsets[:3].tolist() == [0, 10, 20]  # 2 consecutive after the first
    assert offsets[3] > 30 and offsets[4] > offsets[3] + 10  # then sequential with gaps
    assert offsets[4] + 10 <= 100
    assert offsets[5] == 0  # then rewinding


def test_fsyncs_follow_writes_and_logged_timing_keeps_the_gaps():
    plan = make_plan(log_of(MACSIO), 1, timing="logged")
    rank = plan.ranks[0]
    for index in np.flatnonzero(rank["kind"] == FSYNC):
        assert index > 0
    assert rank["gap_s"].sum() > 0
    assert make_plan(log_of(MACSIO), 1, timing="io").ranks[0]["gap_s"].sum() == 0
    half = make_plan(log_of(MACSIO), 1, scale=0.5, timing="logged").ranks[0]["gap_s"].sum()
    assert half == pytest.approx(rank["gap_s"].sum() * 0.5)


def test_a_truncated_dxt_trace_is_replayed_from_the_counters_and_says_so():
    job = log_of(LOGS / "dxt.darshan")
    partial = copy.deepcopy(job)
    partial.modules["DXT_POSIX"]["partial"] = True
    plan = make_plan(partial, 1)
    assert {f.source for f in plan.files if f.module == "POSIX"} == {"counters, DXT truncated", "counters"}
    assert any("DXT trace truncated" in note for note in plan.notes)
    for kind, direction in ((READ, "read"), (WRITE, "write")):
        ops, nbytes = logged(plan, direction)
        assert totals(plan, kind)[1] == nbytes
        assert abs(totals(plan, kind)[0] - ops) <= 0.01 * ops
    # a trace shorter than the counters (without the flag) is truncated too
    short = copy.deepcopy(job)
    first = short.dxt["DXT_POSIX"][0]
    first["read_segments"] = first["read_segments"].iloc[:-1]
    sources = {f.name: f.source for f in make_plan(short, 1).files}
    assert sources[first["file"]] == "counters, DXT truncated"


def test_bad_requests_are_refused_before_any_replay():
    job = log_of(LOGS / "ior_hdf5_example.darshan")
    with pytest.raises(DarshanLogError, match=r"--ranks 5: the log's job ran 4 ranks"):
        make_plan(job, 5)
    with pytest.raises(DarshanLogError, match=r"--ranks 0"):
        make_plan(job, 0)
    for scale in (0, -1, float("inf")):
        with pytest.raises(DarshanLogError, match=rf"--scale {scale}: expected a number above 0"):
            make_plan(job, 1, scale=scale)
    with pytest.raises(DarshanLogError, match=r"--timing 'wall'"):
        make_plan(job, 1, timing="wall")
    with pytest.raises(DarshanLogError, match=r"--layer 'hdf5'"):
        make_plan(job, 1, layer="hdf5")


def test_the_mpiio_layer_deals_collective_calls_round_robin_and_counts_the_rounds():
    job = log_of(LOGS / "example.darshan")
    plan = make_plan(job, 4, scale=1e-5, layer="mpiio")
    (index, how), = plan.mpiio.items()
    assert plan.files[index].module == "MPI-IO" and how["collective"] == {"read": 0, "write": 16384}
    assert how["rounds"]["write"] == 16384 // 4
    coll = [r["offset"][(r["coll"] == 1)] for r in plan.ranks]
    firsts = sorted(int(c[0]) for c in coll)
    sizes = sorted({int(r["length"][r["coll"] == 1][0]) for r in plan.ranks})
    assert firsts[1] - firsts[0] in range(sizes[0] - 1, sizes[-1] + 2)  # round 0 of the 4 ranks: side by side
    assert not any(np.isin(r["kind"], (OPEN, FSYNC)).any() for r in plan.ranks)  # the open is MPI-IO's, collective


def test_a_100000_operation_dxt_trace_is_planned_whole():
    """Its time is bench 9's (bench/bench_darshan.py: planning it against 10 s), not a unit test's."""
    job = copy.deepcopy(log_of(LOGS / "ior_hdf5_example.darshan"))
    n = 25_000  # per rank, 4 ranks
    for trace in job.dxt["DXT_POSIX"]:
        start = np.linspace(0, 100, n)
        trace["write_segments"] = pd.DataFrame({"offset": np.arange(n) * 4096 + trace["rank"] * n * 4096,
                                                "length": np.full(n, 4096), "start_time": start,
                                                "end_time": start + 1e-4})
        trace["read_segments"] = trace["read_segments"].iloc[:0]
    posix = job.counters["POSIX"]
    posix.loc[:, "POSIX_WRITES"] = 4 * n
    posix.loc[:, "POSIX_READS"] = 0
    posix.loc[:, "POSIX_BYTES_WRITTEN"] = 4 * n * 4096
    posix.loc[:, "POSIX_BYTES_READ"] = 0
    plan = make_plan(job, 4, timing="logged")
    assert plan.files[0].source == "dxt"
    assert totals(plan, WRITE) == (4 * n, 4 * n * 4096)
