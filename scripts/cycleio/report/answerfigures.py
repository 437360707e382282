"""The answer figures, from the tables: the cycle timeline (seed 001's monitoring view), the I/O share of
wall time per step, what staging buys per arm, and the efficiency heatmap. Each figure is saved as every
path it is given (PNG and SVG, by suffix)."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ..config.calendar import FULL_CYCLE_STEPS  # noqa: E402
from .aggregate import IO_OPS  # noqa: E402
from .figsave import save_figure  # noqa: E402

PHASES = ("stage_in", "run", "stage_out", "verify", "cleanup")
PHASE_COLORS = {"stage_in": "#4C72B0", "run": "#DDDDDD", "stage_out": "#55A868", "verify": "#8172B3",
                "cleanup": "#937860"}
OUTPUT_COLOR, WAIT_COLOR = "#C44E52", "#E8A33D"
OUTPUT_OPS = ("write", "combine", "write_final")
TIMELINE_COLUMNS = ["study", "arm", "cycle", "step", "host", "rank", "kind", "what", "t_start", "t_end", "seconds",
                    "bytes", "t_from_arm_start_s"]
_HOUR = re.compile(r"f(\d{3})(?:\.[A-Za-z0-9]+)?$")


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def output_hour(file: str | None) -> str:
    """``f003`` for a history file, its log or a write_effective record of hour 3; ``restart`` otherwise."""
    match = _HOUR.search(str(file or "").rsplit("/", 1)[-1])
    return f"f{match.group(1)}" if match else "restart"


def step_order(steps) -> list[str]:
    rank = {s: i for i, s in enumerate(FULL_CYCLE_STEPS)}
    return sorted(set(steps), key=lambda s: (rank.get(s, len(rank)), s))


# ----------------------------------------------------------------------------------------------- timeline


def timeline_table(events: pd.DataFrame) -> pd.DataFrame:
    """One row per job phase per host and rank (``kind`` phase), and per forecast output hour per host and rank
    (``kind`` output: the hour's writes; ``kind`` wait: what the compute ranks were blocked, write_effective)."""
    events = events.copy()
    if "t_end" not in events:
        events["t_end"] = events["t_start"] + events["seconds"]
    events = events[events["phase"].isin(PHASES)]
    keys = ["study", "arm", "cycle", "step", "host", "rank"]
    events["rank"] = events["rank"].fillna(0).astype(int)
    events["host"] = events["host"].fillna("")
    phases = events.groupby([*keys, "phase"], sort=True).agg(t_start=("t_start", "min"), t_end=("t_end", "max"),
                                                             bytes=("bytes", "sum")).reset_index()
    phases = phases.rename(columns={"phase": "what"}).assign(kind="phase")
    run = events[(events["phase"] == "run") & events["op"].isin([*OUTPUT_OPS, "write_effective"])
                 & (events["step"] == "fcst")].copy()
    run["what"] = run["file"].map(output_hour)
    run["kind"] = np.where(run["op"] == "write_effective", "wait", "output")
    bursts = run.groupby([*keys, "kind", "what"], sort=True).agg(
        t_start=("t_start", "min"), t_end=("t_end", "max"), bytes=("bytes", "sum")).reset_index()
    table = pd.concat([phases, bursts], ignore_index=True)
    table["seconds"] = table["t_end"] - table["t_start"]
    table["t_from_arm_start_s"] = table["t_start"] - table.groupby("arm")["t_start"].transform("min")
    table["cycle"] = table["cycle"].astype(str)
    table["bytes"] = table["bytes"].fillna(0).astype("int64")
    return table.sort_values(["arm", "t_start", "rank"], kind="stable").reindex(columns=TIMELINE_COLUMNS)


def busy_clock(starts, ends, gap_share: float = 0.02):
    """A clock that runs only while some interval [start, end) runs: each idle gap between the intervals
    shrinks to ``gap_share`` of the busy time. Returns a function of absolute times to busy seconds."""
    order = np.argsort(starts)
    merged: list[list[float]] = []
    for start, end in zip(np.asarray(starts, float)[order], np.asarray(ends, float)[order]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    busy = sum(end - start for start, end in merged)
    gap = gap_share * busy
    offsets, clock = [], 0.0
    for start, end in merged:
        offsets.append(clock - start)
        clock += end - start + gap

    def to_busy(t):
        t = np.asarray(t, float)
        index = np.clip(np.searchsorted([start for start, _ in merged], t, side="right") - 1, 0, len(merged) - 1)
        return t + np.asarray(offsets)[index]

    return to_busy


def timeline_figure(table: pd.DataFrame, paths, title: str) -> None:
    """Per arm (side by side), one lane per job and rank over the arm's busy time (a wait between its jobs, for a
    free core or another arm, is cut to a sliver: busy_clock): the job's phases as pale bars, each output hour's
    writes (red) and the compute ranks' waits for them (orange) on top."""
    arms = list(dict.fromkeys(table["arm"])) if not table.empty else []
    lanes_by_arm = {arm: list(dict.fromkeys(
        table[table["arm"] == arm].sort_values("t_start")[["cycle", "step", "rank"]].itertuples(index=False)))
        for arm in arms}
    n_lanes = max((len(lanes) for lanes in lanes_by_arm.values()), default=1)
    height = min(max(3.5, 0.22 * n_lanes + 2.2), 30)
    fig, axes = plt.subplots(1, max(len(arms), 1), figsize=(max(5.2 * len(arms), 8), height), squeeze=False)
    axes = axes[0]
    if not arms:
        _empty(axes[0], "no jobs recorded")
    for ax, arm in zip(axes, arms):
        rows = table[table["arm"] == arm]
        jobs = rows.groupby(["cycle", "step"]).agg(t_start=("t_start", "min"), t_end=("t_end", "max"))
        clock = busy_clock(jobs["t_start"], jobs["t_end"])
        rows = rows.assign(x=clock(rows["t_start"]))
        lanes = lanes_by_arm[arm]
        index = {lane: i for i, lane in enumerate(lanes)}
        for row in rows.itertuples():
            y = index[(row.cycle, row.step, row.rank)]
            if row.kind == "phase":
                ax.barh(y, max(row.seconds, 1e-3), left=row.x, height=0.8,
                        color=PHASE_COLORS.get(row.what, "#CCCCCC"), edgecolor="none")
            else:
                color, half = (OUTPUT_COLOR, 0.22) if row.kind == "output" else (WAIT_COLOR, 0.12)
                ax.barh(y, max(row.seconds, 1e-3), left=row.x, height=2 * half, color=color,
                        edgecolor="white", linewidth=0.4)
        labels = [f"{cycle[-4:]} {step}" + (f" r{rank}" if rank else "") for cycle, step, rank in lanes]
        ax.set_yticks(range(len(lanes)), labels, fontsize=7)
        ax.set_ylim(len(lanes) - 0.5, -0.5)
        ax.set(xlabel="seconds of the arm's jobs (waits between jobs cut)", title=arm)
        ax.set_xlim(left=0)
        ax.grid(axis="x", alpha=0.3)
    handles = [matplotlib.patches.Patch(color=PHASE_COLORS[p], label=p.replace("_", " ")) for p in PHASES]
    handles += [matplotlib.patches.Patch(color=OUTPUT_COLOR, label="output hour written"),
                matplotlib.patches.Patch(color=WAIT_COLOR, label="compute ranks wait for output")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize="small", frameon=False)
    fig.suptitle(f"{title}\nlanes: cycle (DDHH), job, rank")
    fig.tight_layout(rect=(0, 0.6 / height, 1, 1))
    save_figure(fig, paths)


def io_share_figure(summary: pd.DataFrame, paths, title: str) -> None:
    """The I/O share of wall time per step and arm: mean over cycles, bars from the lowest to the highest."""
    jobs = summary[summary["step"] != "cleanup"]
    steps = step_order(jobs["step"])
    arms = list(dict.fromkeys(jobs["arm"]))
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(steps) + 3), 4.6))
    if jobs.empty:
        _empty(ax, "no jobs recorded")
    else:
        sns.barplot(data=jobs.assign(io_percent=100 * jobs["io_fraction"]), x="step", y="io_percent", hue="arm",
                    order=steps, hue_order=arms, errorbar=("pi", 100), capsize=0.1, palette="colorblind", ax=ax)
        for container in ax.containers:
            if isinstance(container, matplotlib.container.BarContainer):
                ax.bar_label(container, fmt="%.0f%%", fontsize=7, label_type="center", color="white")
        ax.set(xlabel="step", ylabel="I/O share of the job's wall time [%]", ylim=(0, 105))
        ax.legend(title="arm", fontsize="small", title_fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(f"{title}\nI/O share of wall time per step (mean over cycles; bars: lowest to highest)", fontsize=11)
    fig.tight_layout()
    save_figure(fig, paths)


# ------------------------------------------------------------------------------------- what staging buys

STAGING_PARTS = {"stage_in_s": ("stage in", "#4C72B0"), "run_io_s": ("run: storage I/O", "#DD8452"),
                 "compute_generate_s": ("compute, data generation, codec", "#BBBBBB"),
                 "stage_out_verify_s": ("stage out and verify", "#55A868"), "other_s": ("other", "#E5E5E5")}


def staging_parts(cycles: pd.DataFrame) -> pd.DataFrame:
    """Per arm: mean seconds per full cycle in each of STAGING_PARTS (they add up to the cycle's wall time)."""
    parts = pd.DataFrame({"arm": cycles["arm"]})
    parts["stage_in_s"] = cycles["stage_in_s"]
    parts["run_io_s"] = cycles["run_io_s"]
    parts["compute_generate_s"] = sum(cycles.get(c, 0.0) for c in ("compute_s", "generate_s", "codec_s",
                                                                   "metadata_s"))
    parts["stage_out_verify_s"] = cycles["stage_out_s"] + cycles["verify_s"]
    named = parts.drop(columns="arm").sum(axis=1)
    parts["other_s"] = (cycles["wall_s"] - named).clip(lower=0)
    parts["wall_s"] = cycles["wall_s"]
    return parts.groupby("arm", sort=False).mean()


def staging_figure(cycles: pd.DataFrame, answers: pd.DataFrame, paths, title: str) -> None:
    """Mean wall time of a full cycle per arm, split into STAGING_PARTS; the baseline's total marked, and each
    arm's saving against it with its spread."""
    parts = staging_parts(cycles) if not cycles.empty else pd.DataFrame()
    arms = list(parts.index)
    fig, ax = plt.subplots(figsize=(11, 0.75 * max(len(arms), 2) + 2.6))
    if parts.empty:
        _empty(ax, "no full cycle recorded")
    else:
        left = np.zeros(len(arms))
        for column, (label, color) in STAGING_PARTS.items():
            values = parts[column].to_numpy()
            ax.barh(range(len(arms)), values, left=left, color=color, label=label, edgecolor="white", height=0.6)
            left += values
        info = answers.set_index("arm") if not answers.empty else pd.DataFrame()
        marked = set()
        for y, arm in enumerate(arms):
            row = info.loc[arm] if arm in info.index else None
            text = f" {parts.loc[arm, 'wall_s']:.1f} s"
            if row is not None and row["verdict"] == "baseline":
                text += " (baseline)"
            elif row is not None and pd.notna(row["saved_s"]):
                spread = "" if pd.isna(row["saved_se_s"]) else f" ± {row['saved_se_s']:.1f}"
                text += f": {row['saved_s']:+.1f}{spread} s vs {row['baseline_arm']} ({row['verdict']})"
            ax.text(left[y], y, text, va="center", fontsize=8)
            base = row["baseline_arm"] if row is not None else None
            if base in parts.index and base not in marked:
                marked.add(base)
                ax.axvline(parts.loc[base, "wall_s"], color="black", linestyle="--", linewidth=1,
                           label=f"baseline {base}")
        ax.set_yticks(range(len(arms)), arms)
        ax.set_ylim(len(arms) - 0.5, -0.5)
        ax.set_xlim(0, left.max() * 1.55)
        ax.set(xlabel="seconds per full cycle (sum of its jobs' wall times, mean over cycles)", ylabel="arm")
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False)
        ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{title}\nWhat staging buys: where a cycle's time goes per arm", fontsize=11)
    fig.tight_layout()
    save_figure(fig, paths)


