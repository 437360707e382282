"""A linear model of each tier: bandwidth against tasks rises as a line, then stays on a plateau;
and the capacity plan it gives for a target resolution and cadence.

Model: ``bw(n) = min(slope * n, plateau)`` (MiB/s; each task adds ``slope`` until the tier saturates at
``plateau``; the knee is ``plateau / slope`` tasks). Fitted by least squares over every split of the task
counts into a rising part and a plateau part; where no point lies on the plateau, the plateau is not
reached (``plateau_reached`` False) and is at least the best measured bandwidth.

Client nodes (config benchmarks.nodes; a Lustre is measured from a few to a dozen client nodes, each with 1 to 32
tasks): each node count gets its own fit, over its points' tasks on all its nodes (``nodes_measured`` is the
fit's node count); the plan divides the plateau of the fit at the most nodes by its nodes (a tier that scales with
its clients, as Lustre often does, gives the same per node at every count: the fit lines say how it did).

Only timed points are fitted (benchmarks.csv ``timed``: enough bytes and seconds to time, the threshold of
benchmarks.threshold.TimedThreshold); with fewer than MIN_TIMED_POINTS of them no slope, plateau or bound is claimed
(``fit`` says "too few timed points").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..records import ARRIVALS
from ..units import MiB, format_bytes

FIT_COLUMNS = ["tier", "tier_kind", "pattern", "operation", "fit", "n_points", "n_untimed", "tasks_measured",
               "nodes_measured", "slope_MiB_per_s_per_task", "plateau_MiB_per_s", "plateau_reached", "knee_tasks",
               "rmse_MiB_per_s", "relative_error"]
# A line and a plateau from fewer points than this say nothing (two points fit any line, one a bound).
MIN_TIMED_POINTS = 3
FITTED = "fitted"
TOO_FEW = "too few timed points"
# What the plan counts per tier kind when config plan.units does not say: the benchmarks' client nodes
# (`nodes_measured`), each with the tier as it was measured behind it.
UNIT_NAMES = {"lustre": "client nodes", "burst_buffer": "burst-buffer nodes", "node_local": "nodes (local disks)",
              "memory": "nodes (memory)", "posix": "client nodes"}


@dataclass(frozen=True)
class PlateauFit:
    slope: float  # MiB/s per task on the rising part
    plateau: float  # MiB/s; the best measured mean where not reached
    plateau_reached: bool
    rmse: float  # MiB/s, over the points
    n_points: int

    @property
    def knee(self) -> float:
        return self.plateau / self.slope if self.slope > 0 else math.nan

    @property
    def relative_error(self) -> float:
        return self.rmse / self.plateau if self.plateau > 0 else math.nan


def fit_linear_plateau(tasks, bandwidth) -> PlateauFit:
    """Least-squares fit of min(slope * n, plateau) to points (n, bandwidth); several points per n allowed."""
    n = np.asarray(tasks, dtype=float)
    y = np.asarray(bandwidth, dtype=float)
    keep = np.isfinite(n) & np.isfinite(y) & (n > 0)
    n, y = n[keep], y[keep]
    if len(n) == 0:
        raise ValueError("no points to fit")
    levels = np.unique(n)
    best = None
    # split k: task counts levels[:k] rise, levels[k:] are on the plateau (k >= 1: the line needs a point)
    for k in range(1, len(levels) + 1):
        rising = n <= levels[k - 1]
        slope = float((n[rising] * y[rising]).sum() / (n[rising] ** 2).sum())
        if k < len(levels):
            plateau = float(y[~rising].mean())
            # the plateau lies clearly below the line where it starts (below its last point too: contention)
            if plateau > slope * levels[k] * 0.98:
                continue
            reached = True
        else:
            plateau = float(max(y.max(), slope * levels[-1]))
            reached = False
        residual = y - np.minimum(slope * n, plateau)
        sse = float((residual ** 2).sum())
        if best is None or sse < best[0] - 1e-12 * max(1.0, sse):
            best = (sse, slope, plateau, reached)
    sse, slope, plateau, reached = best
    return PlateauFit(slope=slope, plateau=plateau, plateau_reached=reached, rmse=math.sqrt(sse / len(n)),
                      n_points=len(n))


def fit_table(benchmarks: pd.DataFrame) -> pd.DataFrame:
    """One fit per tier x io pattern x operation x client nodes, over every timed repetition's bandwidth (rows ``rep``; the
    means where a tool gave no repetitions). Points too small to time (``timed`` False; a table without the
    column counts all as timed) are left out and counted (``n_untimed``); with fewer than MIN_TIMED_POINTS
    timed points the row says so in ``fit`` and its model columns are empty."""
    io = benchmarks[(benchmarks["benchmark"] == "io") & benchmarks["bw_MiB_per_s"].notna()].copy()
    # a blank count (tables from before nodes were swept) is one node
    io["_nodes"] = pd.to_numeric(io["nodes"], errors="coerce").fillna(1).astype(int) if "nodes" in io else 1
    rows = []
    for (tier, pattern, operation, nodes), group in io.groupby(["tier", "pattern", "operation", "_nodes"], sort=True):
        points = group[group["aggregate"] == "rep"]
        if points.empty:
            points = group[group["aggregate"] == "mean"]
        if points.empty:
            continue
        timed = points["timed"].astype(bool) if "timed" in points else pd.Series(True, index=points.index)
        measured, points = points, points[timed]
        row = {"tier": tier, "tier_kind": group["tier_kind"].dropna().iloc[0] if group["tier_kind"].notna().any()
               else None, "pattern": pattern, "operation": operation, "n_points": len(points),
               "n_untimed": int((~timed).sum()),
               "tasks_measured": " ".join(str(int(t)) for t in sorted(set(measured["tasks"]))),
               "nodes_measured": int(nodes)}
        if len(points) < MIN_TIMED_POINTS:
            rows.append({**row, "fit": TOO_FEW})
            continue
        fit = fit_linear_plateau(points["tasks"].astype(float), points["bw_MiB_per_s"].astype(float))
        rows.append({**row, "fit": FITTED, "tasks_measured": " ".join(str(int(t)) for t in sorted(set(points["tasks"]))),
                     "slope_MiB_per_s_per_task": fit.slope, "plateau_MiB_per_s": fit.plateau,
                     "plateau_reached": fit.plateau_reached, "knee_tasks": fit.knee, "rmse_MiB_per_s": fit.rmse,
                     "relative_error": fit.relative_error})
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


def fitted(fits: pd.DataFrame) -> pd.Series:
    """Which rows of a fit table carry a model (tables from before the ``fit`` column all do)."""
    if "fit" not in fits:
        return pd.Series(True, index=fits.index)
    return (fits["fit"] == FITTED).astype(bool)


def _named_together(names: list[tuple[str, str, str]]) -> str:
    """``(tier, pattern, operation)`` triples in few words: "lustre and shm easy read and write" when they are
    every tier with every operation of one pattern, else each triple in turn."""
    tiers = list(dict.fromkeys(n[0] for n in names))
    patterns = list(dict.fromkeys(n[1] for n in names))
    operations = list(dict.fromkeys(n[2] for n in names))
    if len(patterns) == 1 and len(names) == len(tiers) * len(operations) == len(set(names)):
        return f"{_and(tiers)} {patterns[0]} {_and(operations)}"
    return ", ".join(" ".join(n) for n in names)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def fit_lines(fits: pd.DataFrame) -> list[str]:
    """The fits in words, one line each (printed and logged); fits left out for the same want of timed points
    share a line; a fit at more than one node says so, and where a tier was fitted at several node counts a
    line says how its plateau grew with them (:func:`node_lines`)."""
    lines, unfitted = [], {}
    for row, has_model in zip(fits.itertuples(), fitted(fits)):
        untimed = int(getattr(row, "n_untimed", 0) or 0)
        if not has_model:
            tasks = " and ".join(str(row.tasks_measured).split())
            why = (row.pattern, row.n_points, row.n_points + untimed, tasks)
            if why not in unfitted:
                lines.append(why)  # its place in the order; filled in below
            unfitted.setdefault(why, []).append((row.tier, row.pattern, row.operation))
            continue
        measured = str(row.tasks_measured).split()
        first, last = int(measured[0]), int(measured[-1])
        if not row.plateau_reached:
            plateau = f"no plateau reached up to {last} tasks (>= {row.plateau_MiB_per_s:.0f} MiB/s)"
        elif row.knee_tasks <= first:
            plateau = f"flat at {row.plateau_MiB_per_s:.0f} MiB/s from {first} task(s) on (no rise measured)"
        else:
            plateau = f"plateau {row.plateau_MiB_per_s:.0f} MiB/s from {row.knee_tasks:.1f} tasks"
        left_out = f", {untimed} too small to time left out" if untimed else ""
        nodes = int(getattr(row, "nodes_measured", 1) or 1)
        on_nodes = f" on {nodes} nodes" if nodes > 1 else ""
        lines.append(f"{row.tier} {row.pattern} {row.operation}{on_nodes}: {row.slope_MiB_per_s_per_task:.0f} MiB/s per task, "
                     f"{plateau}; error {row.rmse_MiB_per_s:.0f} MiB/s rms ({row.relative_error:.0%}) over "
                     f"{row.n_points} timed points{left_out}")
    for index, line in enumerate(lines):
        if isinstance(line, tuple):
            _, timed, total, tasks = line
            each = " each" if len(unfitted[line]) > 1 else ""
            lines[index] = (f"{_named_together(unfitted[line])}: too few timed points, no fit ({timed} of {total} "
                            f"points{each} at {tasks} tasks moved enough bytes for long enough to time, "
                            f"{MIN_TIMED_POINTS} needed)")
    return lines + node_lines(fits)


def node_lines(fits: pd.DataFrame) -> list[str]:
    """Per tier, pattern and operation fitted at several client node counts: its plateau at each, per node, and
    what the most nodes gave over the fewest against what linear scaling with the nodes would give."""
    if "nodes_measured" not in fits:
        return []
    lines = []
    modelled = fits[fitted(fits)]
    for (tier, pattern, operation), group in modelled.groupby(["tier", "pattern", "operation"], sort=True):
        if group["nodes_measured"].nunique() < 2:
            continue
        group = group.sort_values("nodes_measured")
        each = ", ".join(f"{int(r.nodes_measured)} node{'s' if r.nodes_measured != 1 else ''} "
                         f"{r.plateau_MiB_per_s:.0f} MiB/s{'' if r.plateau_reached else ' (not reached)'}"
                         for r in group.itertuples())
        first, last = group.iloc[0], group.iloc[-1]
        gain = last["plateau_MiB_per_s"] / first["plateau_MiB_per_s"] if first["plateau_MiB_per_s"] > 0 else math.nan
        lines.append(f"{tier} {pattern} {operation} across client nodes: {each}; x{gain:.2f} for "
                     f"x{last['nodes_measured'] / first['nodes_measured']:.2f} the nodes (linear scaling would give "
                     "the same factor)")
    return lines


CAPACITY_COLUMNS = ["tier", "tier_kind", "pattern", "resolution", "interval_hours", "io_budget_fraction", "step",
                    "bytes_written", "bytes_read", "cycle_bytes", "budget_s", "needed_MiB_per_s",
                    "measured_plateau_MiB_per_s", "plateau_reached", "units_measured", "units_needed", "unit", "fit"]


def step_bytes(inventory: pd.DataFrame, summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per step of one full cycle at the target resolution: bytes written (from the inventory) and bytes read
    (the measured study's read-to-write ratio of the step times the written bytes; none where not measured)."""
    jobs = inventory[~inventory["step"].isin([*ARRIVALS, "cleanup"])].astype({"cycle": str})
    first_arm = jobs["arm"].iloc[0]
    jobs = jobs[jobs["arm"] == first_arm]
    full = jobs[jobs["cycle"] == jobs["cycle"].max()]
    written = full.groupby("step", sort=False)["expected_bytes"].sum().rename("bytes_written").reset_index()
    ratio = {}
    if summary is not None and not summary.empty:
        sums = summary.groupby("step")[["bytes_read", "bytes_written"]].sum()
        ratio = (sums["bytes_read"] / sums["bytes_written"]).where(sums["bytes_written"] > 0).dropna().to_dict()
    written["bytes_read"] = [int(round(b * ratio.get(step, 0.0))) for step, b in zip(written["step"],
                                                                                    written["bytes_written"])]
    return written


