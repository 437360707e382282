"""Write the checked-in post-processing fixtures: tests/data/records/ and tests/data/points/.

A tiny study ``fx``, as its jobs write it (JSON-lines records, one file per job, and manifests) and as
``cycleio bench`` writes its benchmark points (one CSV per point):

- two arms: ``lustre`` (the baseline: its steps run on the persistent tier, no staging) and ``shm``
  (steps on /dev/shm, staged in and out); the baseline's jobs run at half the speed (every offset and
  duration times 2);
- two cycles: 2026010100, a half cycle (fcst, post) after each arm's cold start, and 2026010106
  (observation dump, prep, fcst, post);
- every phase (stage_in, run, stage_out, verify, cleanup) and the run ops read, write, generate, encode,
  decode, define, locate, rename and compute; the forecast's MPI records (two compute ranks, serial
  strategy: write_effective per rank and output hour, write_final); reads carry cached_fraction;
- the second cycle's steps are paired: each job's records end with its paired replay (phase ``replay``: a
  ``wall`` record spanning it, and per repetition a fio ``read`` and ``write`` record), right after the
  job's last event, as benchmarks.paired adds them;
- benchmark points of fio on both tiers: the easy bandwidth pattern at 1 and 2 tasks, the easy metadata
  pattern at 1 task, field I/O at 2 tasks.

Times are multiples of 1/64 s and sizes whole MiB, so every table value can be worked out by hand; the
tests of the report modules (test_aggregate, test_benchtables, the figures') do so, on conftest's fixtures.
The script is self-contained (no cycleio import) so that the files stay what the jobs wrote, and
tests/test_fixture_study.py checks that its fields and columns are still the production ones. Run it after changing it: ``python tests/data/make_fixtures.py``; ``--check`` only
compares what it would write with the files there and exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MiB = 2**20
STUDY = "fx"
HOST = "vm"
T0 = 1_795_392_000.0  # the first cycle's jobs start here (seconds since the epoch)
CYCLES = ("2026010100", "2026010106")
CYCLE_GAP_S = 100.0  # the second cycle's jobs start this much later
JOB_START = {"coldstart": -50.0, "dump": 0.0, "prep": 10.0, "fcst": 20.0, "post": 40.0}
TIERS = {  # name: (tier_kind, fs_type, mount point, free bytes at the study's first job)
    "lustre": ("lustre", "ext4", "/", 80 * 2**30),
    "shm": ("memory", "tmpfs", "/dev/shm", 20 * 2**30),
}
ARMS = {"lustre": {"scratch": "lustre", "scale": 2.0}, "shm": {"scratch": "shm", "scale": 1.0}}
PERSISTENT = "lustre"

RECORD_FIELDS = ("study", "arm", "cycle", "step", "phase", "op", "tier", "tier_kind", "fs_type", "strategy", "tool",
                 "host", "rank", "nranks", "file", "n_files", "bytes", "t_start", "seconds", "attempt", "cache_risk",
                 "transfers", "cached_fraction", "mpiio", "repetition", "fresh_MiB")
POINT_COLUMNS = ("study", "benchmark", "pattern", "tier", "tier_kind", "fs_type", "host", "host_cores", "source",
                 "tool", "tool_version", "api", "job", "operation", "aggregate", "repetition", "repetitions", "tasks",
                 "nodes", "file_per_proc", "random", "transfer_size_bytes", "block_size_bytes", "segments",
                 "direct_io", "fsync", "reorder", "stonewall_s", "bw_MiB_per_s", "ops_per_s", "latency_s", "seconds",
                 "bytes", "cache_risk", "t_start")


def obs(cycle: str, name: str) -> str:
    return f"gdas.{cycle[:8]}/{cycle[8:]}/obs/gdas.t{cycle[8:]}z.{name}"


def history(cycle: str, hour: int) -> str:
    return f"gdas.{cycle[:8]}/{cycle[8:]}/model/atmos/history/gdas.t{cycle[8:]}z.atmf{hour:03d}.nc"


def restart(cycle: str) -> str:
    return f"gdas.{cycle[:8]}/{cycle[8:]}/model/atmos/input/fv_core.res.tile1.nc"


def increment(cycle: str) -> str:
    return f"gdas.{cycle[:8]}/{cycle[8:]}/analysis/atmos/gdas.t{cycle[8:]}z.atminc.nc"


def grib(cycle: str, hour: int) -> str:
    return f"gdas.{cycle[:8]}/{cycle[8:]}/products/atmos/grib2/1p00/gdas.t{cycle[8:]}z.pgrb2.1p00.f{hour:03d}"


# One event: (phase, op, where, offset_s, seconds, MiB, file, extra). where: "scratch" or "persistent", the tier the
# event's bytes land on or are read from; offsets from the job's start. A staged arm keeps every event; the baseline,
# which runs on its persistent tier, keeps the run phase and the verification of its outputs.
def coldstart(c: str) -> list[tuple]:
    r, i = restart(c), increment(c)
    return [
        ("run", "generate", "persistent", 0.0, 0.125, 0, r, {}),
        ("run", "define", "persistent", 0.125, 0.0625, 0, r, {}),
        ("run", "write", "persistent", 0.1875, 0.5, 8, r, {"transfers": 2}),
        ("run", "rename", "persistent", 0.6875, 0.0625, 0, r, {}),
        ("run", "generate", "persistent", 0.75, 0.0625, 0, i, {}),
        ("run", "encode", "persistent", 0.8125, 0.0625, 0, i, {}),
        ("run", "write", "persistent", 0.875, 0.25, 4, i, {"transfers": 1}),
        ("run", "rename", "persistent", 1.125, 0.0625, 0, i, {}),
    ]


def dump(c: str) -> list[tuple]:
    d1, d2 = obs(c, "adpupa.tm00.bufr_d"), obs(c, "satwnd.tm00.bufr_d")
    return [
        ("run", "generate", "persistent", 0.0, 0.0625, 0, d1, {}),
        ("run", "write", "persistent", 0.0625, 0.25, 2, d1, {"transfers": 1}),
        ("run", "rename", "persistent", 0.3125, 0.0625, 0, d1, {}),
        ("run", "generate", "persistent", 0.375, 0.0625, 0, d2, {}),
        ("run", "write", "persistent", 0.4375, 0.125, 1, d2, {"transfers": 1}),
        ("run", "rename", "persistent", 0.5625, 0.0625, 0, d2, {}),
    ]


def prep(c: str) -> list[tuple]:
    d1, d2, p = obs(c, "adpupa.tm00.bufr_d"), obs(c, "satwnd.tm00.bufr_d"), obs(c, "prepbufr")
    return [
        ("stage_in", "copy", "scratch", 0.0, 0.5, 2, d1, {}),
        ("stage_in", "copy", "scratch", 0.0, 0.25, 1, d2, {}),  # a second stream, beside the first
        ("stage_in", "sync", "scratch", 0.5, 0.0625, 0, "", {"n_files": 2}),
        ("verify", "checksum", "scratch", 0.5625, 0.125, 2, d1, {}),
        ("verify", "checksum", "scratch", 0.5625, 0.0625, 1, d2, {}),
        ("run", "read", "scratch", 1.0, 0.25, 2, d1, {"transfers": 1, "cached_fraction": 0.0}),
        ("run", "read", "scratch", 1.25, 0.125, 1, d2, {"transfers": 1, "cached_fraction": 0.0}),
        ("run", "compute", "scratch", 1.375, 0.5, 0, "", {"n_files": 0}),
        ("run", "generate", "scratch", 1.875, 0.125, 0, p, {}),
        ("run", "write", "scratch", 2.0, 0.5, 4, p, {"transfers": 1}),
        ("run", "rename", "scratch", 2.5, 0.0625, 0, p, {}),
        ("stage_out", "copy", "persistent", 3.0, 0.25, 4, p, {}),
        ("stage_out", "sync", "persistent", 3.25, 0.125, 0, "", {"n_files": 1}),
        ("verify", "checksum", "persistent", 3.375, 0.125, 4, p, {}),
        ("cleanup", "remove", "scratch", 3.5, 0.0625, 0, "", {"n_files": 3}),
    ]


def fcst(c: str, previous: str) -> list[tuple]:
    """The forecast reads a restart and an increment, then writes two output hours as the serial strategy does:
    two compute ranks compute, rank 0 writes while both wait (write_effective), the last hour is write_final."""
    r, i = restart(previous), increment(c)
    mpi = {"nranks": 2}
    events = [
        ("stage_in", "copy", "scratch", 0.0, 1.0, 8, r, {}),
        ("stage_in", "copy", "scratch", 0.0, 0.5, 4, i, {}),
        ("stage_in", "sync", "scratch", 1.0, 0.125, 0, "", {"n_files": 2}),
        ("verify", "checksum", "scratch", 1.125, 0.25, 8, r, {}),
        ("verify", "checksum", "scratch", 1.125, 0.125, 4, i, {}),
        ("run", "read", "scratch", 2.0, 0.5, 8, r, {"transfers": 2, "cached_fraction": 1.0}),
        ("run", "locate", "scratch", 2.5, 0.25, 0, r, {}),
        ("run", "read", "scratch", 2.75, 0.25, 4, i, {"transfers": 1, "cached_fraction": 0.5}),
    ]
    for start, hour in ((3.0, 3), (5.5625, 6)):
        label, a = f"f{hour:03d}", history(c, hour)
        for rank in (0, 1):
            events += [
                ("run", "compute", "scratch", start, 1.0, 0, "", {"rank": rank, "n_files": 0, **mpi}),
                ("run", "write_effective", "scratch", start + 1.0, 1.3125, 16, label,
                 {"rank": rank, "n_files": 1, **mpi}),
                ("run", "generate", "scratch", start + 1.0, 0.25, 0, label, {"rank": rank, **mpi}),
            ]
        events += [
            ("run", "define", "scratch", start + 1.25, 0.125, 0, label, mpi),
            ("run", "encode", "scratch", start + 1.375, 0.125, 0, label, mpi),
            ("run", "write", "scratch", start + 1.5, 1.0, 16, a, {"transfers": 4, **mpi}),
            ("run", "rename", "scratch", start + 2.5, 0.0625, 0, label, mpi),
        ]
    events += [
        ("run", "write_final", "scratch", 6.5625, 1.3125, 0, "f006", {"n_files": 1, **mpi}),
        ("stage_out", "copy", "persistent", 9.0, 1.0, 16, history(c, 3), {}),
        ("stage_out", "copy", "persistent", 9.0, 1.0, 16, history(c, 6), {}),
        ("stage_out", "sync", "persistent", 10.0, 0.25, 0, "", {"n_files": 2}),
        ("verify", "checksum", "persistent", 10.25, 0.5, 16, history(c, 3), {}),
        ("verify", "checksum", "persistent", 10.25, 0.5, 16, history(c, 6), {}),
        ("cleanup", "remove", "scratch", 10.75, 0.25, 0, "", {"n_files": 4}),
    ]
    return events


def post(c: str) -> list[tuple]:
    a3, a6, g3, g6 = history(c, 3), history(c, 6), grib(c, 3), grib(c, 6)
    return [
        ("stage_in", "copy", "scratch", 0.0, 0.5, 16, a3, {}),
        ("stage_in", "copy", "scratch", 0.0, 0.5, 16, a6, {}),
        ("stage_in", "sync", "scratch", 0.5, 0.0625, 0, "", {"n_files": 2}),
        ("verify", "checksum", "scratch", 0.5625, 0.25, 16, a3, {}),
        ("verify", "checksum", "scratch", 0.5625, 0.25, 16, a6, {}),
        ("run", "read", "scratch", 1.0, 0.5, 16, a3, {"transfers": 4, "cached_fraction": 1.0}),
        ("run", "locate", "scratch", 1.5, 0.0625, 0, a3, {}),
        ("run", "decode", "scratch", 1.5625, 0.0625, 0, a3, {}),
        ("run", "read", "scratch", 1.625, 0.5, 16, a6, {"transfers": 4, "cached_fraction": 1.0}),
        ("run", "locate", "scratch", 2.125, 0.0625, 0, a6, {}),
        ("run", "decode", "scratch", 2.1875, 0.0625, 0, a6, {}),
        ("run", "generate", "scratch", 2.25, 0.125, 0, g3, {}),
        ("run", "encode", "scratch", 2.375, 0.125, 0, g3, {}),
        ("run", "write", "scratch", 2.5, 0.25, 2, g3, {"transfers": 1}),
        ("run", "rename", "scratch", 2.75, 0.0625, 0, g3, {}),
        ("run", "generate", "scratch", 2.8125, 0.125, 0, g6, {}),
        ("run", "encode", "scratch", 2.9375, 0.125, 0, g6, {}),
        ("run", "write", "scratch", 3.0625, 0.25, 2, g6, {"transfers": 1}),
        ("run", "rename", "scratch", 3.3125, 0.0625, 0, g6, {}),
        ("stage_out", "copy", "persistent", 3.5, 0.125, 2, g3, {}),
        ("stage_out", "copy", "persistent", 3.5, 0.125, 2, g6, {}),
        ("stage_out", "sync", "persistent", 3.625, 0.0625, 0, "", {"n_files": 2}),
        ("verify", "checksum", "persistent", 3.6875, 0.0625, 2, g3, {}),
        ("verify", "checksum", "persistent", 3.6875, 0.0625, 2, g6, {}),
        ("cleanup", "remove", "scratch", 3.75, 0.0625, 0, "", {"n_files": 4}),
    ]


def jobs() -> list[tuple[str, str, str, list[tuple]]]:
    """(arm-independent) jobs in the order the workflow lists their files: cold starts, dumps, then the steps."""
    first, second = CYCLES
    return [("coldstart", first, "coldstart", coldstart(first)), ("dump", second, "dump", dump(second)),
            ("step", first, "fcst", fcst(first, first)), ("step", first, "post", post(first)),
            ("step", second, "prep", prep(second)), ("step", second, "fcst", fcst(second, first)),
            ("step", second, "post", post(second))]


def tier_fields(name: str) -> dict:
    kind, fs_type, _, _ = TIERS[name]
    return {"tier": name, "tier_kind": kind, "fs_type": fs_type}


def job_records(arm: str, cycle: str, step: str, events: list[tuple]) -> list[dict]:
    scratch, scale = ARMS[arm]["scratch"], ARMS[arm]["scale"]
    staged = scratch != PERSISTENT
    start = T0 + JOB_START[step] + CYCLE_GAP_S * CYCLES.index(cycle)
    records = []
    for phase, op, where, offset, seconds, mib, file, extra in events:
        if not staged and (phase in ("stage_in", "stage_out", "cleanup") or (phase == "verify" and where == "scratch")):
            continue
        tier = PERSISTENT if where == "persistent" else scratch
        record = {"study": STUDY, "arm": arm, "cycle": cycle, "step": step, "phase": phase, "op": op,
                  **tier_fields(tier), "strategy": "serial", "tool": "cycleio", "host": HOST, "rank": 0,
                  "nranks": 1, "file": file, "n_files": 0 if op in ("generate", "encode", "decode", "define",
                                                                     "locate", "rename") else 1,
                  "bytes": mib * MiB, "t_start": start + offset * scale, "seconds": seconds * scale, "attempt": 1,
                  "cache_risk": op == "read" and TIERS[tier][0] != "memory", "transfers": 0,
                  "cached_fraction": None, "mpiio": "", "repetition": 0, "fresh_MiB": None}
        if op == "rename":
            record["n_files"] = 1
        record.update(extra)
        assert tuple(record) == RECORD_FIELDS, record  # extra names only record fields
        records.append(record)
    if cycle == CYCLES[-1] and step in ("prep", "fcst", "post"):
        records += replay_records(records, scratch)
    return records


def replay_records(records: list[dict], tier: str) -> list[dict]:
    """A paired job's replay, right after its last event: per repetition a read and a write record (REPLAY's rates),
    and one ``wall`` record spanning them."""
    start = max(r["t_start"] + r["seconds"] for r in records)
    base = {**records[0], "phase": "replay", "tool": "fio", "rank": 0, "nranks": 1, "file": "", "attempt": 1,
            "cache_risk": False, "mpiio": ""}
    out, t = [], start
    for rep in (0, 1):
        for operation in ("read", "write"):
            values, files, file_mib, transfer, cached = REPLAY[tier][(records[0]["step"], operation)]
            nbytes = int(files * file_mib * MiB)
            seconds = nbytes / MiB / values[rep]
            out.append({**base, "op": operation, "n_files": files, "bytes": nbytes, "t_start": t, "seconds": seconds,
                        "transfers": int(nbytes // transfer),
                        "cached_fraction": (1.0 if cached else 0.0) if operation == "read" else None,
                        "repetition": rep})
            t += seconds
    out.append({**base, "op": "wall", "n_files": 0, "bytes": 0, "t_start": start, "seconds": t - start,
                "transfers": 0, "cached_fraction": None, "repetition": 0})
    return out


def manifest(arm: str, cycle: str, step: str, records: list[dict], number: int) -> dict:
    """What aggregate's tiers table reads: the tiers as the job found them (free space shrinks job by job)."""
    roles = {"persistent": PERSISTENT} if step in ("coldstart", "dump") else {
        "persistent": PERSISTENT, "scratch": ARMS[arm]["scratch"]}
    tiers = {}
    for role, name in roles.items():
        kind, fs_type, mount, free = TIERS[name]
        tiers[role] = {"tier": name, "tier_kind": kind, "fs_type": fs_type, "mount_point": mount,
                       "mount_options": "rw,relatime", "free_bytes": free - number * MiB, "total_bytes": 100 * 2**30,
                       "path": f"{mount.rstrip('/')}/tiers/{name}", "template": f"tiers/{name}", "striping": ""}
    outputs = [{"path": r["file"], "bytes": r["bytes"]} for r in records
               if r["op"] == "write" and r["phase"] == "run"]
    return {"study": STUDY, "arm": arm, "cycle": cycle, "step": step, "root": f"tiers/lustre/{STUDY}/{arm}",
            "outputs": outputs, "provenance": {"host": HOST, "tiers": tiers}}


