"""The answer figures, from the tables: the cycle timeline (seed 001's monitoring view), the I/O share of
wall time per step, what staging buys per arm, the efficiency heatmap and where a step's storage seconds go
(io_gap). Each figure is saved as every
path it is given (PNG and SVG, by suffix)."""

from __future__ import annotations

import math
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.lines  # noqa: E402
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ..config.calendar import step_rank  # noqa: E402
from .aggregate import IO_OPS  # noqa: E402
from .closeness import (AT_SPEED, DIRECTIONS, NOT_FAIR, WITHIN_NOISE, io_gap_rows,  # noqa: E402
                        replay_rows)
from ..units import MiB, format_rate, format_seconds  # noqa: E402
from .figsave import empty_panel, save_figure  # noqa: E402

# the paired replay runs inside a job between its run and stage_out: drawn so the gap is explained, but it is the
# instrument's time, which step_summary leaves out of the job's wall time
PHASES = ("stage_in", "run", "replay", "stage_out", "verify", "cleanup", "archive")
PHASE_COLORS = {"stage_in": "#4C72B0", "run": "#DDDDDD", "replay": "#F1E4C3", "stage_out": "#55A868",
                "verify": "#8172B3", "cleanup": "#937860", "archive": "#64B5CD"}
PHASE_LABELS = {"replay": "paired replay (not the job's time)"}
OUTPUT_COLOR, WAIT_COLOR = "#C44E52", "#E8A33D"
OUTPUT_OPS = ("write", "combine", "write_final")
TIMELINE_COLUMNS = ["study", "arm", "cycle", "step", "host", "rank", "kind", "what", "t_start", "t_end", "seconds",
                    "bytes", "t_from_arm_start_s", "critical"]
_HOUR = re.compile(r"f(\d{3})(?:\.[A-Za-z0-9]+)?$")


def output_hour(file: str | None) -> str:
    """``f003`` for a history file, its log or a write_effective record of hour 3; ``restart`` otherwise."""
    match = _HOUR.search(str(file or "").rsplit("/", 1)[-1])
    return f"f{match.group(1)}" if match else "restart"


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
    table["critical"] = on_critical_path(table)
    return table.sort_values(["arm", "t_start", "rank"], kind="stable").reindex(columns=TIMELINE_COLUMNS)


def on_critical_path(table: pd.DataFrame) -> list[bool]:
    """Per timeline row: whether its job is on its cycle's critical path (report.critical, from the jobs' spans)."""
    from .critical import critical_path

    keys = ["study", "arm", "cycle", "step"]
    jobs = table[table["kind"] == "phase"].groupby(keys).agg(t_start=("t_start", "min"), t_end=("t_end", "max"))
    jobs = jobs.reset_index().assign(wall_s=lambda j: j["t_end"] - j["t_start"])
    path = critical_path(jobs)
    on = set(zip(path["arm"], path["cycle"], path["step"]))
    return [(arm, str(cycle), step) in on for arm, cycle, step in zip(table["arm"], table["cycle"], table["step"])]


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


def timeline_lanes(table: pd.DataFrame) -> pd.Series:
    """Each timeline row's lane: (cycle, step, node, rank), the node named only in a job that ran on several nodes
    (its ranks, and each node's stage-in, stage-out and cleanup task, runner.nodes), else ""; so a job over nodes
    has a lane per node and rank, where the slowest node's staging shows, and a job on one node a lane per rank."""
    if table.empty:
        return pd.Series([], dtype=object, index=table.index)
    hosts = table["host"].fillna("").astype(str)
    several = hosts.groupby([table["arm"], table["cycle"], table["step"]]).transform("nunique") > 1
    node = hosts.where(several, "")
    return pd.Series(list(zip(table["cycle"], table["step"], node, table["rank"])), index=table.index)


def lane_label(lane: tuple) -> str:
    """``1200 fcst`` for a job's first rank, ``1200 fcst r2`` for another, ``1200 fcst n2 r1`` on node n2."""
    cycle, step, node, rank = lane
    return " ".join(filter(None, [str(cycle)[-4:], step, node, f"r{rank}" if rank else ""]))


