"""Does the archive keep up? Per arm and cycle, from step_summary's ``arch`` rows: how long the cycle's archive
job took, what it wrote, and whether it finished before the next cycle's archive job began (a backlog grows
otherwise, as when slow transfers led NOAA to take archiving off the cycle's critical path, global-workflow #1051).
"""

from __future__ import annotations

import math

import pandas as pd

from ..units import MiB

ARCHIVE_STEP = "arch"
KEEP_UP_COLUMNS = ["study", "arm", "cycle", "archive_s", "bytes_archived", "archive_MiB_per_s", "t_start", "t_end",
                   "next_archive_start", "finished_before_next"]


def keep_up_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per arm x cycle with an archive job (KEEP_UP_COLUMNS); empty when the study archived nothing.

    ``archive_s``: the archive job's wall seconds; ``finished_before_next``: it ended before the same arm's next
    cycle's archive job began (NA for the last cycle)."""
    jobs = summary[summary["step"] == ARCHIVE_STEP].astype({"cycle": str}) if "step" in summary else summary.iloc[0:0]
    if jobs.empty:
        return pd.DataFrame(columns=KEEP_UP_COLUMNS)
    jobs = jobs.sort_values(["arm", "cycle"]).copy()
    jobs["archive_s"] = jobs["wall_s"]
    jobs["t_end"] = jobs["t_start"] + jobs["wall_s"]
    column = "bytes_archived" if "bytes_archived" in jobs else None
    jobs["bytes_archived"] = jobs[column].fillna(0).astype("int64") if column else 0
    jobs["archive_MiB_per_s"] = (jobs["bytes_archived"] / MiB / jobs["archive_s"]).where(jobs["archive_s"] > 0)
    jobs["next_archive_start"] = jobs.groupby("arm")["t_start"].shift(-1)
    jobs["finished_before_next"] = (jobs["t_end"] <= jobs["next_archive_start"]).astype("boolean")
    jobs.loc[jobs["next_archive_start"].isna(), "finished_before_next"] = pd.NA
    return jobs.reindex(columns=KEEP_UP_COLUMNS).reset_index(drop=True)


def beside_archive(summary: pd.DataFrame, step: str = "fcst") -> dict:
    """How the ``step`` jobs that ran while an archive job ran (any arm's: they share the machine) compare with
    those that did not: counts and mean wall and I/O seconds of each group, from the study's own records."""
    if not {"t_start", "wall_s"} <= set(summary):
        return {}
    jobs = summary.astype({"cycle": str})
    arch = jobs[jobs["step"] == ARCHIVE_STEP]
    if arch.empty:
        return {}
    starts, ends = arch["t_start"].to_numpy(), (arch["t_start"] + arch["wall_s"]).to_numpy()
    others = jobs[jobs["step"] != ARCHIVE_STEP]
    overlap = [bool(((starts < t + wall) & (ends > t)).any()) for t, wall in zip(others["t_start"], others["wall_s"])]
    others = others.assign(beside=overlap)
    mine = others[others["step"] == step]
    out = {"step": step, "with_archive_jobs": int(mine["beside"].sum()), "without_archive_jobs": int((~mine["beside"]).sum()),
           "beside_steps": others[others["beside"]]["step"].value_counts().sort_index().to_dict()}
    for name, group in (("with", mine[mine["beside"]]), ("without", mine[~mine["beside"]])):
        out[f"{name}_archive_wall_s"] = float(group["wall_s"].mean()) if not group.empty else math.nan
        out[f"{name}_archive_io_s"] = float(group["io_s"].mean()) if "io_s" in group and not group.empty else math.nan
    return out


def beside_sentence(beside: dict) -> str:
    """The summary's line on what an archive running beside the next cycle cost the jobs it ran beside."""
    if not beside:
        return ""
    step = beside["step"]
    if not beside["with_archive_jobs"]:
        others = ", ".join(f"{name} {count}" for name, count in beside.get("beside_steps", {}).items())
        return (f"No {step} job ran while an archive job ran, so this study cannot say what an archive costs the {step} "
                "beside it" + (f" (jobs that did run beside one: {others})" if others else
                               " (no job ran beside one: the default profile's io_lock=1 runs one job at a time)")
                + ".")
    if not beside["without_archive_jobs"]:
        return f"Every {step} job ran while an archive job ran: there is no {step} without one to compare with."
    return (f"{step} beside an archive job: {beside['with_archive_jobs']} jobs, {beside['with_archive_wall_s']:.2f} s wall "
            f"and {beside['with_archive_io_s']:.2f} s of I/O on average, against {beside['without_archive_jobs']} without "
            f"one, {beside['without_archive_wall_s']:.2f} s and {beside['without_archive_io_s']:.2f} s.")


def arm_keep_up(table: pd.DataFrame, arm: str) -> dict:
    """The summary's columns of one arm: each cycle's archive seconds, bytes per cycle, MiB/s, and whether it kept up."""
    mine = table[table["arm"] == arm]
    if mine.empty:
        return {}
    checked = mine["finished_before_next"].dropna()
    late = mine.loc[mine["finished_before_next"].fillna(True).eq(False), "cycle"].tolist()
    seconds = mine["archive_s"].sum()
    return {
        "archive_cycle_s": " ".join(f"{s:.2f}" for s in mine["archive_s"]),
        "archive_bytes_per_cycle": float(mine["bytes_archived"].mean()),
        "archive_MiB_per_s": float(mine["bytes_archived"].sum() / MiB / seconds) if seconds > 0 else math.nan,
        "archive_keeps_up": ("no archive job followed another" if checked.empty else
                             f"yes: each of {len(checked)} finished before the next cycle's began" if not late else
                             f"no: {', '.join(late)} still ran when the next cycle's archive began (a backlog grows)"),
    }


def keep_up_markdown(table: pd.DataFrame, beside: str = "") -> list[str]:
    """The summary's lines on the archive: per arm, each cycle's archive seconds and whether it kept up, then
    ``beside`` (beside_sentence) when given or in the table's ``archive_beside`` column."""
    rows = [row for row in table.itertuples() if isinstance(getattr(row, "archive_keeps_up", None), str)]
    if not rows:
        return []
    if not beside and "archive_beside" in table:
        said = table["archive_beside"].dropna()
        beside = str(said.iloc[0]) if not said.empty else ""
    lines = ["", "Does the archive keep up? Per arm: each cycle's arch job (its tarballs written to the archive tier, "
             "indexed and read back), in seconds, the bytes it archived per cycle, and whether each finished before "
             "the next cycle's archive began.", "",
             "| arm | archive per cycle [s] | archived per cycle [MiB] | MiB/s | kept up |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.arm} | {row.archive_cycle_s} | {row.archive_bytes_per_cycle / MiB:.1f} | "
                     f"{row.archive_MiB_per_s:.1f} | {row.archive_keeps_up} |")
    return lines + (["", beside] if beside else [])
