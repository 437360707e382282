"""Running one benchmark point: its folder on the tier (resolved where the job runs), and its rows
with the point's context, the cache flag, and the max/min/mean over repetitions.
"""

from __future__ import annotations

import logging
import shutil
import socket
from pathlib import Path

from ..storage.tiers import Tier, apply_striping, filesystem_type, free_bytes
from .common import COLUMNS, BenchmarkError
from .rows import MiB
from .specs import PointSettings

log = logging.getLogger("cycleio")
READ_OPERATIONS = ("read", "file_read")  # reads that the page cache may serve


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


class TierSite:
    """A tier resolved where the job runs: its benchmark folder and probed filesystem type."""

    def __init__(self, tier: Tier, study: str, label: str):
        self.tier = tier
        self.base = tier.open(study)
        self.fs_type = filesystem_type(self.base)
        self.root = self.base / study / "bench" / label
        self.root.parent.mkdir(parents=True, exist_ok=True)
        done = apply_striping(tier, self.root.parent)  # Lustre striping for new files
        if done:
            log.info("tier %s: %s", tier.name, done)

    def require_space(self, nbytes: int, what: str) -> None:
        free = free_bytes(self.base)
        if nbytes > 0.9 * free:
            raise BenchmarkError(
                f"tier '{self.tier.name}' ({self.base}): {what} needs {nbytes / MiB:.1f} MiB but only "
                f"{free / MiB:.1f} MiB are free; lower the sizes in benchmarks or free space")

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def context(settings: PointSettings, site: TierSite, pattern: str | None = None) -> dict:
    return {"study": settings.study, "benchmark": settings.benchmark, "pattern": pattern or settings.pattern,
            "tier": settings.tier.name, "tier_kind": settings.tier.kind, "fs_type": site.fs_type,
            "host": socket.gethostname()}


def finish(rows: list[dict], context: dict, t_start: float, overrides: dict | None = None) -> list[dict]:
    out = []
    for row in rows:
        row = {**row, **(overrides or {})}
        full = {**context, **row}
        full["cache_risk"] = (row["operation"] in READ_OPERATIONS and not row.get("direct_io")
                              and not row.get("cold_cache"))
        full["t_start"] = round(t_start, 3)
        out.append({key: full.get(key) for key in COLUMNS})
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Max, min and mean over repetitions of the rep rows (as IOR's summary) per job x operation."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["aggregate"] == "rep":
            groups.setdefault((row["pattern"], row["api"], row["job"], row["operation"], row["tasks"]), []).append(row)
    out = []
    for reps in groups.values():
        def values(key):
            return [r[key] for r in reps if r[key] is not None]

        for agg, pick in (("max", max), ("min", min), ("mean", lambda v: sum(v) / len(v))):
            summary = {**reps[0], "aggregate": agg, "repetition": None, "source": reps[0]["source"]}
            for key in ("bw_MiB_per_s", "ops_per_s"):
                vals = values(key)
                summary[key] = pick(vals) if vals else None
            for key in ("latency_s", "seconds", "bytes"):
                vals = values(key)
                mean = sum(vals) / len(vals) if vals else None
                summary[key] = (int(round(mean)) if key == "bytes" and mean is not None else mean) if agg == "mean" else None
            starts = [r["t_start"] for r in reps if r.get("t_start") is not None]
            summary["t_start"] = min(starts) if starts else None
            out.append(summary)
    return out


def log_rows(label: str, rows: list[dict]) -> None:
    for row in rows:
        if row["aggregate"] == "rep":
            rate = (f"{row['bw_MiB_per_s']:.1f} MiB/s" if row["bw_MiB_per_s"] is not None
                    else f"{row['ops_per_s']:.0f} ops/s" if row["ops_per_s"] is not None else "-")
            log.info("%s rep %s: %s %s", label, row["repetition"], row["operation"], rate)