def timeline_figure(table: pd.DataFrame, paths, title: str) -> None:
    """Per arm (side by side), one lane per job and rank (and node, for a job over several: timeline_lanes) over the
    arm's busy time (a wait between its jobs, for a free core or another arm, is cut to a sliver: busy_clock): the
    job's phases as pale bars, each output hour's writes (red) and the compute ranks' waits for them (orange) on
    top."""
    arms = list(dict.fromkeys(table["arm"])) if not table.empty else []
    table = table.assign(lane=timeline_lanes(table))
    lanes_by_arm = {arm: list(dict.fromkeys(table[table["arm"] == arm].sort_values("t_start", kind="stable")["lane"]))
                    for arm in arms}
    n_lanes = max((len(lanes) for lanes in lanes_by_arm.values()), default=1)
    height = min(max(3.5, 0.22 * n_lanes + 2.2), 30)
    fig, axes = plt.subplots(1, max(len(arms), 1), figsize=(max(5.2 * len(arms), 8), height), squeeze=False)
    axes = axes[0]
    if not arms:
        empty_panel(axes[0], "no jobs recorded")
    for ax, arm in zip(axes, arms):
        rows = table[table["arm"] == arm]
        jobs = rows.groupby(["cycle", "step"]).agg(t_start=("t_start", "min"), t_end=("t_end", "max"))
        clock = busy_clock(jobs["t_start"], jobs["t_end"])
        rows = rows.assign(x=clock(rows["t_start"]))
        lanes = lanes_by_arm[arm]
        index = {lane: i for i, lane in enumerate(lanes)}
        for row in rows.itertuples():
            y = index[row.lane]
            if row.kind == "phase":
                ax.barh(y, max(row.seconds, 1e-3), left=row.x, height=0.8,
                        color=PHASE_COLORS.get(row.what, "#CCCCCC"), edgecolor="none")
            else:
                color, half = (OUTPUT_COLOR, 0.22) if row.kind == "output" else (WAIT_COLOR, 0.12)
                ax.barh(y, max(row.seconds, 1e-3), left=row.x, height=2 * half, color=color,
                        edgecolor="white", linewidth=0.4)
        ax.set_yticks(range(len(lanes)), [lane_label(lane) for lane in lanes], fontsize=7)
        if "critical" in rows:  # the jobs on their cycle's critical path: bold lanes
            critical = set(rows.loc[rows["critical"].astype(bool), "lane"])
            for label, lane in zip(ax.get_yticklabels(), lanes):
                if lane in critical:
                    label.set_fontweight("bold")
        ax.set_ylim(len(lanes) - 0.5, -0.5)
        ax.set(xlabel="seconds of the arm's jobs (waits between jobs cut)", title=arm)
        ax.set_xlim(left=0)
        ax.grid(axis="x", alpha=0.3)
    handles = [matplotlib.patches.Patch(color=PHASE_COLORS[p], label=PHASE_LABELS.get(p, p.replace("_", " ")))
               for p in PHASES]
    handles += [matplotlib.patches.Patch(color=OUTPUT_COLOR, label="output hour written"),
                matplotlib.patches.Patch(color=WAIT_COLOR, label="compute ranks wait for output")]
    fig.legend(handles=handles, loc="lower center", ncol=(len(handles) + 1) // 2, fontsize="small", frameon=False)
    nodes = " node," if any(lane[2] for lanes in lanes_by_arm.values() for lane in lanes) else ""
    fig.suptitle(f"{title}\nlanes: cycle (DDHH), job,{nodes} rank; bold: on the cycle's critical path")
    fig.tight_layout(rect=(0, 0.9 / height, 1, 1))
    save_figure(fig, paths)


def io_share_figure(summary: pd.DataFrame, paths, title: str) -> None:
    """The I/O share of wall time per step and arm: mean over cycles, bars from the lowest to the highest."""
    jobs = summary[summary["step"] != "cleanup"]
    steps = sorted(set(jobs["step"]), key=step_rank)
    arms = list(dict.fromkeys(jobs["arm"]))
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(steps) + 3), 4.6))
    if jobs.empty:
        empty_panel(ax, "no jobs recorded")
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

# the colours of throughput_by_arm_and_phase.png's right panel (figures.CYCLE_PARTS)
STAGING_PARTS = {"stage_in_s": ("stage in", "#0173B2"), "run_io_s": ("run: storage I/O", "#DE8F05"),
                 "compute_generate_s": ("compute stand-in, data generation, codec", "#949494"),
                 "stage_out_verify_s": ("stage out and verify", "#029E73"),
                 "other_s": ("other (cleanup, job start-up and bookkeeping)", "#EEEEEE")}


