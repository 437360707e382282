"""What a replay answers: the fidelity CSV (logged against replayed against the kernel), its provenance
sidecar, the timing sentence; and what ``inspect`` prints of a log."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pandas as pd

from ..fsutil import write_json_atomic, write_table
from ..units import format_bytes
from .logs import DIRECTIONS, FILE_MODULES, JobLog, file_table, rank_times, set_apart_note, slowest_rank
from .plan import Plan

CSV_COLUMNS = ["file", "direction", "logged_bytes", "logged_ops", "replayed_bytes", "replayed_ops", "replayed_s",
               "kernel_bytes", "kernel_ops", "tier", "expected_bytes", "module", "source", "path"]
KERNEL_COUNTERS = {"read": ("rchar", "syscr"), "write": ("wchar", "syscw")}


def fidelity_rows(plan: Plan, run) -> pd.DataFrame:
    """One row per file and direction the log counted, then one TOTAL row per direction with the kernel's counts."""
    rows = []
    for file in plan.files:
        for direction in DIRECTIONS:
            if not file.logged_ops[direction] and not file.logged_bytes[direction]:
                continue
            rows.append({"file": file.name, "direction": direction, "logged_bytes": file.logged_bytes[direction],
                         "logged_ops": file.logged_ops[direction],
                         "replayed_bytes": sum(r[f"{direction}_bytes"][file.index] for r in run.ranks),
                         "replayed_ops": sum(r[f"{direction}_ops"][file.index] for r in run.ranks),
                         "replayed_s": sum(r[f"{direction}_s"][file.index] for r in run.ranks),
                         "tier": run.target.tier, "expected_bytes": round(file.logged_bytes[direction] * plan.scale),
                         "module": file.module, "source": file.source, "path": file.path})
    table = pd.DataFrame(rows, columns=CSV_COLUMNS)
    totals = []
    for direction in DIRECTIONS:
        mine = table[table["direction"] == direction]
        counted = [r["kernel"] for r in run.ranks if r.get("kernel")]
        nbytes, calls = KERNEL_COUNTERS[direction]
        totals.append({"file": "TOTAL", "direction": direction, "logged_bytes": int(mine["logged_bytes"].sum()),
                       "logged_ops": int(mine["logged_ops"].sum()), "replayed_bytes": int(mine["replayed_bytes"].sum()),
                       "replayed_ops": int(mine["replayed_ops"].sum()), "replayed_s": float(mine["replayed_s"].sum()),
                       "kernel_bytes": sum(k[nbytes] for k in counted) if len(counted) == len(run.ranks) else None,
                       "kernel_ops": sum(k[calls] for k in counted) if len(counted) == len(run.ranks) else None,
                       "tier": run.target.tier, "expected_bytes": int(mine["expected_bytes"].sum()),
                       "module": "", "source": "", "path": ""})
    out = pd.concat([table, pd.DataFrame(totals, columns=CSV_COLUMNS)], ignore_index=True)
    return out.astype({"kernel_bytes": "Int64", "kernel_ops": "Int64"})


def replay_times(run) -> dict:
    """The replay's slowest rank (by read, write and metadata seconds together) and its times."""
    per_rank = [{"rank": r["rank"], "read_s": sum(r["read_s"]), "write_s": sum(r["write_s"]), "meta_s": r["meta_s"],
                 "gap_s": r["gap_s"], "wall_s": r["wall_s"]} for r in run.ranks]
    slowest = max(per_rank, key=lambda r: r["read_s"] + r["write_s"] + r["meta_s"])
    return {**slowest, "io_s": slowest["read_s"] + slowest["write_s"] + slowest["meta_s"], "ranks": per_rank,
            "launch_wall_s": run.wall_s}


def _times(t: dict) -> str:
    return f"read {t['read_s']:.3g} s, write {t['write_s']:.3g} s, metadata {t['meta_s']:.3g} s"


