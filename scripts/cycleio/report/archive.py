"""Does the archive keep up? Per arm and cycle, from step_summary's archive rows (``arch``, ``earcNN``): how long
the cycle's archive jobs took, what they wrote, and whether each finished before the same job of the next cycle
began (a backlog grows otherwise, as when slow transfers led NOAA to take archiving off the cycle's critical path,
global-workflow #1051).
"""

from __future__ import annotations

import math

import pandas as pd

from ..config.calendar import is_archive_job
from ..units import MiB

KEEP_UP_COLUMNS = ["study", "arm", "cycle", "archive_s", "bytes_archived", "archive_MiB_per_s", "t_start", "t_end",
                   "next_archive_start", "finished_before_next", "archive_jobs", "late_jobs"]


def archive_rows(summary: pd.DataFrame) -> pd.Series:
    """Which of step_summary's rows are archive jobs (``arch``, and ``earcNN`` with an ensemble)."""
    return summary["step"].map(is_archive_job).astype(bool)


def keep_up_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per arm x cycle with archive jobs (KEEP_UP_COLUMNS); empty when the study archived nothing.

    ``archive_s``: the wall seconds of the cycle's archive jobs (``arch`` and its ``earcNN``, ``archive_jobs`` of
    them), summed; ``t_start``/``t_end``: the first one's start, the last one's end; ``finished_before_next``: each
    of them ended before the same job of the arm's next cycle began (NA for the last cycle); ``late_jobs``: those
    that did not."""
    rows = summary[archive_rows(summary)].astype({"cycle": str}) if "step" in summary else summary.iloc[0:0]
    if rows.empty:
        return pd.DataFrame(columns=KEEP_UP_COLUMNS)
    rows = rows.sort_values(["arm", "step", "cycle"])
    if "study" not in rows:
        rows = rows.assign(study="")
    rows = rows.assign(t_end=rows["t_start"] + rows["wall_s"],
                       bytes_archived=rows["bytes_archived"].fillna(0) if "bytes_archived" in rows else 0,
                       next_same=rows.groupby(["arm", "step"])["t_start"].shift(-1))
    rows["checked"] = rows["next_same"].notna()
    rows["late_step"] = rows["step"].where(rows["checked"] & (rows["t_end"] > rows["next_same"]), "")
    jobs = rows.groupby(["arm", "cycle"], as_index=False, sort=True).agg(
        study=("study", "first"), archive_s=("wall_s", "sum"), bytes_archived=("bytes_archived", "sum"),
        t_start=("t_start", "min"), t_end=("t_end", "max"), archive_jobs=("step", "size"),
        checked=("checked", "sum"), late_jobs=("late_step", lambda steps: " ".join(step for step in steps if step)))
    jobs["bytes_archived"] = jobs["bytes_archived"].astype("int64")
    jobs["archive_MiB_per_s"] = (jobs["bytes_archived"] / MiB / jobs["archive_s"]).where(jobs["archive_s"] > 0)
    jobs["next_archive_start"] = jobs.groupby("arm")["t_start"].shift(-1)
    jobs["finished_before_next"] = jobs["late_jobs"].eq("").astype("boolean")
    jobs.loc[jobs["checked"] == 0, "finished_before_next"] = pd.NA
    return jobs.reindex(columns=KEEP_UP_COLUMNS).reset_index(drop=True)


def _overlap_s(t: float, wall: float, starts, ends) -> float:
    """Seconds of the job [t, t + wall) during which an archive job ran (their union, clipped to the job)."""
    spans = sorted((max(t, a), min(t + wall, b)) for a, b in zip(starts, ends) if a < t + wall and b > t)
    covered, reach = 0.0, t
    for a, b in spans:
        a = max(a, reach)
        if b > a:
            covered, reach = covered + b - a, b
    return covered


def _group(jobs: pd.DataFrame, name: str) -> dict:
    """Count, mean, standard deviation, least and most of one group's wall seconds, and its mean I/O seconds."""
    wall = jobs["wall_s"]
    io = jobs["io_s"] if "io_s" in jobs else pd.Series(dtype=float)
    return {f"{name}_archive_jobs": len(jobs),
            f"{name}_archive_wall_s": float(wall.mean()) if len(wall) else math.nan,
            f"{name}_archive_wall_sd_s": float(wall.std(ddof=1)) if len(wall) > 1 else math.nan,
            f"{name}_archive_wall_min_s": float(wall.min()) if len(wall) else math.nan,
            f"{name}_archive_wall_max_s": float(wall.max()) if len(wall) else math.nan,
            f"{name}_archive_io_s": float(io.mean()) if len(io) else math.nan}