def record_files() -> dict[str, str]:
    """Relative path: text, of every record and manifest file."""
    files, number = {}, 0
    for kind, cycle, step, events in jobs():
        for arm in ARMS:
            base = f"arms/{arm}/coldstart" if kind == "coldstart" else f"arms/{arm}/{cycle}/{step}"
            records = job_records(arm, cycle, step, events)
            files[f"{base}.records.jsonl"] = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
            files[f"{base}.manifest.json"] = json.dumps(manifest(arm, cycle, step, records, number), indent=2,
                                                        sort_keys=True) + "\n"
            number += 1
    return files


# ---------------------------------------------------------------------------------------------- benchmark points

def summarized(reps: list[dict]) -> list[dict]:
    """The rep rows, then max, min and mean over repetitions per job and operation, as cycleio bench adds them."""
    out = list(reps)
    def key(row: dict) -> tuple:
        return row["pattern"], row["api"], row["job"], row["operation"], row["tasks"]

    for first in dict.fromkeys(map(key, reps)):
        group = [r for r in reps if key(r) == first]
        for aggregate in ("max", "min", "mean"):
            row = {**group[0], "aggregate": aggregate, "repetition": None}
            for column in ("bw_MiB_per_s", "ops_per_s"):
                values = [r[column] for r in group if r[column] is not None]
                pick = {"max": max, "min": min, "mean": lambda v: sum(v) / len(v)}[aggregate]
                row[column] = pick(values) if values else None
            for column in ("latency_s", "seconds", "bytes"):
                values = [r[column] for r in group if r[column] is not None]
                mean = sum(values) / len(values) if values and aggregate == "mean" else None
                row[column] = int(round(mean)) if column == "bytes" and mean is not None else mean
            out.append(row)
    return out


