"""(5) Aggregation: seconds and peak memory of turning one million records into the study's tables.

A long study (many cycles, arms and members) collects millions of records; the aggregate rule
must still turn them into tables in seconds. This writes 1,000,000 synthetic records (JSON lines
with every field of cycleio.records.Record) into 105 record files laid out as the workflow lays
them out (results/<study>/arms/<arm>/<cycle>/<step>.records.jsonl: 3 arms x 7 cycles x prep, anal,
fcst, post and the obs dump), with the mix of phases, ops, tiers and sizes of the default study's
jobs (the lustre arm unstaged), then times the rule's command, `python -m cycleio aggregate
--events ... --tiers ... FILES` (rules/report.smk), in a child process. The baseline of its seconds is the
absolute goal of 10 s: ratio = seconds / 10, lower is better. Its peak RSS is reported against
the size of the record files (no goal). Three repeats (--quick: one).

Run alone: .venv/bin/python bench/bench_aggregation.py [--quick]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from common import BENCH_TIERS, REPO, MiB, row, standalone

sys.path.insert(0, str(REPO / "scripts"))
from cycleio.config.calendar import shift_cycle  # noqa: E402
from cycleio.records import RECORD_FIELDS, Record, read_records  # noqa: E402

BENCHMARK = "aggregation"
GOAL_S = 10.0
N_RECORDS = 1_000_000
ARMS = {"lustre": ("lustre", "lustre", "ext4"), "node_local": ("node_local", "node_local", "ext4"),
        "shm": ("shm", "memory", "tmpfs")}
PERSISTENT = ("lustre", "lustre", "ext4")
# Per step: (phase, op, on the persistent tier?, records per job, typical bytes), after the
# node_local arm of the default study (C48 L127).
MIX = {
    "prep": [("run", "generate", 0, 3, 0), ("run", "read", 0, 9, 58593), ("run", "write", 0, 3, 39062),
             ("stage_in", "copy", 0, 9, 58593), ("stage_in", "sync", 0, 1, 0), ("stage_out", "copy", 1, 3, 39062),
             ("stage_out", "sync", 1, 1, 0), ("verify", "checksum", 1, 3, 39062),
             ("verify", "checksum", 0, 9, 58593), ("cleanup", "remove", 0, 1, 0)],
    "anal": [("run", "define", 0, 10, 0), ("run", "generate", 0, 18, 0), ("run", "read", 0, 30, 1220688),
             ("run", "write", 0, 18, 1341376), ("stage_in", "copy", 0, 30, 1220688), ("stage_in", "sync", 0, 1, 0),
             ("stage_out", "copy", 1, 18, 1341376), ("stage_out", "sync", 1, 1, 0),
             ("verify", "checksum", 1, 18, 1341376), ("verify", "checksum", 0, 30, 1220688),
             ("cleanup", "remove", 0, 1, 0)],
    "fcst": [("run", "generate", 0, 8, 0), ("run", "read", 0, 40, 1798676), ("run", "write", 0, 126, 1341376),
             ("run", "write_effective", 0, 8, 195783552), ("run", "write_final", 0, 1, 0),
             ("stage_in", "copy", 0, 40, 1798676), ("stage_in", "sync", 0, 1, 0),
             ("stage_out", "copy", 1, 126, 1341376), ("stage_out", "sync", 1, 1, 0),
             ("verify", "checksum", 1, 126, 1341376), ("verify", "checksum", 0, 40, 1798676),
             ("cleanup", "remove", 0, 1, 0)],
    "post": [("run", "encode", 0, 12, 0), ("run", "generate", 0, 16, 0), ("run", "read", 0, 8, 68313445),
             ("run", "write", 0, 16, 2773039), ("stage_in", "copy", 0, 8, 68313445), ("stage_in", "sync", 0, 1, 0),
             ("stage_out", "copy", 1, 16, 2773039), ("stage_out", "sync", 1, 1, 0),
             ("verify", "checksum", 1, 16, 2773039), ("verify", "checksum", 0, 8, 68313445),
             ("cleanup", "remove", 0, 1, 0)],
    "dump": [("run", "generate", 1, 20, 0), ("run", "write", 1, 20, 205078)],
}


def write_records(root: Path, n_records: int, seed: int = 1) -> list[Path]:
    """Record files under ``root`` as the workflow lays them out; ``n_records`` records in all."""
    rng = np.random.default_rng(seed)
    jobs = [(arm, shift_cycle("2026010100", 6 * c), step) for arm in ARMS for c in range(7) for step in MIX]
    paths = []
    for index, (arm, cycle, step) in enumerate(jobs):
        mix = [m for m in MIX[step] if arm != "lustre" or m[0] == "run"]  # the lustre arm runs unstaged
        n = n_records // len(jobs) + (index < n_records % len(jobs))
        weights = np.array([m[3] for m in mix], float)
        pick = rng.choice(len(mix), n, p=weights / weights.sum())
        phase, op, persistent, _, size = (np.array(column, dtype=object)[pick] for column in zip(*mix))
        on_persistent = persistent.astype(bool) | (step == "dump")
        nbytes = (size.astype(float) * rng.lognormal(0, 0.3, n)).astype("int64")
        seconds = np.where(nbytes > 0, nbytes / MiB / rng.lognormal(5.5, 0.5, n), rng.lognormal(-4.5, 1.0, n))
        tier = pd.Series([ARMS[arm], PERSISTENT]).iloc[on_persistent.astype(int)].tolist()
        frame = pd.DataFrame({
            **Record(study="benchagg", arm=arm, cycle=cycle, step=step, phase="", op="", tier="", tier_kind="",
                     fs_type="", strategy="serial", host="node0001").__dict__,
            "phase": phase, "op": op, "tier": [t[0] for t in tier], "tier_kind": [t[1] for t in tier],
            "fs_type": [t[2] for t in tier],
            "file": [f"gdas.{cycle[:8]}/{cycle[8:]}/model/atmos/history/gdas.t{cycle[8:]}z.{o}{k:03d}.nc"
                     for o, k in zip(op, rng.integers(0, 1000, n))],
            "n_files": (nbytes > 0).astype(int), "bytes": nbytes,
            "t_start": 1.8e9 + index * 3600.0 + np.concatenate([[0.0], np.cumsum(seconds)[:-1]]),
            "seconds": seconds, "transfers": -(-nbytes // (4 * MiB)),
        })
        path = root / "arms" / arm / cycle / f"{step}.records.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame[sorted(frame.columns)].to_json(path, orient="records", lines=True, double_precision=15)
        paths.append(path)
    first = read_records(paths[0])[0]
    assert set(first) == set(RECORD_FIELDS) and Record(**first), first
    return paths


def aggregate(paths: list[Path], out_dir: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of the aggregate command in a child process."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
    tables = {"--events": "io_events.parquet", "--events-csv": "io_events.csv", "--summary": "step_summary.csv",
              "--throughput": "phase_throughput.csv", "--staging": "staging.csv", "--tiers": "tiers.csv"}
    argv = [sys.executable, "-m", "cycleio", "aggregate", *(arg for option, name in tables.items()
                                                            for arg in (option, str(out_dir / name))),
            *map(str, paths)]
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"aggregate failed: {child.stderr.read().decode()[-1500:]}")
    return seconds, usage.ru_maxrss / 1024


def run(args) -> list[dict]:
    BENCH_TIERS.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="aggregation-", dir=BENCH_TIERS))
    try:
        t0 = time.perf_counter()
        paths = write_records(root / "benchagg", N_RECORDS)
        made_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in paths) / MiB
        seconds, peaks = [], []
        for repeat in range(1 if args.quick else 3):
            shutil.rmtree(root / "tables", ignore_errors=True)
            s, peak = aggregate(paths, root / "tables")
            seconds.append(s)
            peaks.append(peak)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    case = f"{N_RECORDS:,} records -> tables"
    notes = (f"{N_RECORDS:,} records in {len(paths)} files ({size:.0f} MiB, written in {made_s:.0f} s); "
             "baseline = the 10 s goal (lower is better)")
    return [row(BENCHMARK, f"{case}: wall time", "wall time", "s", seconds, [GOAL_S] * len(seconds),
                [s / GOAL_S for s in seconds], 1.0, higher_is_better=False, notes=notes),
            row(BENCHMARK, f"{case}: peak RSS", "peak RSS", "MiB", peaks, [size] * len(peaks),
                [p / size for p in peaks], None, higher_is_better=False,
                notes="ru_maxrss of the aggregate process; baseline = the record files' size (no goal)")]


if __name__ == "__main__":
    sys.exit(standalone(run, __doc__))
