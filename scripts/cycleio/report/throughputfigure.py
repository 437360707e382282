"""Figures read only the tidy tables."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from .figsave import save_figure  # noqa: E402

# Verification re-reads files that are still in the page cache: its MiB/s would dwarf the rest,
# so it shows as time in the right panel, not as throughput.
ACTIVITY_ORDER = ["stage_in:copy", "run:read", "run:write", "stage_out:copy"]


# Where a cycle's time goes: one colour per part, no two greys side by side (the synthetic data and the
# compute stand-in were #D9D9D9 and #BBBBBB); what no phase times (job start-up, records, manifest) pale
# and hatched.
CYCLE_PARTS = {"stage_in_s": ("stage in", "#0173B2"), "run_io_s": ("run: storage I/O", "#DE8F05"),
               "run_cpu_s": ("run: codec and netCDF metadata (CPU)", "#ECE133"),
               "run_generate_s": ("run: making synthetic data", "#56B4E9"),
               "run_other_s": ("run: compute stand-in and other", "#949494"),
               "stage_out_s": ("stage out", "#029E73"), "verify_beyond_s": ("verify (beyond the stage out)", "#CC78BC"),
               "cleanup_s": ("cleanup", "#CA9161"),
               "job_other_s": ("job start-up and bookkeeping (no phase)", "#EEEEEE")}


def cycle_parts(summary: pd.DataFrame) -> pd.DataFrame:
    """Per arm: mean seconds per full cycle (report.answers.answered_jobs: the half cycle left out, unless the study ran
    nothing else) in each of
    CYCLE_PARTS; they add up to the cycle's wall time, the sum of its jobs' wall times, as in
    what_staging_buys.png (answerfigures.staging_parts) and summary.csv's cycle_wall_s."""
    from .answers import answered_jobs

    jobs, _ = answered_jobs(summary)
    jobs = jobs.assign(run_cpu_s=jobs.get("codec_s", 0.0) + jobs.get("metadata_s", 0.0),
                       run_generate_s=jobs.get("generate_s", 0.0))
    # a forecast's ranks write, encode and make data side by side: where these kinds' times add up to more than the
    # run's, each is drawn at its share of the run, so the run's parts add up to its time and a bar to the cycle's
    kinds = ["run_io_s", "run_cpu_s", "run_generate_s"]
    named = jobs[kinds].sum(axis=1)
    jobs[kinds] = jobs[kinds].mul((jobs["run_s"] / named).where(named > jobs["run_s"], 1.0), axis=0)
    jobs["run_other_s"] = (jobs["run_s"] - jobs[kinds].sum(axis=1)).clip(lower=0)
    # a stage-out verifies its copies as it goes: verify's own part is what it takes beyond the stage-out's time
    jobs["verify_beyond_s"] = (jobs["stage_out_verify_s"] - jobs["stage_out_s"]).clip(lower=0)
    phases = jobs[["stage_in_s", "run_s", "stage_out_verify_s", "cleanup_s"]].sum(axis=1)
    jobs["job_other_s"] = (jobs["wall_s"] - phases).clip(lower=0)
    per_cycle = jobs.groupby(["arm", "cycle"], sort=False)[[*CYCLE_PARTS, "wall_s"]].sum()
    return per_cycle.groupby("arm", sort=False).mean()


def throughput_figure(throughput: pd.DataFrame, summary: pd.DataFrame, paths: list[Path], title: str) -> None:
    """Left: MiB/s of each I/O activity by arm. Right: the seconds of a full cycle (mean over full cycles) in
    each part of its jobs, by arm: the same totals as what_staging_buys.png."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.6), gridspec_kw={"width_ratios": [3, 2]})
    activities = [a for a in ACTIVITY_ORDER if a in set(throughput["activity"])]
    throughput = throughput[throughput["activity"].isin(activities)]
    arms = list(dict.fromkeys(summary["arm"])) if not summary.empty else None
    sns.barplot(data=throughput, x="arm", y="MiB_per_s", hue="activity", hue_order=activities, order=arms,
                ax=left, palette="colorblind")
    left.set(xlabel="arm", ylabel="throughput [MiB/s]", title="I/O throughput by phase")
    # below the panel, never over a bar
    left.legend(title="phase:op", fontsize="small", title_fontsize="small", loc="upper center",
                bbox_to_anchor=(0.5, -0.17), ncol=len(activities) or 1, frameon=False)
    for container in left.containers:
        left.bar_label(container, fmt="%.0f", fontsize=7, padding=1)

    # The surrogates' own CPU work stays visible next to storage time, never inside it.
    parts = cycle_parts(summary).reindex(arms)
    columns = [c for c in CYCLE_PARTS if c in parts.columns and parts[c].fillna(0).gt(0).any()]
    start = np.zeros(len(parts))
    for column in columns:
        label, color = CYCLE_PARTS[column]
        values = parts[column].fillna(0).to_numpy()
        right.barh(range(len(parts)), values, left=start, color=color, label=label, height=0.7, edgecolor="white",
                   hatch="//" if column == "job_other_s" else None)
        start += values
    for y, total in enumerate(parts["wall_s"].to_numpy()):
        right.text(start[y], y, f" {total:.2f} s", va="center", fontsize=8)
    right.set_yticks(range(len(parts)), list(parts.index))
    right.set_xlim(0, max(start.max(), 1e-9) * 1.18)
    right.set(xlabel="seconds per full cycle (sum of its jobs' wall times, mean over full cycles)", ylabel="",
              title="Where a full cycle's time goes")
    right.xaxis.label.set_fontsize(9)
    right.invert_yaxis()
    right.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2, frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, paths)