def staging_parts(cycles: pd.DataFrame) -> pd.DataFrame:
    """Per arm: mean seconds per full cycle in each of STAGING_PARTS (they add up to the cycle's wall time)."""
    parts = pd.DataFrame({"arm": cycles["arm"]})
    parts["stage_in_s"] = cycles["stage_in_s"]
    parts["run_io_s"] = cycles["run_io_s"]
    parts["compute_generate_s"] = sum(cycles.get(c, 0.0) for c in ("compute_s", "generate_s", "codec_s",
                                                                   "metadata_s"))
    parts["stage_out_verify_s"] = cycles["stage_out_verify_s"]  # side by side: stage_out_s + verify_s counts twice
    named = parts.drop(columns="arm").sum(axis=1)
    parts["other_s"] = (cycles["wall_s"] - named).clip(lower=0)
    parts["wall_s"] = cycles["wall_s"]
    return parts.groupby("arm", sort=False).mean()


def saving_label(wall: float, row, info: pd.DataFrame) -> str:
    """An arm's cycle time and what it saves (or costs) against its baseline: the band is the standard error
    over the cycles both ran, said with its count; with one cycle there is no band."""
    text = f"{wall:.2f} s"
    if row is None:
        return text
    if row["verdict"] == "baseline":
        return text + " (baseline)"
    if pd.isna(row["saved_s"]):
        return text
    base = row["baseline_arm"]
    cycles = int(row["n_cycles"])
    if base in info.index and pd.notna(info.loc[base, "n_cycles"]):
        cycles = min(cycles, int(info.loc[base, "n_cycles"]))
    word = "saves" if row["saved_s"] >= 0 else "costs"
    if pd.isna(row["saved_se_s"]) or cycles < 2:
        band = " (one cycle, no band)"
    else:
        spread = f"{row['saved_se_s']:.2f}" if row["saved_se_s"] >= 0.005 else "<0.01"
        band = f" ± {spread} s (std. error over {cycles} cycles)"
    return f"{text}: {word} {abs(row['saved_s']):.2f} s{band}\nagainst {base}: {row['verdict']}"


def staging_figure(cycles: pd.DataFrame, answers: pd.DataFrame, paths, title: str) -> None:
    """Mean wall time of a full cycle per arm, split into STAGING_PARTS; the baseline's total marked, and each
    arm's saving against it with its spread."""
    parts = staging_parts(cycles) if not cycles.empty else pd.DataFrame()
    arms = list(parts.index)
    # the bars, and beside them (not over the axis, which ends where the data do) each arm's numbers
    height = 0.75 * max(len(arms), 2) + 2.6
    fig, (ax, notes) = plt.subplots(1, 2, figsize=(13, height), sharey=True,
                                    gridspec_kw={"width_ratios": [3, 2], "wspace": 0.02})
    notes.axis("off")
    if parts.empty:
        empty_panel(ax, "no full cycle recorded")
    else:
        left = np.zeros(len(arms))
        for column, (label, color) in STAGING_PARTS.items():
            values = parts[column].to_numpy()
            ax.barh(range(len(arms)), values, left=left, color=color, label=label, edgecolor="white", height=0.6,
                    hatch="//" if column == "other_s" else None)
            left += values
        info = answers.set_index("arm") if not answers.empty else pd.DataFrame()
        marked = set()
        for y, arm in enumerate(arms):
            row = info.loc[arm] if arm in info.index else None
            notes.text(0.0, y, saving_label(parts.loc[arm, "wall_s"], row, info), va="center", fontsize=8, wrap=True)
            base = row["baseline_arm"] if row is not None else None
            if base in parts.index and base not in marked:
                marked.add(base)
                ax.axvline(parts.loc[base, "wall_s"], color="black", linestyle="--", linewidth=1,
                           label=f"baseline {base}")
        ax.set_yticks(range(len(arms)), arms)
        ax.set_ylim(len(arms) - 0.5, -0.5)
        ax.set_xlim(0, max(left.max(), parts["wall_s"].max()) * 1.04)
        ax.set(xlabel="seconds per full cycle (sum of its jobs' wall times, mean over full cycles)", ylabel="arm")
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, fontsize="small", loc="lower center", ncol=3, frameon=False,
                   bbox_to_anchor=(0.4, 0.0))
        ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{title}\nWhat staging buys: where a full cycle's time goes per arm", fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.98, top=1 - 0.75 / height, bottom=1.2 / height)
    save_figure(fig, paths)


