"""Running one benchmark point: its folder on the tier (resolved where the job runs), and its rows
with the point's context, the cache flag, and the max/min/mean over repetitions.
"""

from __future__ import annotations

import logging
import shutil
import socket
from pathlib import Path

from ..storage.pagecache import cache_risk, memory_backed
from ..config.tierspec import Tier
from ..storage.tiers import TierSite
from .common import COLUMNS, host_cores
from .specs import PointSettings

log = logging.getLogger("cycleio")


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def benchmark_folder(tier: Tier, study: str, name: str) -> tuple[TierSite, Path]:
    """The tier where the point runs and a folder of the study's benchmark folder for it (emptied by
    :func:`fresh` before each run, removed after)."""
    site = TierSite(tier, study, "bench")
    return site, site.root / name


def context(settings: PointSettings, site: TierSite, pattern: str | None = None) -> dict:
    return {"study": settings.study, "benchmark": settings.benchmark, "pattern": pattern or settings.pattern,
            "tier": settings.tier.name, "tier_kind": settings.tier.kind, "fs_type": site.fs_type,
            "host": socket.gethostname(), "host_cores": host_cores()}


def finish(rows: list[dict], context: dict, t_start: float, overrides: dict | None = None) -> list[dict]:
    out = []
    for row in rows:
        row = {**row, **(overrides or {})}
        full = {**context, **row}
        full["cache_risk"] = cache_risk(row["operation"], memory=memory_backed(full["tier_kind"], full["fs_type"]),
                                        direct_io=bool(row.get("direct_io")), dropped=bool(row.get("cold_cache")))
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
