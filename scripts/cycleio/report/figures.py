"""Figures read only the tidy tables."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ..config.calendar import FULL_CYCLE_STEPS  # noqa: E402
from .figsave import save_figure  # noqa: E402

# Verification re-reads files that are still in the page cache: its MiB/s would dwarf the rest,
# so it shows as time in the right panel, not as throughput.
ACTIVITY_ORDER = ["stage_in:copy", "run:read", "run:write", "stage_out:copy"]
STEP_ORDER = list(FULL_CYCLE_STEPS)


def throughput_figure(throughput: pd.DataFrame, summary: pd.DataFrame, paths: list[Path], title: str) -> None:
    """Left: MiB/s of each I/O activity by arm. Right: seconds per cycle spent in each step, by arm."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    activities = [a for a in ACTIVITY_ORDER if a in set(throughput["activity"])]
    throughput = throughput[throughput["activity"].isin(activities)]
    arms = list(dict.fromkeys(summary["arm"])) if not summary.empty else None
    sns.barplot(data=throughput, x="arm", y="MiB_per_s", hue="activity", hue_order=activities, order=arms,
                ax=left, palette="colorblind")
    left.set(xlabel="arm", ylabel="throughput [MiB/s]", title="I/O throughput by phase")
    left.legend(title="phase:op", fontsize="small", title_fontsize="small")
    for container in left.containers:
        left.bar_label(container, fmt="%.0f", fontsize=7, padding=1)

    # The surrogates' own CPU work stays visible next to storage time, never inside it.
    summary = summary.assign(
        run_cpu_s=summary.get("codec_s", 0.0) + summary.get("metadata_s", 0.0),
        run_generate_s=summary.get("generate_s", 0.0),
    )
    summary["run_other_s"] = (summary["run_s"] - summary["run_io_s"] - summary["run_cpu_s"]
                              - summary["run_generate_s"]).clip(lower=0)
    parts = {"stage_in_s": "stage in", "run_io_s": "run: storage I/O",
             "run_cpu_s": "run: codec and netCDF metadata (CPU)", "run_generate_s": "run: making synthetic data",
             "run_other_s": "run: compute and other", "stage_out_s": "stage out", "verify_s": "verify",
             "cleanup_s": "cleanup"}
    per_cycle = summary.melt(id_vars=["arm", "step"], value_vars=list(parts), var_name="phase", value_name="seconds")
    per_cycle["phase"] = per_cycle["phase"].map(parts)
    totals = per_cycle.groupby(["arm", "phase"], sort=False)["seconds"].sum().unstack("phase").reindex(arms)
    ncycles = max(summary["cycle"].nunique(), 1)
    colors = dict(zip(parts.values(), ["#4C72B0", "#DD8452", "#E8C07D", "#D9D9D9", "#BBBBBB", "#55A868", "#8172B3",
                                       "#937860"]))
    totals = totals[[p for p in parts.values() if p in totals.columns]]
    (totals / ncycles).plot(kind="barh", stacked=True, ax=right, color=[colors[c] for c in totals.columns], width=0.7)
    right.set(xlabel="seconds per cycle (all steps)", ylabel="", title="Where a cycle's time goes")
    right.invert_yaxis()
    right.legend(title="phase", fontsize="small", title_fontsize="small", loc="upper center",
                 bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, paths)