# ------------------------------------------------------------------------------------ efficiency heatmap

VERDICT_MARKS = {AT_SPEED: "=", WITHIN_NOISE: "≈"}  # the other timed verdicts show as the colour's side of 1
HEATMAP_LIMIT = 2  # log2: the colour scale runs from 1/4 to 4
NOISE_TINT = 0.5  # log2: how far a within-noise cell is tinted (its band holds 1.0)
NOT_TIMED_COLOR = "#D9D9D9"
CELL_COLUMNS = ["arm", "step", "direction", "efficiency", "efficiency_low", "efficiency_high", "timed", "verdict",
                "shade", "label"]


def cell_label(row) -> str:
    """A cell's text: the ratio with its verdict's mark, the band below; "not timed" for a row too small to time
    (its ratio is not shown: it means nothing)."""
    if not row.timed:
        return "reference\nnot fair" if row.verdict == NOT_FAIR else "not timed"
    mark = VERDICT_MARKS.get(row.verdict)
    text = f"{row.efficiency:.2f}" + (f" {mark}" if mark else "")
    if pd.notna(row.efficiency_low) and pd.notna(row.efficiency_high):
        text += f"\n{row.efficiency_low:.2f}-{row.efficiency_high:.2f}"
    return text


def efficiency_cells(efficiency: pd.DataFrame | None) -> pd.DataFrame:
    """One cell per arm x step x direction against the replay (CELL_COLUMNS): ``shade`` is log2 of the efficiency
    for a timed row and blank otherwise (a not-timed row is never coloured by its ratio), ``label`` its text. Of
    several rows for one cell (tiers), the timed one moving the most bytes."""
    rows = replay_rows(efficiency)
    if rows.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    rows = rows.sort_values(["timed", "surrogate_bytes"], ascending=False, kind="stable").drop_duplicates(
        ["arm", "step", "direction"])
    rows["shade"] = np.log2(rows["efficiency"].astype(float).where(rows["timed"] & (rows["efficiency"] > 0)))
    # a cell whose band holds 1.0 is only tinted toward its side: its ratio alone is no finding
    noise = rows["verdict"] == WITHIN_NOISE
    rows.loc[noise, "shade"] = rows.loc[noise, "shade"].clip(-NOISE_TINT, NOISE_TINT)
    rows["label"] = [cell_label(r) for r in rows.itertuples()]
    rows["_rank"] = rows["step"].map(step_rank)
    return rows.sort_values(["arm", "_rank", "direction"]).reindex(columns=CELL_COLUMNS).reset_index(drop=True)


def efficiency_matrix(cells: pd.DataFrame, value: str = "shade") -> pd.DataFrame:
    """Arm x (step, direction) of one column of efficiency_cells, steps in cycle order."""
    if cells.empty:
        return pd.DataFrame()
    matrix = cells.pivot(index="arm", columns=["step", "direction"], values=value)
    steps = sorted(set(matrix.columns.get_level_values(0)), key=step_rank)
    return matrix[[(s, d) for s in steps for d in DIRECTIONS if (s, d) in matrix.columns]]