def archive_bytes(inventory: pd.DataFrame) -> int:
    """The bytes one full cycle's tarballs hold at the inventory's resolution, the ensemble's enkfgdas_grpNN.tar
    included (surrogates.archive_lists: a file in two tarballs counts twice, as it is written twice)."""
    from ..surrogates.archive_lists import in_ensemble_tarball, tarballs_of

    jobs = inventory[~inventory["step"].isin([*ARRIVALS, "cleanup"])].astype({"cycle": str})
    jobs = jobs[jobs["arm"] == jobs["arm"].iloc[0]]
    full = jobs[jobs["cycle"] == jobs["cycle"].max()]
    return int(sum(size * (len(tarballs_of(path)) + in_ensemble_tarball(path))
                   for path, size in zip(full["file"], full["expected_bytes"])))


def capacity_plan(inventory: pd.DataFrame, fits: pd.DataFrame, *, resolution: str, interval_hours: float,
                  io_budget_fraction: float, summary: pd.DataFrame | None = None,
                  units: dict[str, dict] | None = None, archive: bool = False) -> pd.DataFrame:
    """Per tier (write fits of each pattern) and step, plus a ``cycle`` row: the bandwidth that keeps a cycle's
    I/O within ``io_budget_fraction`` of the cycle interval, and the units of the measured tier it takes
    (needed / (plateau per measured unit), rounded up). ``units`` (config ``plan.units``): per tier name,
    ``name`` and ``measured``, the units the benchmarks ran on; other tiers count the benchmarks' client nodes:
    of a tier and pattern fitted at several node counts, the plan takes the fit at the most nodes (with a model
    where one has it), and assumes the tier gives as much per client node at the scale it plans for.
    ``archive``: add an ``archive`` row, the cycle's tarballs (read off the persistent tier and written to the archive),
    whose budget is the whole cycle interval: the archive runs beside the next cycle and keeps up if it finishes
    within it."""
    units = units or {}
    steps = step_bytes(inventory, summary)
    budget_s = interval_hours * 3600 * io_budget_fraction
    total = steps.sum(numeric_only=True)
    steps = pd.concat([steps, pd.DataFrame([{"step": "cycle", "bytes_written": int(total["bytes_written"]),
                                             "bytes_read": int(total["bytes_read"])}])], ignore_index=True)
    steps["cycle_bytes"] = steps["bytes_written"] + steps["bytes_read"]
    steps["budget_s"] = budget_s
    if archive:
        archived = archive_bytes(inventory)
        steps = pd.concat([steps, pd.DataFrame([{"step": "archive", "bytes_written": archived, "bytes_read": archived,
                                                 "cycle_bytes": archived, "budget_s": interval_hours * 3600.0}])],
                          ignore_index=True)
    rows = []
    for fit, has_model in zip(fits.itertuples(), fitted(fits)):
        if fit.operation != "write" or fit.Index not in _most_nodes(fits):
            continue
        unit = units.get(fit.tier, {"name": UNIT_NAMES.get(fit.tier_kind, "units as measured"),
                                    "measured": fit.nodes_measured})
        per_unit = fit.plateau_MiB_per_s / max(unit["measured"], 1) if has_model else math.nan
        for step in steps.itertuples():
            needed = step.cycle_bytes / MiB / step.budget_s
            rows.append({"tier": fit.tier, "tier_kind": fit.tier_kind, "pattern": fit.pattern,
                         "resolution": resolution, "interval_hours": interval_hours,
                         "io_budget_fraction": io_budget_fraction, "step": step.step,
                         "bytes_written": step.bytes_written, "bytes_read": step.bytes_read,
                         "cycle_bytes": step.cycle_bytes, "budget_s": step.budget_s, "needed_MiB_per_s": needed,
                         "measured_plateau_MiB_per_s": fit.plateau_MiB_per_s if has_model else math.nan,
                         "plateau_reached": bool(fit.plateau_reached) if has_model else False,
                         "units_measured": unit["measured"],
                         "units_needed": int(math.ceil(needed / per_unit - 1e-9)) if per_unit > 0 else None,
                         "fit": FITTED if has_model else TOO_FEW,
                         "unit": unit["name"]})
    return pd.DataFrame(rows, columns=CAPACITY_COLUMNS)


