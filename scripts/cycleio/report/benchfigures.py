"""Benchmark figures, read only from the benchmarks table: scaling per tier and field I/O."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.lines
import matplotlib.patches
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ..units import format_bytes  # noqa: E402
from .figsave import empty_panel, save_figure  # noqa: E402
from .scaling import fitted  # noqa: E402

LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P"]
FIELDIO_ORDER = ["0A write", "0B write", "1 write", "1 read", "2B write", "2B read"]
# metadata operations in the order they happen (fio's names, then mdtest's)
METADATA_ORDER = ["create", "stat", "read", "remove", "file_creation", "file_stat", "file_read", "file_removal"]


def _tools(frame: pd.DataFrame) -> str:
    pairs = frame[["tool", "tool_version"]].drop_duplicates().itertuples(index=False)
    return ", ".join(sorted(f"{tool} {version}" if isinstance(version, str) else str(tool) for tool, version in pairs))


UNTIMED_NOTE = "hollow: too small to time (fewer bytes or seconds than benchmarks.replay.min_bytes/min_seconds)"


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    table = table.copy()
    # tables from before the column: every row counts as timed
    table["timed"] = table["timed"].fillna(True).astype(bool) if "timed" in table else True
    # client nodes of each point (a blank count, from tables before nodes were swept, is one node)
    table["nodes"] = pd.to_numeric(table["nodes"], errors="coerce").fillna(1).astype(int) if "nodes" in table else 1
    for column in ("pattern", "job", "tool_version", "api", "tier", "operation", "aggregate", "benchmark"):
        table[column] = table[column].astype("string")
    return table


def scaling_figure(table: pd.DataFrame, paths: list[Path], title: str, fits: pd.DataFrame | None = None) -> None:
    """MiB/s against tasks per tier (write, read; mean over repetitions, bars from min to max) and
    metadata operations per second per tier. ``fits`` (report.scaling.fit_table): each tier and pattern's
    linear-to-plateau model, drawn thin over its points, its plateau marked where reached. Points over several
    client nodes are series of their own (``tier / pattern, N nodes``, half-filled markers), against their
    tasks on all nodes."""
    table = _typed(table)
    sns.set_theme(style="whitegrid", context="notebook")
    md = table[(table["benchmark"] == "metadata") & (table["aggregate"] == "mean") & table["ops_per_s"].notna()]
    if md.empty:  # a study without metadata points (the default's): no empty panel
        fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    else:
        fig, axes = plt.subplots(1, 3, figsize=(17, 5.2), gridspec_kw={"width_ratios": [1, 1, 1.2]})
    io = table[table["benchmark"] == "io"]
    tiers = sorted(set(table["tier"].dropna()))
    colors = dict(zip(tiers, sns.color_palette("colorblind", max(len(tiers), 1))))
    patterns = sorted(set(io["pattern"].dropna()))
    style = {p: (LINESTYLES[i % len(LINESTYLES)], MARKERS[i % len(MARKERS)]) for i, p in enumerate(patterns)}
    untimed_seen = False
    for ax, operation in zip(axes[:2], ("write", "read")):
        rows = io[io["operation"] == operation]
        if rows.empty:
            empty_panel(ax, f"no {operation} benchmark")
            continue
        index = ["tier", "pattern", "nodes", "tasks"]
        stats = rows.pivot_table(index=index, columns="aggregate", values="bw_MiB_per_s", aggfunc="first").reset_index()
        means = rows[rows["aggregate"] == "mean"].groupby(index)["timed"].all()
        stats["timed"] = [bool(means.get(key, True)) for key in zip(*(stats[column] for column in index))]
        for (tier, pattern, nodes), group in stats.groupby(["tier", "pattern", "nodes"], sort=True):
            group = group.sort_values("tasks")
            low = (group["mean"] - group.get("min", group["mean"])).clip(lower=0)
            high = (group.get("max", group["mean"]) - group["mean"]).clip(lower=0)
            linestyle, marker = style[pattern]
            ax.errorbar(group["tasks"], group["mean"], yerr=[low, high], color=colors[tier], linestyle="none",
                        marker=marker, capsize=3, markersize=8 if nodes > 1 else 6,
                        fillstyle="top" if nodes > 1 else "full", markerfacecoloralt="white",
                        label=f"{tier} / {pattern}" + (f", {nodes} nodes" if nodes > 1 else ""))  # the lines: _join
            _join(ax, group, colors[tier], linestyle)
            hollow = group[~group["timed"].astype(bool)]
            if not hollow.empty:  # too small to time: drawn, but hollow and pale, and left out of the fits
                ax.plot(hollow["tasks"], hollow["mean"], linestyle="none", marker=marker, markersize=8,
                        markerfacecolor="white", markeredgecolor=colors[tier], zorder=3)
                untimed_seen = True
        tasks = sorted(set(int(t) for t in stats["tasks"]))
        if fits is not None and not fits.empty and _draw_fits(ax, fits[fits["operation"] == operation], colors):
            ax.plot([], [], color="grey", linewidth=5, alpha=0.3, marker="|", markersize=12,
                    label="model: min(slope x tasks, plateau), | at the knee")
        ax.set_xscale("log", base=2)
        ax.set_xticks(tasks, [str(t) for t in tasks])
        ax.minorticks_off()
        ax.set_yscale("log")
        cached = " (reads may come from the page cache)" if operation == "read" and rows["cache_risk"].any() else ""
        one_node = sorted(set(int(t) for t in stats[stats["nodes"] == 1]["tasks"]))
        xlabel = _mark_oversubscribed(ax, one_node, _host_cores(rows), tasks)
        if (stats["nodes"] > 1).any():
            xlabel += f"\nhalf-filled: {_and_nodes(stats['nodes'])}, their tasks on all nodes"
        ax.set(xlabel=xlabel, ylabel="bandwidth [MiB/s]",
               title=f"{operation}{cached}")
        ax.title.set_fontsize(10 if cached else 12)
    handles, labels = axes[0].get_legend_handles_labels()
    if untimed_seen:
        handles.append(matplotlib.lines.Line2D([], [], linestyle="none", marker="o", markerfacecolor="white",
                                               markeredgecolor="grey"))
        labels.append(UNTIMED_NOTE)
    if handles:  # the model's entry (drawn first) last
        order = sorted(range(len(labels)), key=lambda i: (labels[i].startswith("hollow"), labels[i].startswith("model")))
        handles, labels = [handles[i] for i in order], [labels[i] for i in order]
        fig.legend(handles, labels, title="tier / pattern", fontsize="small", title_fontsize="small",
                   loc="lower center", ncol=min(len(labels), 3), bbox_to_anchor=(0.35 if len(axes) == 3 else 0.5, 0.0),
                   frameon=False)

    if not md.empty:
        ax = axes[2]
        top = md[md["tasks"] == md.groupby(["tier", "pattern"])["tasks"].transform("max")].copy()
        top["what"] = top["pattern"] + ": " + top["operation"] + [f" ({n} nodes)" if n > 1 else "" for n in top["nodes"]]
        rank = {op: i for i, op in enumerate(METADATA_ORDER)}
        top["_rank"] = top["operation"].map(lambda op: rank.get(op, len(rank)))
        order = list(dict.fromkeys(top.sort_values(["pattern", "_rank", "operation"])["what"]))
        sns.barplot(data=top, x="what", y="ops_per_s", hue="tier", order=order, hue_order=tiers, palette=colors,
                    errorbar=None, ax=ax)
        md_untimed = _hollow_untimed(ax, top, "what", order, tiers, colors)
        ax.set_yscale("log")
        low = top["ops_per_s"].min()
        ax.set_ylim(bottom=10 ** np.floor(np.log10(low)) if low > 0 else None)
        task_text = ", ".join(sorted({str(int(t)) for t in top["tasks"]}))
        ax.set(xlabel="hatched: too short to time" if md_untimed else "", ylabel="operations per second",
               title=f"metadata rates ({task_text} tasks; mean)")
        ax.tick_params(axis="x", rotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
        ax.legend(title="tier", fontsize="small", title_fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(f"{title}\nmeasured with {_tools(table[table['benchmark'].isin(['io', 'metadata'])]) or '-'}")
    rows = -(-len(handles) // 3) if handles else 0
    fig.tight_layout(rect=(0, 0.04 + 0.055 * rows if handles else 0, 1, 1))
    save_figure(fig, paths)


def _host_cores(rows: pd.DataFrame) -> int | None:
    """The fewest cores of the machines the rows were measured on (tables from before the column: unknown)."""
    if "host_cores" not in rows or rows["host_cores"].isna().all():
        return None
    return int(rows["host_cores"].min())


def _and_nodes(nodes: pd.Series) -> str:
    counts = sorted({int(n) for n in nodes if n > 1})
    return (" and ".join(str(n) for n in counts)) + " nodes"


def _mark_oversubscribed(ax, tasks: list[int], cores: int | None, shown: list[int] | None = None) -> str:
    """Shade the task counts on one node above the machine's cores (those points oversubscribe it: their tasks
    share cores) and say so; the axis label to use. ``shown``: every task count on the axis (several nodes' too)."""
    shown = shown or tasks
    if cores is None or not tasks:
        return "tasks"
    over = [t for t in tasks if t > cores]
    n_cores = f"{cores} core{'s' if cores != 1 else ''}"
    if not over:
        return f"tasks (the machine has {n_cores})"
    within = [t for t in tasks if t <= cores]
    start = (max(within) * min(over)) ** 0.5 if within else min(over) / 2 ** 0.5
    ax.axvspan(start, max(over) * 2 ** 0.5, color="grey", alpha=0.12, zorder=0, linewidth=0)
    ax.set_xlim(min(shown) / 2 ** 0.5, max(shown) * 2 ** 0.5)
    ax.text(0.99, 0.02, f"oversubscribed:\nmore tasks than\nthe {n_cores}", transform=ax.transAxes,
            ha="right", va="bottom", fontsize="small", color="dimgrey")
    return f"tasks ({n_cores}; shaded: oversubscribed)"


def _join(ax, group: pd.DataFrame, color, linestyle: str) -> None:
    """Lines between a tier's points: drawn as measured between two timed points, faint and dotted where either
    end was too small to time (no trend is claimed from it)."""
    tasks, means, timed = group["tasks"].to_list(), group["mean"].to_list(), group["timed"].astype(bool).to_list()
    for i in range(len(tasks) - 1):
        both = timed[i] and timed[i + 1]
        ax.plot(tasks[i:i + 2], means[i:i + 2], color=color, linestyle=linestyle if both else ":",
                alpha=1.0 if both else 0.35, zorder=2)


def _hollow_untimed(ax, rows: pd.DataFrame, x: str, order: list[str], hue_order: list[str], colors: dict) -> bool:
    """Seaborn bars (one container per tier, one bar per ``order`` entry) of untimed rows drawn hollow and
    hatched in their tier's colour. Returns whether any was."""
    untimed = {(w, t) for w, t, timed in zip(rows[x], rows["tier"], rows["timed"]) if not timed}
    tiers = [t for t in hue_order if t in set(rows["tier"])]
    hollowed = False
    for tier, container in zip(tiers, ax.containers):
        for what, bar in zip(order, container):
            if (what, tier) in untimed:
                bar.set_facecolor("none")
                bar.set_edgecolor(colors[tier])
                bar.set_hatch("///")
                hollowed = True
    return hollowed


def _draw_fits(ax, fits: pd.DataFrame, colors: dict) -> bool:
    """The model min(slope * n, plateau) of each fit measured at two task counts or more, as a thick pale line
    over the task counts it was fitted on; a reached plateau's knee marked with a short vertical tick.
    Returns whether any model was drawn."""
    drawn = False
    for row, has_model in zip(fits.itertuples(), fitted(fits)):
        measured = [int(t) for t in str(row.tasks_measured).split()]
        if not has_model or row.tier not in colors or len(measured) < 2:
            continue
        n = np.geomspace(min(measured), max(measured), 64)
        if row.plateau_reached and min(measured) < row.knee_tasks < max(measured):
            n = np.sort(np.append(n, row.knee_tasks))
        model = np.minimum(row.slope_MiB_per_s_per_task * n, row.plateau_MiB_per_s)
        ax.plot(n, model, color=colors[row.tier], linewidth=5, alpha=0.22, solid_capstyle="round", zorder=1)
        if row.plateau_reached and min(measured) < row.knee_tasks < max(measured):
            ax.plot([row.knee_tasks], [row.plateau_MiB_per_s], marker="|", markersize=12, color=colors[row.tier],
                    alpha=0.7, zorder=1)
        drawn = True
    return drawn


def fieldio_figure(table: pd.DataFrame, paths: list[Path], title: str) -> None:
    """Per field layout: field-I/O global bandwidth per access pattern and tier, beside the easy
    bandwidth pattern at the same task count (the gap to IOR), and the mean latency of one field
    operation."""
    table = _typed(table)
    sns.set_theme(style="whitegrid", context="notebook")
    fio = table[(table["benchmark"] == "fieldio") & (table["aggregate"] == "mean")].copy()
    tiers = sorted(set(table["tier"].dropna()))
    colors = dict(zip(tiers, sns.color_palette("colorblind", max(len(tiers), 1))))
    if fio.empty:
        fig, ax = plt.subplots(figsize=(8, 4))
        empty_panel(ax, "no field-I/O benchmark in this study\n(config/studies/benchmarks.yaml runs it)")
        fig.suptitle(title)
        save_figure(fig, paths)
        return
    layouts = sorted(set(fio["api"].dropna()))
    fig, axes = plt.subplots(len(layouts), 2, figsize=(15, 4.3 * len(layouts) + 1), squeeze=False,
                             gridspec_kw={"width_ratios": [4, 3]})
    tasks = int(fio["tasks"].max())
    fio = fio[fio["tasks"] == tasks]
    fio["what"] = fio["job"] + " " + fio["operation"]
    fio["latency_ms"] = fio["latency_s"] * 1e3
    io = table[(table["benchmark"] == "io") & (table["aggregate"] == "mean") & (table["tasks"] == tasks)]
    reference = sorted(set(io["pattern"].dropna()))
    ref_name = "easy" if "easy" in reference else (reference[0] if reference else None)
    compare = io[io["pattern"] == ref_name].copy() if ref_name else io.iloc[0:0].copy()
    compare["what"] = f"{ref_name} " + compare["operation"]
    field_order = [w for w in FIELDIO_ORDER if w in set(fio["what"])]
    order = field_order + ([f"{ref_name} write", f"{ref_name} read"] if not compare.empty else [])
    untimed_seen = False
    for (left, right), layout in zip(axes, layouts):
        rows = pd.concat([fio[fio["api"] == layout], compare], ignore_index=True)
        sns.barplot(data=rows, x="what", y="bw_MiB_per_s", hue="tier", order=order, hue_order=tiers, palette=colors,
                    errorbar=None, ax=left, legend=False)
        untimed_seen = _hollow_untimed(left, rows, "what", order, tiers, colors) or untimed_seen
        if not compare.empty:
            left.axvline(len(field_order) - 0.5, color="grey", linestyle="--", linewidth=1)
        left.set_yscale("log")
        left.set(xlabel="", ylabel="global bandwidth [MiB/s]",
                 title=f"{layout.replace('_', ' ')}: field I/O"
                 + (f" | {ref_name} pattern ({_tools(compare)})" if not compare.empty else "") + f", {tasks} tasks")
        sns.barplot(data=fio[fio["api"] == layout], x="what", y="latency_ms", hue="tier", order=field_order,
                    hue_order=tiers, palette=colors, errorbar=None, ax=right, legend=False)
        _hollow_untimed(right, fio[fio["api"] == layout], "what", field_order, tiers, colors)
        _decade_axis(right, fio.loc[fio["api"] == layout, "latency_ms"])
        right.set(xlabel="", ylabel="mean latency [ms]",
                  title=f"{layout.replace('_', ' ')}: one field operation, open to close")
    for ax in axes[-1]:
        ax.set_xlabel("access pattern and operation")
    handles = [matplotlib.patches.Patch(color=colors[t], label=t) for t in tiers]
    if untimed_seen:
        handles.append(matplotlib.patches.Patch(facecolor="none", edgecolor="grey", hatch="///",
                                                label=UNTIMED_NOTE.replace("hollow", "hatched")))
    fig.legend(handles=handles, title="tier", loc="lower center", ncol=len(handles), frameon=False,
               fontsize="small", title_fontsize="small")
    fields = int(fio["segments"].dropna().iloc[0]) if fio["segments"].notna().any() else None
    size = int(fio["transfer_size_bytes"].dropna().iloc[0]) if fio["transfer_size_bytes"].notna().any() else None
    detail = f"{fields} fields of {format_bytes(size)} per task" if fields and size else ""
    fig.suptitle(f"{title}\nfield I/O (0A shared key, 0B own keys, 1 write-barrier-read, 2B half write while "
                 f"half read): {detail}")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    save_figure(fig, paths)


def _decade_axis(ax, values: pd.Series) -> None:
    """A log axis over whole decades around ``values``, one plainly written label per decade (0.01, 0.1, 1, 10)
    and no minor labels, so a few decades never crowd."""
    values = values[(values > 0) & values.notna()]
    ax.set_yscale("log")
    if values.empty:
        return
    low, high = np.floor(np.log10(values.min())), np.ceil(np.log10(values.max()))
    high = max(high, low + 1)
    ax.set_ylim(10 ** low, 10 ** high)
    step = int(np.ceil((high - low + 1) / 6))  # at most about six labels
    ticks = [10.0 ** e for e in np.arange(low, high + 1, step)]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