def efficiency_heatmap(efficiency: pd.DataFrame | None, paths, title: str) -> None:
    """Arm x step x direction, each step's MiB/s over its paired replay's: timed cells coloured on a log scale
    centred on 1.0 (white) with the ratio and its band; not-timed cells hatched grey, never coloured."""
    cells = efficiency_cells(efficiency)
    shade, labels = efficiency_matrix(cells), efficiency_matrix(cells, "label")
    timed = efficiency_matrix(cells, "timed")
    n_rows, n_cols = max(len(shade), 1), max(shade.shape[1], 2)
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * n_cols + 3), 0.85 * n_rows + 2.8))
    if shade.empty:
        empty_panel(ax, "no efficiency against a replay (benchmarks off or no replay)")
    else:
        data = np.ma.masked_invalid(shade.to_numpy(dtype=float))
        mesh = ax.pcolormesh(data, cmap="RdBu", vmin=-HEATMAP_LIMIT, vmax=HEATMAP_LIMIT, edgecolors="white",
                             linewidth=1.5)
        bar = fig.colorbar(mesh, ax=ax, ticks=range(-HEATMAP_LIMIT, HEATMAP_LIMIT + 1), pad=0.02)
        bar.set_ticklabels(["1/4", "1/2", "1", "2", "4"])
        bar.set_label("step MiB/s / replay MiB/s (log scale)")
        for (y, x), text in np.ndenumerate(labels.to_numpy(dtype=object)):
            if not isinstance(text, str):
                ax.text(x + 0.5, y + 0.5, "no replay", ha="center", va="center", fontsize=7, color="grey")
                continue
            if not timed.iat[y, x]:
                ax.add_patch(matplotlib.patches.Rectangle((x, y), 1, 1, facecolor=NOT_TIMED_COLOR, hatch="///",
                                                          edgecolor="white", linewidth=1.5))
            strong = np.ma.is_masked(data[y, x]) is False and abs(data[y, x]) > 1.2
            ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=9.5,
                    color="white" if strong else "black", fontstyle="normal" if timed.iat[y, x] else "italic")
        ax.set_xticks(np.arange(shade.shape[1]) + 0.5, [f"{s}\n{d}" for s, d in shade.columns])
        ax.set_yticks(np.arange(len(shade)) + 0.5, list(shade.index))
        ax.set_ylim(len(shade), 0)
        ax.set(xlabel="step and direction", ylabel="arm")
        ax.tick_params(length=0)
        fig.text(0.01, 0.01, "in a cell: the ratio, below it the band (the step over the replay's fastest and slowest "
                 "repetition).  = at the tier's speed,  ≈ within noise (only tinted);\nred: slower than the tier, blue: faster "
                 "than the replay.  Hatched grey: not timed (too few bytes or too short to time; its ratio means "
                 "nothing), or no fair reference on this machine (performance.md).", fontsize=7.5, color="#333333", va="bottom")
    ax.set_title(f"{title}\nHow close each step comes to a replay of its own files on the same tier", fontsize=11)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    save_figure(fig, paths)


# ------------------------------------------------------------------------------------------------ io gap

GAP_COLORS = {"tier_best_s": "#4C72B0", "pattern_s": "#DD8452", "cycleio_s": "#C44E52", "replay_s": "#9A9A9A"}
GAP_LABELS = {"tier_best_s": "the tier at its best (its best pattern, or the replay where faster)", "pattern_s": "the step's file pattern (replay - best)",
              "cycleio_s": "cycleio (step - replay)", "replay_s": "replay, the tier's best not measured"}


def gap_segments(row) -> list[dict]:
    """The stacked bar of one io_gap row: per part (GAP_LABELS) where it starts, its seconds and where its band's
    error bar reaches (``x_low``, ``x_high``: the stack's end with the part at its band's edges). Where the tier's
    best pattern was not measured, the replay is one part; where the replay beat it (the pattern's whole band below
    zero), the replay is the tier at its best, as closeness.gap_sentence says; with no replay, no part."""
    if pd.isna(row.replay_s):
        return []
    # (the part shown, the row's column for its seconds, its band's columns)
    parts = [("tier_best_s", "tier_best_s", None, None), ("pattern_s", "pattern_s", "pattern_s_low", "pattern_s_high")]
    if pd.isna(row.tier_best_s):
        parts = [("replay_s", "replay_s", "replay_s_low", "replay_s_high")]
    elif pd.notna(row.pattern_s_high) and row.pattern_s_high < 0:
        parts = [("tier_best_s", "replay_s", "replay_s_low", "replay_s_high")]
    segments, left = [], 0.0
    for part, column, low, high in [*parts, ("cycleio_s", "cycleio_s", "cycleio_s_low", "cycleio_s_high")]:
        width = getattr(row, column)
        if pd.isna(width):
            continue
        band = [getattr(row, low) if low else math.nan, getattr(row, high) if high else math.nan]
        segments.append({"part": part, "left": left, "seconds": float(width),
                         "x_low": left + band[0], "x_high": left + band[1]})
        left += float(width)
    return segments


