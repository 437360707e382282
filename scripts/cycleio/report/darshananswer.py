"""The replay jobs' answer (config darshan.jobs, docs/darshan.md): per replay job, the logged job's I/O time beside
the replay's on each arm's tier, at the job's scale, and its fidelity (per direction the logged bytes and calls, the
bytes expected at the scale, the replayed bytes and calls), from the replay jobs' manifests
(``tables/replay_jobs.csv``), and the sentence summary.md gives each job, as ``cycleio darshan replay`` gives it a
standalone replay."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..benchmarks.threshold import TimedThreshold
from ..units import format_seconds

REPLAY_COLUMNS = ["study", "arm", "tier", "fs_type", "cycle", "step", "log", "log_ranks", "ranks", "scale", "timing",
                  "layer", "logged_io_s", "logged_read_s", "logged_write_s", "logged_meta_s", "replay_io_s",
                  "replay_read_s", "replay_write_s", "replay_meta_s", "replay_launch_wall_s", "paired",
                  *(f"{kind}_{d}_{unit}" for d in ("read", "write")
                    for kind, unit in (("logged", "bytes"), ("logged", "ops"), ("expected", "bytes"),
                                       ("replayed", "bytes"), ("replayed", "ops")))]


def replay_table(manifests: list[Path]) -> pd.DataFrame:
    """One row per replay job (manifests of other jobs are skipped): the logged job's slowest rank and the replay's
    (read, write and metadata seconds, and their sum), the request, the tier, and whether fio was paired with it."""
    rows = []
    for path in manifests:
        manifest = json.loads(Path(path).read_text())
        darshan = manifest.get("provenance", {}).get("darshan")
        if not darshan or "replay" not in darshan:
            continue
        logged, replay = darshan["logged_slowest_rank"], darshan["replay"]
        tiers = manifest["provenance"].get("tiers", {})
        rows.append({
            "study": manifest["study"], "arm": manifest["arm"], "tier": tiers.get("scratch", {}).get("tier", ""),
            "fs_type": darshan.get("fs_type", ""), "cycle": str(manifest["cycle"]), "step": manifest["step"],
            "log": Path(darshan["log"]).name, "log_ranks": darshan["log_ranks"], "ranks": darshan["ranks"],
            "scale": darshan["scale"], "timing": darshan["timing"], "layer": darshan["layer"],
            **{f"logged_{key}": logged[key] for key in ("io_s", "read_s", "write_s", "meta_s")},
            **{f"replay_{key}": replay[key] for key in ("io_s", "read_s", "write_s", "meta_s")},
            "replay_launch_wall_s": replay.get("launch_wall_s"), "paired": bool(darshan.get("paired")),
            **{f"{key.split('_')[0]}_{d}_{key.split('_')[1]}": value
               for d, counts in darshan.get("fidelity", {}).items() for key, value in counts.items()},
        })
    return pd.DataFrame(rows, columns=REPLAY_COLUMNS)


def replay_markdown(table: pd.DataFrame, timing: TimedThreshold = TimedThreshold()) -> list[str]:
    """summary.md's lines on the replay jobs (none without replay jobs): per job, the logged I/O time and the
    replay's on each arm (median over cycles), and where its efficiency is, if anywhere."""
    if table.empty:
        return []
    lines = ["", "Replay jobs from Darshan logs (docs/darshan.md): the logged job's I/O time (its slowest rank's read, "
             "write and metadata seconds) beside the replay's slowest rank, median over cycles.", ""]
    for step, rows in table.groupby("step", sort=True):
        first = rows.iloc[0]
        parts = []
        for arm, mine in rows.groupby("arm", sort=True):
            median = mine[["replay_io_s", "replay_read_s", "replay_write_s", "replay_meta_s"]].median()
            said = {key: format_seconds(value) for key, value in median.items()}
            where = f"on arm {arm} (tier {mine['tier'].iloc[0]}, {mine['fs_type'].iloc[0]})"
            cycles = f"{len(mine)} cycle{'s' if len(mine) != 1 else ''}"
            if median["replay_io_s"] < timing.min_seconds:  # the tier's speed cannot be read from it
                parts.append(f"{where} too short to time ({said['replay_io_s']} of I/O, under "
                             f"benchmarks.replay.min_seconds {timing.min_seconds:g} s: a larger scale times it; {cycles})")
                continue
            parts.append(f"{where} {said['replay_io_s']} (read {said['replay_read_s']}, write "
                         f"{said['replay_write_s']}, metadata {said['replay_meta_s']}; {cycles})")
        paired = rows["paired"].astype(bool)
        efficiency = (f"its efficiency (fio paired with it) is in tables/efficiency.csv for {int(paired.sum())} of "
                      f"its {len(rows)} jobs" if paired.any() else
                      "it has no efficiency: no paired replay ran with it (benchmarks or benchmarks.replay off, or "
                      "not one of benchmarks.replay.cycles)")
        logged_ranks = f"{first['log_ranks']} rank{'s' if first['log_ranks'] != 1 else ''}"
        logged = {key: format_seconds(first[f"logged_{key}_s"]) for key in ("io", "read", "write", "meta")}
        lines.append(f"- {step} ({first['log']}, {logged_ranks}): its I/O took {logged['io']} where it was logged "
                     f"(read {logged['read']}, write {logged['write']}, metadata {logged['meta']}); at scale "
                     f"{first['scale']:g} with {first['ranks']} "
                     f"rank{'s' if first['ranks'] != 1 else ''} (timing {first['timing']}), " + "; ".join(parts)
                     + f"; {efficiency}.")
    return lines
