"""What a replay of the steps' I/O does: for each step and operation, the files of one of its jobs in
size classes (count, mean size, transfer size), from the step's records; the paired replay
(:mod:`cycleio.benchmarks.paired`) runs it with fio right after the step, and bench/bench_efficiency.py
the same way.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil

from ..storage.tiers import free_bytes
from .rows import MiB
from .specs import ReplaySpec
from .tools import ior

COLD_BELOW = 0.5  # a read whose file had less than this share of its bytes cached is replayed from storage
MIN_CLASS_SHARE = 0.10  # size classes with less of a step's bytes, or less than MIN_CLASS_BYTES,
MIN_CLASS_BYTES = 16 * MiB  # merge with their neighbours in size
TIMED_BYTES = 32 * MiB  # a step moving less (prep at C48: under 1 MiB) takes a replay of a millisecond or two:
# its ratio to the replay says little (the bench sets it no goal; the study's default benchmarks.replay.min_bytes)
ROOM_MARGIN_BYTES = 512 * MiB  # kept replay files give way before the tier (or RAM) has less free


def replay_specs(events, tier: str, spec: ReplaySpec, phase: str = "run") -> list[dict]:
    """Per surrogate step and operation on a tier: the files of one job in size classes.

    ``events`` are the study's records (io_events), one per file and operation; only the run
    phase's reads and writes of the cycles' own jobs count (records.cycle_records: no cold
    start or dumps). A step's files fall into classes by size (powers of two) and, for reads, by
    page-cache state; each class gives its files per job (at least one), their mean size
    and transfer size (bytes over storage calls, from the records' ``transfers``, rounded down to a
    multiple of 8 bytes, IOR's rule, unless the spec fixes one), and ``cold``: whether under half of
    a file's bytes were cached as the step began reading it (``cached_fraction``), so the replay
    reads such files from storage. Mean sizes alone would not do: on a disk whose write cache absorbs
    bursts, four 300 MiB files land at a third of the speed of 24 files of 57 MiB, the same bytes.
    A plan keeps the step's share of cached bytes (``cached_fraction``) and ``cold`` if any class is.
    Classes holding little of the step's bytes are merged (``_size_groups``): fio spends about 0.2 s
    starting each job, whatever its size, and a study replays every step on every tier.
    """
    import numpy as np

    from ..records import cycle_records  # here: the Snakefile imports this module, records loads pyarrow

    events = cycle_records(events)
    run = events[(events["tier"] == tier) & (events["phase"] == phase) & events["op"].isin(["read", "write"])
                 & (events["bytes"] > 0)].copy()
    run["size_class"] = np.floor(np.log2(run["bytes"].astype(float))).astype(int)
    cached = run["cached_fraction"] if "cached_fraction" in run else None
    run["cold"] = (run["op"] == "read") & (cached < COLD_BELOW) if cached is not None else False
    out = []
    for (step, op), group in run.groupby(["step", "op"], sort=True):
        jobs = max(1, len(group.groupby(["arm", "cycle"])))
        classes = [_size_class(members, jobs, spec) for members in _size_groups(group)]
        _cap_files(classes, spec.max_files)
        share = _cached_share(group) if op == "read" else None
        out.append({"step": step, "op": op, "classes": classes,
                    "files": sum(c["files"] for c in classes), "files_per_job": sum(c["files_per_job"] for c in classes),
                    "bytes": sum(c["files"] * c["file_bytes"] for c in classes),
                    "cached_fraction": share, "cold": any(c["cold"] for c in classes)})
    return out


def _size_groups(step_files) -> list:
    """A step's files in groups of neighbouring size classes of one page-cache state: a class with at
    least ``MIN_CLASS_SHARE`` of the step's bytes and ``MIN_CLASS_BYTES`` is its own group; smaller
    ones are gathered, in size order, until the gathered files reach that. Merging keeps the files'
    count and bytes (so the per-file and per-byte costs), loses only their size spread, which matters
    for the large classes that stay apart."""
    import pandas as pd

    least = max(MIN_CLASS_SHARE * step_files["bytes"].sum(), MIN_CLASS_BYTES)
    groups = []
    for _, same_state in step_files.groupby("cold", sort=True):
        pending: list = []
        for _, members in same_state.groupby("size_class", sort=True):
            if members["bytes"].sum() >= least:
                groups += [pd.concat(pending)] if pending else []
                groups.append(members)
                pending = []
                continue
            pending.append(members)
            if sum(m["bytes"].sum() for m in pending) >= least:
                groups.append(pd.concat(pending))
                pending = []
        groups += [pd.concat(pending)] if pending else []
    return groups


def _size_class(members, jobs: int, spec: ReplaySpec) -> dict:
    files = max(1, int(round(len(members) / jobs)))
    file_bytes = int(members["bytes"].sum() // len(members))
    transfer = spec.transfer_size_bytes
    if not transfer:
        calls = int(members["transfers"].sum()) if "transfers" in members else 0
        transfer = int(members["bytes"].sum() // calls) if calls > 0 else MiB
    word = ior.WORD_BYTES
    transfer = max(word, min(transfer, file_bytes) // word * word)
    out = {"files": files, "files_per_job": files, "file_bytes": max(transfer, file_bytes - file_bytes % transfer),
           "transfer_bytes": transfer, "cold": bool(members["cold"].iloc[0])}
    if "file" in members and jobs == 1:  # one job's records: the paired replay reads its very files (own_read_files)
        out["file_names"] = list(dict.fromkeys(members["file"]))
    return out


def own_read_files(plan: dict, root: Path) -> list[dict] | None:
    """A read plan's classes over the step's own files under ``root`` (each class's ``paths``), or None where a class
    names no files or one is gone (the replay then lays files out instead). Reading the step's own files times the
    same pages the step read: files laid out anew sit elsewhere in memory, and on a memory tier read at 0.7 of the
    speed of staged ones (docs/performance.md). fio reads each file whole in calls of the class's transfer (its
    last call what is left), the transfer no larger than the class's largest file."""
    classes = []
    for group in plan["classes"]:
        names = group.get("file_names", [])[:group["files"]]
        paths = [root / name for name in names]
        if not paths or not all(path.is_file() for path in paths):
            return None
        sizes = [path.stat().st_size for path in paths]
        transfer = min(group["transfer_bytes"], max(sizes)) // ior.WORD_BYTES * ior.WORD_BYTES
        if transfer <= 0:
            return None
        classes.append({**group, "paths": paths, "transfer_bytes": transfer, "file_bytes": sum(sizes) // len(sizes),
                        "files": len(paths)})
    return classes


def _cap_files(classes: list[dict], max_files: int) -> None:
    """At most ``max_files`` files in all, each class keeping at least one, in proportion."""
    total = sum(c["files"] for c in classes)
    if total > max_files:
        for c in classes:
            c["files"] = max(1, c["files"] * max_files // total)


def _cached_share(reads) -> float | None:
    """Share of these reads' bytes that the page cache held as they began; None if not measured."""
    if "cached_fraction" not in reads:
        return None
    known = reads[reads["cached_fraction"].notna()]
    total = known["bytes"].sum()
    return float((known["cached_fraction"] * known["bytes"]).sum() / total) if total > 0 else None


def replay_totals(parsed: list[dict], plan: dict) -> list[dict]:
    """One row per operation from a replay's per-class rows (fio jobs, IOR runs): bytes over seconds."""
    out = []
    for op in ("write", "read"):
        rows = [r for r in parsed if r["operation"] == op and r["aggregate"] in ("rep", "job")]
        if not rows:
            continue
        nbytes = sum(r["bytes"] or 0 for r in rows)
        seconds = sum(r["seconds"] or 0 for r in rows)
        calls = sum((r["bytes"] or 0) / r["transfer_size_bytes"] for r in rows if r["transfer_size_bytes"])
        latency = [r["latency_s"] for r in rows if r["latency_s"] is not None]
        out.append({**rows[0], "aggregate": "rep", "segments": plan["files"],
                    "block_size_bytes": plan["bytes"] // plan["files"],
                    "transfer_size_bytes": int(nbytes / calls) if calls else rows[0]["transfer_size_bytes"],
                    "bw_MiB_per_s": nbytes / MiB / seconds if seconds else None,
                    "ops_per_s": calls / seconds if seconds else None,
                    "latency_s": sum(latency) / len(latency) if latency else None, "seconds": seconds,
                    "bytes": nbytes, "fsync": True})
    return out


def room(path: Path, memory: bool) -> int:
    """Bytes a replay may still write on the tier: its free space, and for a memory tier no more than RAM has."""
    free = free_bytes(path)
    if memory:
        free = min(free, psutil.virtual_memory().available)
    return free


def make_room(kept: list[Path], nbytes: int, path: Path, memory: bool) -> None:
    """Remove replayed files kept so far (folders, oldest first) until ``nbytes`` more fit with a margin.

    Replays keep what they wrote, so that later writes land in new pages as a step's do; where the
    tier (or RAM, for a memory tier) has no room for that, the oldest give way.
    """
    while kept and room(path, memory) < 1.1 * nbytes + ROOM_MARGIN_BYTES:
        shutil.rmtree(kept.pop(0), ignore_errors=True)