def timing_answer(job: JobLog, plan: Plan, runs: list) -> str:
    """"This job's I/O took X s where it was logged; at scale S with N ranks, on tier A it took ..., on B ..."."""
    logged = slowest_rank(rank_times(job))
    parts = []
    for run in runs:
        t = replay_times(run)
        gaps = f", plus {t['gap_s']:.3g} s of the logged gaps" if plan.timing == "logged" else ""
        parts.append(f"on tier {run.target.tier} ({run.fs_type}) it took {t['io_s']:.3g} s ({_times(t)}{gaps})")
    overlapped = (" (its calls overlapped: the parts add to more)"
                  if logged["read_s"] + logged["write_s"] + logged["meta_s"] > logged["io_s"] * 1.001 else "")
    return (f"This job's I/O took {logged['io_s']:.4g} s where it was logged (slowest rank {logged['rank']}: "
            f"{_times(logged)}{overlapped}; {job.nprocs} rank{'s' if job.nprocs != 1 else ''}, {job.run_time_s:.0f} s "
            f"run); at scale {plan.scale:g} with "
            f"{plan.nranks} rank{'s' if plan.nranks > 1 else ''} (timing {plan.timing}), " + "; ".join(parts) + ".")


def fidelity(table: pd.DataFrame, scale: float) -> dict:
    """The checks the issue asks for, per tier and direction: replayed over S x logged bytes, replayed over logged
    calls, kernel over replayed bytes and calls."""
    out = {}
    for (tier, direction), rows in table[table["file"] == "TOTAL"].groupby(["tier", "direction"]):
        row = rows.iloc[0]
        ratio = lambda a, b: (float(a) / float(b)) if b else (1.0 if not a else None)  # noqa: E731
        out[f"{tier}/{direction}"] = {
            "replayed_over_scaled_logged_bytes": ratio(row["replayed_bytes"], row["logged_bytes"] * scale),
            "replayed_over_logged_ops": ratio(row["replayed_ops"], row["logged_ops"]),
            "kernel_over_replayed_bytes": None if pd.isna(row["kernel_bytes"]) else ratio(row["kernel_bytes"],
                                                                                          row["replayed_bytes"]),
            "kernel_over_replayed_ops": None if pd.isna(row["kernel_ops"]) else ratio(row["kernel_ops"],
                                                                                      row["replayed_ops"]),
        }
    return out


def write_replay(out: str | Path, job: JobLog, plan: Plan, runs: list) -> tuple[pd.DataFrame, dict]:
    """The CSV (landed atomically) and its sidecar ``OUT.meta.json``: the log (path, checksum), the scale, ranks,
    timing mode, tiers, the timing answer and the fidelity ratios."""
    out = Path(out)
    table = pd.concat([fidelity_rows(plan, run) for run in runs], ignore_index=True)
    write_table(table, out)
    answer = timing_answer(job, plan, runs)
    meta = {
        "log": str(job.path), "log_sha256": job.sha256, "exe": job.exe, "jobid": job.jobid, "log_ranks": job.nprocs,
        "log_run_time_s": job.run_time_s, "log_version": job.log_version,
        "scale": plan.scale, "ranks": plan.nranks, "timing": plan.timing, "layer": plan.layer, "n_ops": plan.n_ops,
        "sources": {s: sum(1 for f in plan.files if f.source == s) for s in sorted({f.source for f in plan.files})},
        "notes": plan.notes, "host": socket.gethostname(), "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "logged_slowest_rank": slowest_rank(rank_times(job)),
        "tiers": [{"tier": run.target.tier, "dir": str(run.target.path), "fs_type": run.fs_type,
                   "launcher": run.launcher, "replay": replay_times(run)} for run in runs],
        "answer": answer, "fidelity": fidelity(table, plan.scale),
        "csv": out.name,
    }
    write_json_atomic(sidecar(out), meta)
    return table, meta


def sidecar(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".meta.json")


# ------------------------------------------------------------------ inspect