def _most_nodes(fits: pd.DataFrame) -> set:
    """The index of each tier and pattern's write fit at the most client nodes, among those with a model if any."""
    writes = fits[fits["operation"] == "write"].assign(_model=fitted(fits),
                                                       _nodes=fits.get("nodes_measured", pd.Series(1, index=fits.index)))
    chosen = set()
    for _, group in writes.groupby(["tier", "pattern"], sort=False):
        chosen.add(group.sort_values(["_model", "_nodes"], kind="stable").index[-1])
    return chosen


def plan_lines(plan: pd.DataFrame) -> list[str]:
    cycle = plan[plan["step"] == "cycle"]
    lines = []
    archive = plan[plan["step"] == "archive"].head(1)
    for row in archive.itertuples():
        lines.append(f"{row.resolution} every {row.interval_hours:g} h: the archive takes {format_bytes(row.bytes_written)} "
                     f"of tarballs per cycle; to keep up within the interval ({row.budget_s:.0f} s) the archive tier "
                     f"needs {row.needed_MiB_per_s:.1f} MiB/s of writes (and the persistent tier as much of reads "
                     "beside the next cycle)")
    unplanned: dict[str, list[str]] = {}
    for row in cycle.itertuples():
        need = (f"{row.resolution} every {row.interval_hours:g} h, I/O within {row.io_budget_fraction:.0%} "
                f"({row.budget_s:.0f} s): {format_bytes(row.cycle_bytes)} per cycle needs "
                f"{row.needed_MiB_per_s:.0f} MiB/s")
        head = f"{need}; tier {row.tier} ({row.pattern})"
        if getattr(row, "fit", FITTED) == TOO_FEW or pd.isna(row.measured_plateau_MiB_per_s):
            if need not in unplanned:
                lines.append(need)  # its place in the order; filled in below
            unplanned.setdefault(need, []).append(f"{row.tier} ({row.pattern})")
            continue
        needed = (f"{row.units_needed} needed" if row.plateau_reached
                  else f"at most {row.units_needed} needed (the plateau was not reached)")
        lines.append(f"{head} gives {row.measured_plateau_MiB_per_s:.0f} MiB/s; {row.unit}: {row.units_measured} "
                     f"measured, {needed}")
    for index, line in enumerate(lines):
        if line in unplanned:
            tiers = unplanned[line]
            lines[index] = (f"{line}; {'tier' if len(tiers) == 1 else 'tiers'} {', '.join(tiers)}: too few timed points "
                            "to plan (see the tiers' model)")
    return lines
