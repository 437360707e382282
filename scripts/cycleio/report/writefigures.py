"""The write-strategy figure: effective against actual write time, and the I/O share of the forecast.

Reads only the tables (io_events, step_summary). Per arm and cycle, from the fcst records of
the forecast's MPI program (cycleio.surrogates.forecast), the times writetime.py defines:
effective (summed over output hours), actual (the busiest writer rank) and final, and
blocked: what output cost the forecast's wall time, effective of every hour but the last, plus final.
The figures show means per forecast over the cycles.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..intervals import covered_seconds  # noqa: E402
from .figsave import save_figure  # noqa: E402
from ..surrogates.forecast.strategies import STRATEGIES  # noqa: E402
from ..surrogates.forecast.writetime import actual_seconds, effective_per_hour, final_seconds  # noqa: E402

COLORS = {"effective": "#C44E52", "actual": "#4C72B0", "final": "#8172B3", "compute": "#BBBBBB",
          "blocked": "#C44E52", "other": "#E5E5E5"}


def write_times(events: pd.DataFrame, summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per arm x cycle forecast: effective, actual, final, blocked, compute and wall seconds."""
    fcst = events[(events["step"] == "fcst") & (events["phase"] == "run")].copy()
    if "t_end" not in fcst:
        fcst["t_end"] = fcst["t_start"] + fcst["seconds"]
    rows = []
    for (arm, cycle), group in fcst.groupby(["arm", "cycle"], sort=False):
        records = group[["op", "rank", "file", "seconds"]].to_dict("records")
        per_hour = effective_per_hour(records)
        if not per_hour:
            continue  # a forecast without MPI records (not written by the forecast's MPI program)
        final = final_seconds(records)
        writes = group[group["op"].isin(["write", "combine"])]
        compute = group[group["op"] == "compute"]
        last_hour = max(per_hour)
        rows.append({
            "arm": arm, "cycle": str(cycle), "strategy": group["strategy"].iloc[0],
            "nranks": int(group["nranks"].max()), "hours": len(per_hour),
            "effective_s": sum(per_hour.values()),
            "actual_s": actual_seconds(records),
            "writer_s": float(writes["seconds"].sum()),
            "final_s": float(final),
            "blocked_s": sum(per_hour.values()) - per_hour[last_hour] + final,
            "compute_s": covered_seconds(compute["t_start"], compute["t_end"]),
            "wall_s": float(group["t_end"].max() - group["t_start"].min()),
        })
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    if summary is not None and not summary.empty and "run_s" in summary:
        runs = summary[summary["step"] == "fcst"][["arm", "cycle", "run_s"]].astype({"cycle": str})
        table = table.merge(runs, on=["arm", "cycle"], how="left")
        table["wall_s"] = table["run_s"].fillna(table["wall_s"])  # the fcst job's run phase, reads included
        table = table.drop(columns="run_s")
    table["io_share"] = table["blocked_s"] / table["wall_s"]
    return table


def _arm_order(table: pd.DataFrame) -> list[str]:
    rank = {name: index for index, name in enumerate(STRATEGIES)}
    arms = table.drop_duplicates("arm")[["arm", "strategy"]]
    return sorted(arms["arm"], key=lambda arm: (rank.get(arms.set_index("arm").loc[arm, "strategy"], 99), arm))


def write_strategy_figure(table: pd.DataFrame, paths: list[Path], title: str) -> None:
    """Left: effective, actual and final write seconds per forecast by arm. Right: where the forecast's run time goes."""
    arms = table["arm"].nunique() if "arm" in table else 0  # write_times gives no columns when it has no rows
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.9 * max(arms, 3) + 3.2),
                                      gridspec_kw={"width_ratios": [3, 2]})
    if table.empty:
        for ax in (left, right):
            ax.text(0.5, 0.5, "no forecast written by the MPI program", ha="center", va="center")
            ax.set_axis_off()
    else:
        arms = _arm_order(table)
        means = table.groupby("arm").agg(strategy=("strategy", "first"), nranks=("nranks", "max"),
                                         **{c: (c, "mean") for c in ("effective_s", "actual_s", "final_s",
                                                                     "blocked_s", "compute_s", "wall_s")})
        means = means.reindex(arms)
        labels = [arm if strategy in arm else f"{arm} ({strategy})" for arm, strategy in zip(arms, means["strategy"])]
        labels = [f"{label}\n{n} ranks" for label, n in zip(labels, means["nranks"])]
        bars = {"effective_s": "effective: compute ranks blocked", "actual_s": "actual: writers writing",
                "final_s": "final un-overlapped write"}
        height = 0.8 / len(bars)
        for i, (column, name) in enumerate(bars.items()):
            positions = [y + (i - 1) * height for y in range(len(arms))]
            color = COLORS[column.removesuffix("_s")]
            drawn = left.barh(positions, means[column], height=height, color=color, label=name)
            left.bar_label(drawn, fmt="%.2f", fontsize=7, padding=2)
        left.set_yticks(range(len(arms)), labels, fontsize=8)
        left.invert_yaxis()
        left.set(xlabel="seconds per forecast (mean over cycles)", title="Effective against actual write time")
        left.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
        left.grid(axis="x", alpha=0.3)

        other = (means["wall_s"] - means["compute_s"] - means["blocked_s"]).clip(lower=0)
        parts = [("compute stand-in", means["compute_s"], COLORS["compute"]),
                 ("blocked by output", means["blocked_s"], COLORS["blocked"]),
                 ("reads, data generation, MPI start", other, COLORS["other"])]
        start = pd.Series(0.0, index=means.index)
        for name, values, color in parts:
            if not (values.fillna(0) > 0).any():  # a part no forecast had (no compute stand-in) gets no legend entry
                continue
            right.barh(range(len(arms)), values, left=start, color=color, label=name, edgecolor="white")
            start = start + values
        for y, (blocked, wall) in enumerate(zip(means["blocked_s"], means["wall_s"])):
            share = blocked / wall if wall > 0 else float("nan")
            right.text(wall, y, f" {share:.0%} output", va="center", fontsize=8)
        right.set_yticks(range(len(arms)), [""] * len(arms))
        right.invert_yaxis()
        right.set(xlabel="seconds per forecast run phase", title="I/O share of forecast wall time")
        right.set_xlim(0, max(means["wall_s"].max() * 1.3, 1e-3))
        right.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
        right.grid(axis="x", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, paths)


def write_strategy_figure_from_tables(events_path: Path, summary_path: Path, paths: list[Path],
                                      title: str) -> pd.DataFrame:
    events = pd.read_parquet(events_path)
    summary = pd.read_csv(summary_path, dtype={"cycle": str}) if Path(summary_path).exists() else None
    table = write_times(events, summary)
    write_strategy_figure(table, paths, title)
    return table