def _bins(row: pd.Series) -> str:
    shown = [f"{name[5:]}:{int(row[name])}" for name in row.index if name.startswith("size_") and row[name]]
    return " ".join(shown) or "-"


def inspect_text(job: JobLog, table: pd.DataFrame | None = None) -> str:
    """What the job did, for people: the job, per module its files, bytes, calls, access sizes, shared or
    per-rank files, DXT, and the time each rank spent in I/O."""
    table = file_table(job) if table is None else table
    lines = [f"{job.path.name} (sha256 {job.sha256[:12]}): {job.exe or '(executable not recorded)'}",
             f"  job {job.jobid}: {job.nprocs} rank{'s' if job.nprocs != 1 else ''}, {job.run_time_s:.0f} s run, "
             f"Darshan log {job.log_version}; "
             "modules: " + ", ".join(f"{m} ({i['records']})" for m, i in job.modules.items())]
    for module in FILE_MODULES:
        rows = table[table["module"] == module] if len(table) else table
        if rows.empty:
            continue
        files = rows["file"].nunique()
        shared = rows[rows["shared"]]["file"].nunique()
        lines.append(f"\n{module}: {_count(files, 'file')} ({shared} shared by all ranks, {files - shared} per rank)")
        for direction in DIRECTIONS:
            mine = rows[rows["direction"] == direction]
            if mine.empty:
                continue
            sizes = mine[[c for c in mine.columns if c.startswith("size_")]].sum()
            lines.append(f"  {direction:5s}: {format_bytes(mine['bytes'].sum()):>10s} in {int(mine['ops'].sum()):,} "
                         f"calls "
                         f"over {_count(mine['file'].nunique(), 'file')}, {mine['seconds'].sum():.3g} s; sizes {_bins(sizes)}")
        common = rows.drop_duplicates("file")["common_sizes_bytes"]
        tally: dict[int, int] = {}
        for text in common:
            for item in str(text).split():
                size, _, count = item.partition("x")
                tally[int(size)] = tally.get(int(size), 0) + int(count)
        if tally:
            top = sorted(tally.items(), key=lambda kv: -kv[1])[:4]
            lines.append("  most common sizes: " + ", ".join(f"{format_bytes(s)} x{c:,}" for s, c in top))
        if module in ("POSIX", "MPI-IO"):
            traced = {"yes": "present", "partial": "present but truncated (the replay uses the counters)",
                      "no": "absent"}
            present = sorted(set(rows["dxt"]))
            lines.append("  DXT trace: " + ", ".join(f"{traced[p]} for {_count(rows[rows['dxt'] == p]['file'].nunique(), 'file')}"
                                                      for p in present))
    times = rank_times(job)
    slow = slowest_rank(times)
    lines.append(f"\nI/O time per rank (POSIX and STDIO; the union of its calls' intervals): slowest rank "
                 f"{slow['rank']} {slow['io_s']:.4g} s ({_times(slow)}); mean {times['io_s'].mean():.4g} s (read "
                 f"{times['read_s'].mean():.3g} s, write {times['write_s'].mean():.3g} s, metadata "
                 f"{times['meta_s'].mean():.3g} s)")
    apart = set_apart_note(job)
    if apart:
        lines.append(apart[0].upper() + apart[1:])
    for warning in job.warnings:
        lines.append(f"not read: {warning}")
    partial = [m for m, info in job.modules.items() if info["partial"]]
    if partial:
        lines.append(f"partial modules (Darshan ran out of memory for their records): {', '.join(partial)}")
    return "\n".join(lines)


def write_inspect(out: str | Path, job: JobLog, table: pd.DataFrame) -> None:
    write_table(table, out)
    write_json_atomic(sidecar(out), {"log": str(job.path), "log_sha256": job.sha256, "exe": job.exe,
                                     "log_ranks": job.nprocs, "log_run_time_s": job.run_time_s,
                                     "modules": job.modules})


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