def point_row(tier: str, benchmark: str, pattern: str, **values) -> dict:
    kind, fs_type, _, _ = TIERS[tier]
    row = dict.fromkeys(POINT_COLUMNS)
    row.update(study=STUDY, benchmark=benchmark, pattern=pattern, tier=tier, tier_kind=kind, fs_type=fs_type,
               host=HOST, host_cores=2, tool="fio", tool_version="3.33", api="psync", nodes=1, random=False,
               direct_io=False,
               cache_risk=False, t_start=T0 + 300.0)
    row.update(values)
    assert tuple(row) == POINT_COLUMNS, row
    return row


# bw_MiB_per_s of the two repetitions: mean, max and min follow (means are round numbers)
IO_EASY = {  # tier: {tasks: {operation: (rep0, rep1)}}
    "shm": {1: {"write": (480.0, 544.0), "read": (1000.0, 1048.0)}, 2: {"write": (960.0, 1088.0),
                                                                       "read": (2000.0, 2096.0)}},
    "lustre": {1: {"write": (96.0, 160.0), "read": (192.0, 320.0)}, 2: {"write": (224.0, 288.0),
                                                                       "read": (448.0, 576.0)}},
}
METADATA_EASY = {  # tier: {operation: ops_per_s of the two repetitions}
    "shm": {"create": (50000.0, 60000.0), "stat": (100000.0, 120000.0), "remove": (40000.0, 48000.0)},
    "lustre": {"create": (5000.0, 6000.0), "stat": (20000.0, 24000.0), "remove": (4000.0, 4800.0)},
}
FIELDIO = {  # tier: {layout: {operation: bw of the two repetitions}} (pattern 1: write N, barrier, read N)
    "shm": {"file_per_field": {"write": (300.0, 340.0), "read": (900.0, 1100.0)},
            "appended": {"write": (600.0, 680.0), "read": (1200.0, 1400.0)}},
    "lustre": {"file_per_field": {"write": (30.0, 34.0), "read": (90.0, 110.0)},
               "appended": {"write": (60.0, 68.0), "read": (120.0, 140.0)}},
}
REPLAY = {  # tier: {(step, operation): (MiB/s of the two repetitions, files, file MiB, transfer bytes, from cache)}
    "shm": {("fcst", "read"): ((120.0, 136.0), 2, 6, 4 * MiB, True), ("fcst", "write"): ((60.0, 68.0), 2, 16, 4 * MiB,
                                                                                        False),
            ("post", "read"): ((240.0, 272.0), 2, 16, 4 * MiB, True), ("post", "write"): ((28.0, 36.0), 2, 2, 2 * MiB,
                                                                                        False),
            ("prep", "read"): ((90.0, 102.0), 2, 1.5, 1.5 * MiB, False),
            ("prep", "write"): ((30.0, 34.0), 1, 4, 4 * MiB, False)},
    "lustre": {("fcst", "read"): ((56.0, 72.0), 2, 6, 4 * MiB, True), ("fcst", "write"): ((28.0, 36.0), 2, 16,
                                                                                        4 * MiB, False),
               ("post", "read"): ((112.0, 144.0), 2, 16, 4 * MiB, True), ("post", "write"): ((14.0, 18.0), 2, 2,
                                                                                           2 * MiB, False),
               ("prep", "read"): ((40.0, 56.0), 2, 1.5, 1.5 * MiB, False),
               ("prep", "write"): ((14.0, 18.0), 1, 4, 4 * MiB, False)},
}