# ------------------------------------------------------------------------------------ efficiency heatmap


def efficiency_matrix(efficiency: pd.DataFrame) -> pd.DataFrame:
    """Arm x (step, read/write) efficiency against the replay of the same bytes on the same tier."""
    replay = efficiency[(efficiency["reference"] == "replay") & efficiency["efficiency"].notna()].copy()
    if replay.empty:
        return pd.DataFrame()
    replay["direction"] = replay["activity"].map(lambda a: "read" if str(a).endswith("read") else "write")
    matrix = replay.pivot_table(index="arm", columns=["step", "direction"], values="efficiency", aggfunc="median")
    steps = step_order(matrix.columns.get_level_values(0))
    order = [(s, d) for s in steps for d in ("read", "write") if (s, d) in matrix.columns]
    return matrix[order]


def efficiency_heatmap(efficiency: pd.DataFrame, paths, title: str) -> None:
    """Heatmap of efficiency_matrix: 1.0 (white) is the replay's speed; log colour scale from 1/4 to 4."""
    matrix = efficiency_matrix(efficiency) if efficiency is not None and not efficiency.empty else pd.DataFrame()
    n_cols = max(matrix.shape[1], 2)
    fig, ax = plt.subplots(figsize=(max(7, 1.05 * n_cols + 3), 0.7 * max(len(matrix), 2) + 2.6))
    if matrix.empty:
        _empty(ax, "no efficiency against a replay (benchmarks off or no replay)")
    else:
        labels = [f"{step}\n{direction}" for step, direction in matrix.columns]
        data = np.log2(matrix.to_numpy(dtype=float))
        sns.heatmap(data, annot=matrix.to_numpy(dtype=float), fmt=".2f", cmap="RdBu", center=0, vmin=-2, vmax=2,
                    xticklabels=labels, yticklabels=list(matrix.index), linewidths=0.5, linecolor="white", ax=ax,
                    cbar_kws={"label": "efficiency (log2 scale): step MiB/s / replay MiB/s",
                              "ticks": [-2, -1, 0, 1, 2]})
        ax.collections[0].colorbar.set_ticklabels(["1/4", "1/2", "1", "2", "4"])
        ax.set(xlabel="step and direction", ylabel="arm")
        ax.tick_params(axis="x", rotation=0)
        ax.tick_params(axis="y", rotation=0)
    ax.set_title(f"{title}\nEfficiency against a replay of the same bytes on the same tier (median where several)",
                 fontsize=11)
    fig.tight_layout()
    save_figure(fig, paths)
