"""Helpers shared by the benchmarks: result rows, fio, page cache, and running a benchmark alone.

A row is one case of one benchmark: the measured value and its baseline (medians over repeats),
and the ratio measured/baseline per repeat, paired within the repeat, summarised as min/median/max.
``higher_is_better`` says which side of the goal passes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_TIERS = REPO / "results" / "bench-tiers"  # ext4 under results/: the embedded "lustre" tier
MiB = 2**20
ROW_KEYS = ("benchmark", "case", "metric", "value", "baseline", "ratio", "goal", "unit", "repeats",
            "min", "median", "max", "notes")


def row(benchmark: str, case: str, metric: str, unit: str, values: list[float], baselines: list[float],
        ratios: list[float], goal: float | None, higher_is_better: bool = True, notes: str = "") -> dict:
    """A result row: medians of the measured values and baselines, and min/median/max of the ratios."""
    median = statistics.median(ratios)
    return {"benchmark": benchmark, "case": case, "metric": metric, "unit": unit,
            "value": statistics.median(values), "baseline": statistics.median(baselines), "ratio": median,
            "goal": goal, "repeats": len(ratios), "min": min(ratios), "median": median, "max": max(ratios),
            "higher_is_better": higher_is_better, "notes": notes}


def passes(r: dict) -> bool | None:
    """True/False against the goal (on the median ratio), None without a goal."""
    if r.get("goal") is None:
        return None
    return r["median"] >= r["goal"] if r.get("higher_is_better", True) else r["median"] <= r["goal"]


def drop_caches() -> bool:
    """Write everything back, then drop the page cache (root only): the next reads come from storage."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def fio_rate(folder: Path, rw: str, file_bytes: int, nfiles: int = 1) -> float:
    """fio's MiB/s for a sequential read or write of ``nfiles`` files of ``file_bytes`` in ``folder``.

    Writes end with fsync (``end_fsync``, inside fio's runtime) and do not preallocate (cp and the
    staging engine do not either); reads invalidate the files' page cache first (fio's default).
    """
    folder.mkdir(parents=True, exist_ok=True)
    block = min(MiB, file_bytes)
    argv = ["fio", "--name=tier", f"--directory={folder}", f"--rw={rw}", f"--bs={block}",
            f"--nrfiles={nfiles}", f"--filesize={file_bytes}", f"--size={file_bytes * nfiles}",
            "--file_service_type=sequential", "--ioengine=psync", "--fallocate=none", "--output-format=json"]
    if rw == "write":
        argv.append("--end_fsync=1")
    if rw == "read":  # fio lays the files out first: make that durable, so the read is not racing it
        subprocess.run(argv[:3] + ["--rw=write"] + argv[4:] + ["--end_fsync=1"], check=True, capture_output=True)
        drop_caches()
    result = subprocess.run(argv, check=True, capture_output=True, text=True)
    job = json.loads(result.stdout[result.stdout.index("{"):])["jobs"][0]
    return job[rw]["bw_bytes"] / MiB


def fio_copy_rate(source: Path, target: Path, file_bytes: int, nfiles: int = 1, jobs: int = 1) -> dict[str, float]:
    """What the tiers allow a copy: fio reading ``nfiles`` files of ``file_bytes`` in ``source`` and writing as
    many in ``target`` at the same time, ``jobs`` readers and ``jobs`` writers (one of each per node copying).

    A copy reads one tier and writes the other at once; where both are the same device (node-local
    disk and the embedded "lustre" here) they share it, which reads and writes measured apart do not
    show. Each job works through its own files one after the other with the same transfer size,
    buffered; every written file is created by its job (``create_on_open``, as a copy creates its
    files) and fsynced at the end (``end_fsync``, inside fio's runtime), no preallocation. The
    source files are laid out first and made durable, the page cache dropped (as root). Returns
    MiB/s: ``copy`` (all bytes over the slowest job's runtime), ``read`` and ``write`` (each side's
    bytes over its slowest job's runtime).
    """
    source.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    block = min(MiB, file_bytes)
    files = [f"--bs={block}", f"--nrfiles={nfiles}", f"--filesize={file_bytes}", f"--size={file_bytes * nfiles}",
             "--file_service_type=sequential", "--ioengine=psync", "--fallocate=none", f"--numjobs={jobs}"]
    reader = ["--name=copyread", f"--directory={source}", *files]
    subprocess.run(["fio", *reader, "--rw=write", "--end_fsync=1"], check=True, capture_output=True)
    drop_caches()
    result = subprocess.run(["fio", "--output-format=json", *reader, "--rw=read",
                             "--name=copywrite", f"--directory={target}", *files, "--rw=write", "--end_fsync=1",
                             "--create_on_open=1"], check=True, capture_output=True, text=True)
    runs = json.loads(result.stdout[result.stdout.index("{"):])["jobs"]
    seconds = {rw: max(job[rw]["runtime"] for job in runs if job[rw]["io_bytes"]) / 1000 for rw in ("read", "write")}
    mib = jobs * nfiles * file_bytes / MiB
    return {"copy": mib / max(seconds.values()), "read": mib / seconds["read"], "write": mib / seconds["write"]}


def fio_version() -> str:
    try:
        return subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "not installed"


def standalone(run, doc: str, extra=None) -> int:
    """Run one benchmark alone: print its rows as a table and as JSON lines."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke version")
    if extra:
        extra(parser)
    rows = run(parser.parse_args())
    for r in rows:
        print(f"{r['case']:<40} {r['metric']:<22} {r['value']:>10.3g} {r['unit']:<6} baseline {r['baseline']:>10.3g}"
              f"  ratio {r['min']:.2f}/{r['median']:.2f}/{r['max']:.2f}  goal {r['goal']}  pass {passes(r)}")
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit("common.py holds helpers; run bench/run.py or one bench/bench_*.py")