def io_point(tier: str, tasks: int) -> list[dict]:
    reps = []
    for rep in (0, 1):
        for operation in ("write", "read"):
            bw = IO_EASY[tier][tasks][operation][rep]
            nbytes = tasks * 64 * MiB
            reps.append(point_row(tier, "io", "easy", source=f"easy.n{tasks}.rep{rep}.json", job=operation,
                                  operation=operation, aggregate="rep", repetition=rep, repetitions=2, tasks=tasks,
                                  file_per_proc=True, transfer_size_bytes=2 * MiB, block_size_bytes=64 * MiB,
                                  segments=1, fsync=True, reorder="none", stonewall_s=0.0, bw_MiB_per_s=bw,
                                  ops_per_s=bw / 2, latency_s=2 / bw / tasks, seconds=nbytes / MiB / bw,
                                  bytes=nbytes, cache_risk=operation == "read"))
    return summarized(reps)


def metadata_point(tier: str) -> list[dict]:
    reps = []
    for rep in (0, 1):
        for operation, engine in (("create", "filecreate"), ("stat", "filestat"), ("remove", "filedelete")):
            ops = METADATA_EASY[tier][operation][rep]
            reps.append(point_row(tier, "metadata", "easy", source=f"easy.n1.rep{rep}.json", api=engine,
                                  job=operation, operation=operation, aggregate="rep", repetition=rep, repetitions=2,
                                  tasks=1, file_per_proc=True, transfer_size_bytes=4096, block_size_bytes=0,
                                  segments=1000, fsync=False, ops_per_s=ops, latency_s=1 / ops,
                                  seconds=1000 / ops))
    return summarized(reps)