def io_gap_figure(io_gap: pd.DataFrame | None, paths, title: str) -> None:
    """Per arm, for each timed step and direction, its storage seconds per job as a stacked bar: the tier at its
    best pattern, what the step's file pattern adds, what cycleio adds (error bars: the bands); a diamond at the
    step's own seconds. A part below zero (a step that beat its replay) draws no bar back over the others: its
    error bar and the diamond show it, and the row's note says by how much."""
    rows = io_gap_rows(io_gap)
    arms = list(dict.fromkeys(rows["arm"])) if not rows.empty else []
    heights = [0.6 * max((rows["arm"] == arm).sum(), 1) + 1.3 for arm in arms] or [3.0]
    fig, axes = plt.subplots(len(heights), 1, figsize=(11, sum(heights) + 1.4), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    axes = axes[:, 0]
    if not arms:
        empty_panel(axes[0], "no timed step paired with a replay (benchmarks off, or no step moved enough to time)")
    for ax, arm in zip(axes, arms):
        mine = rows[rows["arm"] == arm].reset_index(drop=True)
        ends, notes = [0.0], []
        for y, row in enumerate(mine.itertuples()):
            segments = gap_segments(row)
            for seg in segments:
                ax.barh(y, max(seg["seconds"], 0.0), left=seg["left"], height=0.6, color=GAP_COLORS[seg["part"]],
                        edgecolor="white", linewidth=0.8)
                end = seg["left"] + seg["seconds"]
                if pd.notna(seg["x_low"]) and pd.notna(seg["x_high"]):
                    ax.errorbar(end, y, xerr=[[max(end - seg["x_low"], 0)], [max(seg["x_high"] - end, 0)]],
                                fmt="none", ecolor="black", elinewidth=1, capsize=3)
                ends += [seg["left"], end, seg["x_high"] if pd.notna(seg["x_high"]) else end]
            ax.plot(row.step_s, y, marker="D", color="black", markersize=6, linestyle="none")
            ends.append(row.step_s)
            segment_end = max([row.step_s, *(s["left"] + max(s["seconds"], 0.0) for s in segments)])
            best = "" if pd.isna(row.tier_best_s) else (
                f"; tier's best: {row.best_reference}, {format_rate(row.best_MiB_per_s)}")
            under = (f", {format_seconds(-row.cycleio_s)} under its replay"
                     if pd.notna(row.cycleio_s) and row.cycleio_s < 0 else "")
            notes.append((segment_end, f"  step {format_seconds(row.step_s)}{under}{best}"))
        right = max(ends) * 1.45 if max(ends) > 0 else 1.0
        for y, row in enumerate(mine.itertuples()):
            for seg in gap_segments(row):
                if seg["seconds"] > 0.07 * right:
                    ax.text(seg["left"] + seg["seconds"] / 2, y, format_seconds(seg["seconds"], ""), ha="center",
                            va="center", fontsize=8, color="white")
            ax.text(notes[y][0], y + 0.32, notes[y][1], va="center", fontsize=7.5, color="#333333")
        labels = [f"{r.step} {r.direction}\n{r.bytes_per_job / MiB:,.0f} MiB, {r.files_per_job:,.0f} files"
                  for r in mine.itertuples()]
        ax.set_yticks(range(len(mine)), labels, fontsize=8)
        ax.set_ylim(len(mine) - 0.4, -0.6)
        ax.set_xlim(min(0.0, min(ends) * 1.1), right)
        ax.axvline(0, color="black", linewidth=0.6)
        tier = ", ".join(dict.fromkeys(mine["tier"].astype(str)))
        ax.set_title(f"arm {arm} (tier {tier})", fontsize=10, loc="left")
        ax.set_xlabel("storage seconds per job (mean over the jobs paired with a replay)")
        ax.grid(axis="x", alpha=0.3)
    handles = [matplotlib.patches.Patch(color=GAP_COLORS[p], label=GAP_LABELS[p]) for p in GAP_COLORS]
    handles += [matplotlib.lines.Line2D([], [], marker="D", color="black", linestyle="none",
                                        label="the step's own storage seconds")]
    every_arm = dict.fromkeys(io_gap["arm"]) if io_gap is not None and not io_gap.empty else {}
    hidden = [arm for arm in every_arm if arm not in arms]
    # an arm the reader looks for and finds no panel of: the legend's title says why
    note = (f"not shown: arm{'s' if len(hidden) > 1 else ''} {', '.join(hidden)} (no paired step timed: too little "
            "to time, or no fair reference on this machine; docs/performance.md)") if hidden else None
    if arms:
        fig.legend(handles=handles, loc="lower center", ncol=3, fontsize="small", frameon=False, title=note,
                   title_fontsize="small")
    fig.suptitle(f"{title}\nWhere a step's storage seconds go: the tier, the file pattern, cycleio "
                 "(error bars: the replay's fastest to slowest repetition)", fontsize=11)
    fig.tight_layout(rect=(0, 0.75 / (sum(heights) + 1.4), 1, 1))
    save_figure(fig, paths)
