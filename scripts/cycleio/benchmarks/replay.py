"""The replay of the steps' I/O on a tier: for each surrogate step and operation, the files of one of
its jobs (count, mean size) written, and read back, with IOR or fio, so the efficiency table
compares each step with the storage doing the same work.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from .common import parse_run, run_tool, time_limit
from .points import TierSite, context, finish, fresh, log_rows, summarize
from .rows import MiB
from .specs import PointSettings, ReplaySpec
from .tools import choose_tool, fio, ior

log = logging.getLogger("cycleio")


def replay_specs(events, tier: str, spec: ReplaySpec) -> list[dict]:
    """Per surrogate step and operation on a tier: the files of one job, their mean size and transfer size.

    ``events`` are the study's records (io_events); only the run phase's reads and writes count.
    The transfer size is the surrogates' own (bytes over storage calls, from the records' ``transfers``),
    rounded down to a multiple of 8 bytes (IOR's rule), unless the spec fixes one. A read plan is
    ``cold`` when under half of the step's bytes were in the page cache as its reads began (the
    records' ``cached_fraction``): its replay then reads from storage too.
    """
    run = events[(events["tier"] == tier) & (events["phase"] == "run") & events["op"].isin(["read", "write"])
                 & (events["step"] != "coldstart") & (events["bytes"] > 0)]
    out = []
    for (step, op), group in run.groupby(["step", "op"], sort=True):
        per_job = group.groupby(["arm", "cycle"])["bytes"].agg(["size", "sum"])
        files = int(round(float(per_job["size"].median())))
        file_bytes = int(group["bytes"].sum() // len(group))
        transfer = spec.transfer_size_bytes
        if not transfer:
            calls = int(group["transfers"].sum()) if "transfers" in group else 0
            transfer = int(group["bytes"].sum() // calls) if calls > 0 else MiB
        word = ior.WORD_BYTES
        transfer = max(word, min(transfer, file_bytes) // word * word)
        file_bytes = max(transfer, file_bytes - file_bytes % transfer)
        cached = _cached_share(group) if op == "read" else None
        out.append({"step": step, "op": op, "files": max(1, min(files, spec.max_files)), "files_per_job": files,
                    "file_bytes": file_bytes, "transfer_bytes": transfer, "cached_fraction": cached,
                    "cold": cached is not None and cached < 0.5})
    return out


def _cached_share(reads) -> float | None:
    """Share of these reads' bytes that the page cache held as they began; None if not measured."""
    if "cached_fraction" not in reads:
        return None
    known = reads[reads["cached_fraction"].notna()]
    total = known["bytes"].sum()
    return float((known["cached_fraction"] * known["bytes"]).sum() / total) if total > 0 else None


def run_replay(settings: PointSettings, raw_dir: Path, events_path: Path) -> list[dict]:
    """Replay each step's writes and reads on the tier with IOR or fio: one task, the files of one
    of the step's jobs (count, mean size), fsync per file; a step's reads read such files back."""
    import pandas as pd

    spec, reps = settings.replay_spec(), settings.repetitions
    events = pd.read_parquet(events_path)
    events = events[[c for c in ("arm", "cycle", "step", "phase", "op", "tier", "bytes", "transfers",
                                          "cached_fraction") if c in events]]
    plans = replay_specs(events, settings.tier.name, spec)
    tool = choose_tool(settings.tool, "replay", settings.paths)
    site = TierSite(settings.tier, settings.study, "replay")
    label = f"[{settings.tier.name} replay {tool.name}]"
    if not plans:
        log.info("%s no step ran on this tier: nothing to replay", label)
        return []
    version = tool.version()
    rows: list[dict] = []
    t_start = time.time()
    try:
        for plan in plans:
            # the step's files (count and mean size) are written (and for a read plan read back);
            # the step's own operation is kept
            step, op = plan["step"], plan["op"]
            site.require_space(plan["files"] * plan["file_bytes"], f"replay of {step}")
            log.info("%s %s %s: %d files of %.2f MiB (the step's jobs %s %d), transfer %d bytes", label, step, op,
                     plan["files"], plan["file_bytes"] / MiB, op, plan["files_per_job"], plan["transfer_bytes"])
            if plan["cold"]:
                log.info("%s %s read: %.0f%% of the step's bytes were cached as it read them: the replay reads from "
                         "storage%s", label, step, 100 * plan["cached_fraction"],
                         "" if tool.name == "fio" else " where it can (IOR cannot drop its files' pages: it reads warm)")
            name = f"replay-{step}-{op}"
            nbytes = plan["files"] * plan["file_bytes"] * (2 if op == "read" else 1)
            limit = time_limit(nbytes, nbytes / plan["transfer_bytes"])
            step_rows: list[dict] = []
            if tool.name == "ior":
                fresh(site.root)
                summary = raw_dir / f"{name}.json"
                argv = ior.replay_command(tool.path, plan["files"], plan["file_bytes"], plan["transfer_bytes"],
                                         site.root / "replay", summary, settings.launcher, read=op == "read")
                run = run_tool(tool.label, argv, raw_dir, name, limit)
                parsed = parse_run(ior.parse_json, summary, tool.label, run, stdout_path=run.stdout)
                step_rows = _replay_totals(parsed, plan, reps)
            else:
                for rep in range(reps):
                    fresh(site.root)
                    rep_name = f"{name}.rep{rep}"
                    argv = fio.replay_command(tool.path, plan["files"], plan["file_bytes"], plan["transfer_bytes"],
                                              site.root, raw_dir / f"{rep_name}.json", read=op == "read",
                                              cold=plan["cold"])
                    run = run_tool(tool.label, argv, raw_dir, rep_name, limit)
                    parsed = parse_run(fio.parse, raw_dir / f"{rep_name}.json", tool.label, run)
                    step_rows += [{**r, "aggregate": "rep", "repetition": rep, "repetitions": reps,
                                   "tool_version": r["tool_version"] or version, "segments": plan["files"],
                                   "block_size_bytes": plan["file_bytes"], "fsync": True} for r in parsed]
            step_rows = [{**r, "cold_cache": plan["cold"] and tool.name == "fio"} for r in step_rows
                         if r["operation"] == op]
            rows += finish(step_rows, context(settings, site, pattern=step), t_start)
    finally:
        site.cleanup()
    log_rows(label, rows)
    return rows + summarize(rows)


def _replay_totals(parsed: list[dict], plan: dict, reps: int) -> list[dict]:
    """IOR's -m replay gives a repetition per file: one rep row per operation, bytes over seconds."""
    out = []
    per_file = [r for r in parsed if r["aggregate"] == "rep"]
    for op in ("write", "read"):
        rows = [r for r in per_file if r["operation"] == op]
        if not rows:
            continue
        nbytes = sum(r["bytes"] or 0 for r in rows)
        seconds = sum(r["seconds"] or 0 for r in rows)
        latency = [r["latency_s"] for r in rows if r["latency_s"] is not None]
        out.append({**rows[0], "aggregate": "rep", "repetition": 0, "repetitions": 1, "segments": plan["files"],
                    "bw_MiB_per_s": nbytes / MiB / seconds if seconds else None,
                    "ops_per_s": nbytes / plan["transfer_bytes"] / seconds if seconds else None,
                    "latency_s": sum(latency) / len(latency) if latency else None, "seconds": seconds,
                    "bytes": nbytes})
    return out
