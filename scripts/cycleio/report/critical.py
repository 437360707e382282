"""The critical path of a cycle: the chain of jobs that decided when the cycle's forecast products were ready.

From step_summary's rows (each job's start and wall time) and the study's DAG (workflow.dependencies): start at the
cycle's last step job to finish (its post), go back to the dependency that finished last before it, and so on
within the cycle. What the chain holds (its I/O, staging and archive seconds) decides the cycle; the jobs off it
(the archive jobs, arch and the ensemble's earcNN, which run beside the next cycle; ensemble forecasts that
finished earlier) did not.
"""

from __future__ import annotations

import pandas as pd

from ..workflow.dependencies import ArmJobs, CycledJobs, Job
from .archive import archive_rows

OFF_CYCLE = ("cleanup",)
CRITICAL_COLUMNS = ["study", "arm", "cycle", "order", "step", "t_start", "t_end", "wall_s", "io_s", "staging_s",
                    "archive_s", "waited_s"]


def _dag(jobs: pd.DataFrame) -> CycledJobs:
    arms = {}
    for arm, mine in jobs.groupby("arm"):
        steps = set(mine["step"])
        arms[arm] = ArmJobs("cycle" if "cycle" in steps else "step",
                            tuple(sorted(s for s in steps if s.startswith("efcs"))))
    cycles = tuple(sorted(jobs["cycle"].unique()))
    return CycledJobs("study", cycles, arms, None, bool(archive_rows(jobs).any()))


def critical_path(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per job on each arm's and cycle's critical path (CRITICAL_COLUMNS), ``order`` 1 the first;
    ``waited_s``: how long the job waited after the dependency before it finished (a free core, the io_lock)."""
    if not {"t_start", "wall_s"} <= set(summary):  # a summary without the jobs' times has no path to tell
        return pd.DataFrame(columns=CRITICAL_COLUMNS)
    jobs = summary[~summary["step"].isin(OFF_CYCLE)].astype({"cycle": str}).copy()
    if jobs.empty:
        return pd.DataFrame(columns=CRITICAL_COLUMNS)
    jobs["t_end"] = jobs["t_start"] + jobs["wall_s"]
    for column in ("io_s", "staging_s", "archive_s"):
        if column not in jobs:
            jobs[column] = 0.0
    dag = _dag(jobs)
    by_job = {(row.arm, row.cycle, row.step): row for row in jobs.itertuples()}
    rows = []
    for (arm, cycle), mine in jobs.groupby(["arm", "cycle"], sort=True):
        steps = mine[~archive_rows(mine)]
        if steps.empty:
            continue
        current = Job(arm, cycle, steps.loc[steps["t_end"].idxmax(), "step"])
        chain = [current]
        while True:
            try:
                needs = dag.dependencies(arm, cycle, current.name)
            except ValueError:
                break
            done = [job for job in needs if job.cycle == cycle and (job.arm, job.cycle, job.name) in by_job]
            if not done:
                break
            current = max(done, key=lambda job: by_job[(job.arm, job.cycle, job.name)].t_end)
            chain.append(current)
        chain.reverse()
        previous_end = None
        for order, job in enumerate(chain, start=1):
            row = by_job[(job.arm, job.cycle, job.name)]
            rows.append({"study": row.study, "arm": arm, "cycle": cycle, "order": order, "step": job.name,
                         "t_start": row.t_start, "t_end": row.t_end, "wall_s": row.wall_s, "io_s": row.io_s,
                         "staging_s": row.staging_s, "archive_s": row.archive_s,
                         "waited_s": 0.0 if previous_end is None else max(0.0, row.t_start - previous_end)})
            previous_end = row.t_end
    return pd.DataFrame(rows, columns=CRITICAL_COLUMNS)


def arm_critical_sentence(summary: pd.DataFrame, path: pd.DataFrame, arm: str) -> str:
    """What lies on the critical path of the arm's last full cycle, with its seconds, and what does not."""
    mine = path[path["arm"] == arm]
    if mine.empty:
        return ""
    cycle = mine["cycle"].max()
    chain = mine[mine["cycle"] == cycle].sort_values("order")
    steps = " -> ".join(f"{row.step} {row.wall_s:.2f} s" for row in chain.itertuples())
    jobs = summary[(summary["arm"] == arm) & (summary["cycle"].astype(str) == cycle)
                   & ~summary["step"].isin([*OFF_CYCLE, *chain["step"]])]
    off = ", ".join(f"{row.step} {row.wall_s:.2f} s" for row in jobs.sort_values("t_start").itertuples())
    waited = chain["waited_s"].sum()
    return (f"critical path of cycle {cycle}: {steps} (I/O {chain['io_s'].sum():.2f} s, staging "
            f"{chain['staging_s'].sum():.2f} s, archive {chain['archive_s'].fillna(0).sum():.2f} s on it"
            + (f", {waited:.2f} s waiting between its jobs" if waited > 0.005 else "") + ")"
            + (f"; off it: {off}" if off else ""))