def beside_archive(summary: pd.DataFrame, step: str = "fcst") -> dict:
    """How the next cycle's ``step`` jobs (of every cycle but an arm's first) that ran while an archive job ran (any
    arm's: they share the machine) compare with those that did not, from the study's own records: per group the count, mean, standard deviation and range of
    the wall seconds and the mean I/O seconds; for those beside one, the mean seconds an archive ran during the job
    (``overlap_s``); then the difference of the means (with minus without), its standard error (Welch: the jobs are
    independent) and how many standard errors it is (``diff_sigmas``)."""
    if not {"t_start", "wall_s"} <= set(summary):
        return {}
    jobs = summary.astype({"cycle": str})
    archives = archive_rows(jobs)
    arch = jobs[archives]
    if arch.empty:
        return {}
    starts, ends = arch["t_start"].to_numpy(), (arch["t_start"] + arch["wall_s"]).to_numpy()
    others = jobs[~archives]
    overlap = [_overlap_s(t, wall, starts, ends) for t, wall in zip(others["t_start"], others["wall_s"])]
    others = others.assign(overlap_s=overlap, beside=[seconds > 0 for seconds in overlap])
    # the next cycle's jobs: an arm's first cycle follows no archive, and its forecast (the half cycle's) differs
    later = others["cycle"] > others.groupby("arm")["cycle"].transform("min")
    mine = others[(others["step"] == step) & later]
    with_, without = mine[mine["beside"]], mine[~mine["beside"]]
    out = {"step": step, **_group(with_, "with"), **_group(without, "without"),
           "beside_steps": others[others["beside"]]["step"].value_counts().sort_index().to_dict(),
           "overlap_s": float(with_["overlap_s"].mean()) if len(with_) else math.nan}
    diff = out["with_archive_wall_s"] - out["without_archive_wall_s"]
    variance = sum(group["wall_s"].var(ddof=1) / len(group) for group in (with_, without) if len(group) > 1)
    se = math.sqrt(variance) if len(with_) > 1 and len(without) > 1 else math.nan
    out.update(diff_s=diff, diff_se_s=se, diff_sigmas=abs(diff) / se if se and se > 0 else math.nan)
    return out


def _jobs(count: int) -> str:
    return f"{count} job" + ("" if count == 1 else "s")


def _spread(beside: dict, name: str) -> str:
    n = beside[f"{name}_archive_jobs"]
    if n < 2:
        return ""
    return (f" (sd {beside[f'{name}_archive_wall_sd_s']:.2f}, {beside[f'{name}_archive_wall_min_s']:.2f} to "
            f"{beside[f'{name}_archive_wall_max_s']:.2f})")