def fieldio_point(tier: str) -> list[dict]:
    reps = []
    for layout, operations in FIELDIO[tier].items():
        for rep in (0, 1):
            for operation, values in operations.items():
                bw = values[rep]
                reps.append(point_row(tier, "fieldio", "1", source="fieldio.n2.json", tool="cycleio-fieldio",
                                      tool_version="0.1.0", api=layout, job="1", operation=operation,
                                      aggregate="rep", repetition=rep, repetitions=2, tasks=2, transfer_size_bytes=MiB,
                                      block_size_bytes=MiB, segments=4, fsync=True, bw_MiB_per_s=bw, ops_per_s=bw,
                                      latency_s=2 / bw, seconds=8 / bw, bytes=8 * MiB))
    return summarized(reps)


def csv_text(rows: list[dict]) -> str:
    """As tierbench.write_rows writes a point: every column, None as an empty cell."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(POINT_COLUMNS))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buffer.getvalue()


def point_files() -> dict[str, str]:
    files = {}
    for tier in TIERS:
        for tasks in (1, 2):
            files[f"{tier}/io/easy.n{tasks}.csv"] = csv_text(io_point(tier, tasks))
        files[f"{tier}/metadata/easy.n1.csv"] = csv_text(metadata_point(tier))
        files[f"{tier}/fieldio/n2.csv"] = csv_text(fieldio_point(tier))
    return files


def fixture_files() -> dict[Path, str]:
    return {**{HERE / "records" / name: text for name, text in record_files().items()},
            **{HERE / "points" / name: text for name, text in point_files().items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the files there; write nothing")
    args = parser.parse_args(argv)
    wanted = fixture_files()
    present = {p for folder in ("records", "points") for p in (HERE / folder).rglob("*") if p.is_file()}
    stale = sorted(str(p.relative_to(HERE)) for p in present - set(wanted))
    differ = sorted(str(p.relative_to(HERE)) for p, text in wanted.items()
                    if not p.is_file() or p.read_bytes() != text.encode())
    if args.check:
        for name in stale:
            print(f"not made by this script: {name}", file=sys.stderr)
        for name in differ:
            print(f"differs from what this script makes: {name}", file=sys.stderr)
        return 1 if stale or differ else 0
    for path in map(Path, stale):
        (HERE / path).unlink()
    for path, text in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())  # as written: the points' CSV lines end in \r\n, as csv writes them
    print(f"wrote {len(wanted)} files under {HERE}" + (f", removed {len(stale)}" if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