def beside_sentence(beside: dict, noise_sigmas: float = 2.0) -> str:
    """The summary's line on what an archive running beside the next cycle cost the jobs it ran beside: the
    ``step`` jobs' mean wall seconds (sd and range) with an archive running and without, and whether the difference
    is more than ``noise_sigmas`` standard errors (else noise)."""
    if not beside:
        return ""
    step = beside["step"]
    if not beside["with_archive_jobs"]:
        others = ", ".join(f"{name} {count}" for name, count in beside.get("beside_steps", {}).items())
        return (f"No {step} job ran while an archive job ran, so this study cannot say what an archive costs the {step} "
                "beside it" + (f" (jobs that did run beside one: {others})" if others else
                               " (no job ran beside one: the default profile's io_lock=1 runs one job at a time)")
                + ".")
    others = ", ".join(f"{name} {count}" for name, count in beside.get("beside_steps", {}).items())
    if not beside["without_archive_jobs"]:
        return (f"Every {step} job ran while an archive job ran ({_jobs(beside['with_archive_jobs'])}, "
                f"{beside['with_archive_wall_s']:.2f} s wall{_spread(beside, 'with')} on average, an archive running "
                f"for {beside['overlap_s']:.2f} s of each): there is no {step} without one here to compare with; a run "
                f"of the same study with the archive between the jobs is (cycleio compare, docs/archive.md)."
                + (f" Jobs that ran beside one: {others}." if others else ""))
    diff, se, base = beside["diff_s"], beside["diff_se_s"], beside["without_archive_wall_s"]
    change = f"{diff:+.2f} s" + (f" ({100 * diff / base:+.0f} %)" if base > 0 else "")
    if math.isnan(se):
        judged = "too few jobs for a standard error"
    else:
        judged = (f"{beside['diff_sigmas']:.1f} standard errors ({se:.2f} s): "
                  + ("more than noise" if beside["diff_sigmas"] > noise_sigmas else "within noise"))
    return (f"{step} with an archive job running beside it: {_jobs(beside['with_archive_jobs'])}, "
            f"{beside['with_archive_wall_s']:.2f} s wall{_spread(beside, 'with')} and {beside['with_archive_io_s']:.2f} s "
            f"of I/O on average, an archive running for {beside['overlap_s']:.2f} s of each; without one: "
            f"{_jobs(beside['without_archive_jobs'])}, {beside['without_archive_wall_s']:.2f} s{_spread(beside, 'without')} "
            f"and {beside['without_archive_io_s']:.2f} s. Beside an archive: {change} wall, {judged}."
            + (f" Jobs that ran beside one: {others}." if others else ""))


def arm_keep_up(table: pd.DataFrame, arm: str) -> dict:
    """The summary's columns of one arm: each cycle's archive seconds, bytes per cycle, MiB/s, and whether it kept up."""
    mine = table[table["arm"] == arm]
    if mine.empty:
        return {}
    checked = mine["finished_before_next"].dropna()
    late = [row.cycle if getattr(row, "late_jobs", "arch") in ("arch", "") else f"{row.cycle} ({row.late_jobs})"
            for row in mine[mine["finished_before_next"].fillna(True).eq(False)].itertuples()]
    seconds = mine["archive_s"].sum()
    return {
        "archive_cycle_s": " ".join(f"{s:.2f}" for s in mine["archive_s"]),
        "archive_bytes_per_cycle": float(mine["bytes_archived"].mean()),
        "archive_MiB_per_s": float(mine["bytes_archived"].sum() / MiB / seconds) if seconds > 0 else math.nan,
        "archive_keeps_up": ("no archive job followed another" if checked.empty else
                             f"yes: each of {len(checked)} finished before the next cycle's began" if not late else
                             f"no: {', '.join(late)} had not finished when the next cycle's same archive job began "
                             "(a backlog grows)"),
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
    lines = ["", "Does the archive keep up? Per arm: each cycle's archive jobs (arch, and an earc job per group of "
             "ensemble members with an ensemble: their tarballs written to the archive tier, indexed and read back), "
             "in seconds, the bytes it archived per cycle, and whether each job finished before "
             "the next cycle's same job began.", "",
             pd.DataFrame([[row.arm, row.archive_cycle_s, f"{row.archive_bytes_per_cycle / MiB:.1f}",
                            f"{row.archive_MiB_per_s:.1f}", row.archive_keeps_up] for row in rows],
                          columns=["arm", "archive per cycle [s]", "archived per cycle [MiB]", "MiB/s", "kept up"])
             .to_markdown(index=False, tablefmt="github", disable_numparse=True)]
    return lines + (["", beside] if beside else [])
