"""Benchmark points to tidy tables: ``benchmarks`` (every tier x pattern x tasks x operation x
repetition, with max/min/mean over repetitions) and ``efficiency`` (the surrogates' MiB/s over the
benchmarks' MiB/s on the same tier)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from ..intervals import covered_per_group
from .aggregate import group_codes, write_table
from .records import cycle_records
from ..benchmarks.common import COLUMNS
from ..units import MiB

_BOOL_COLUMNS = ("file_per_proc", "random", "direct_io", "fsync", "cache_risk")
_INT_COLUMNS = ("repetition", "repetitions", "tasks", "nodes", "transfer_size_bytes", "block_size_bytes", "segments",
                "bytes")
_FLOAT_COLUMNS = ("stonewall_s", "bw_MiB_per_s", "ops_per_s", "latency_s", "seconds", "t_start")
# The point files' columns and types (tierbench.write_rows writes them as CSV; an empty cell is null).
POINT_SCHEMA = pa.schema([(name, pa.bool_() if name in _BOOL_COLUMNS else pa.int64() if name in _INT_COLUMNS
                           else pa.float64() if name in _FLOAT_COLUMNS else pa.string()) for name in COLUMNS])
_PANDAS_TYPES = {pa.bool_(): pd.BooleanDtype(), pa.int64(): pd.Int64Dtype(), pa.string(): pd.StringDtype()}
AGGREGATE_ORDER = {"rep": 0, "max": 1, "min": 2, "mean": 3}
EFFICIENCY_COLUMNS = (
    "study", "arm", "tier", "step", "activity", "surrogate_jobs", "surrogate_bytes", "surrogate_summed_s",
    "surrogate_covered_s", "surrogate_MiB_per_s", "surrogate_cached_fraction", "reference", "reference_benchmark",
    "reference_pattern", "reference_operation", "reference_tool", "reference_tasks", "reference_from_cache",
    "reference_MiB_per_s", "efficiency",
)


def read_points(path: str | Path) -> pa.Table:
    """One point file as a table of POINT_SCHEMA (columns it lacks, from older versions, are null)."""
    # integers are read as floats and rounded: a tool may print a count as 4.0
    read_types = {f.name: pa.float64() if f.type == pa.int64() else f.type for f in POINT_SCHEMA}
    table = pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
        column_types=read_types, include_columns=list(COLUMNS), include_missing_columns=True,
        true_values=["True", "true", "1"], false_values=["False", "false", "0"], null_values=[""],
        strings_can_be_null=True))
    columns = [pc.round(column).cast(pa.int64()) if field.type == pa.int64() else column.cast(field.type)
               for field, column in zip(POINT_SCHEMA, table.columns)]
    return pa.Table.from_arrays(columns, schema=POINT_SCHEMA)


def load_points(paths: list[str | Path]) -> pd.DataFrame:
    """The rows of every benchmark point's file, in nullable pandas types."""
    tables = [read_points(path) for path in paths]
    table = pa.concat_tables(tables) if tables else POINT_SCHEMA.empty_table()
    return table.to_pandas(types_mapper=_PANDAS_TYPES.get)


def benchmark_table(points: pd.DataFrame) -> pd.DataFrame:
    order = points["aggregate"].map(AGGREGATE_ORDER).fillna(9)
    keys = ["tier", "benchmark", "pattern", "api", "tasks", "operation"]
    return (points.assign(_order=order).sort_values([*keys, "_order", "repetition"], kind="stable")
            .drop(columns="_order").reset_index(drop=True))


def _references(bench: pd.DataFrame) -> pd.DataFrame:
    """Per tier (and, for replays, step) and operation: the benchmark MiB/s a surrogate compares with.

    Replays (same files and bytes as the step), and every io pattern at 1 task (the surrogates are
    serial) and at its best task count (what the tier can do).
    """
    means = bench[(bench["aggregate"] == "mean") & bench["bw_MiB_per_s"].notna()]
    refs = []
    for row in means[means["benchmark"] == "replay"].itertuples():
        refs.append({"tier": row.tier, "step": row.pattern, "reference": "replay", "reference_benchmark": "replay",
                     "reference_pattern": row.pattern, "reference_operation": row.operation,
                     "reference_tool": row.tool, "reference_tasks": row.tasks,
                     "reference_from_cache": row.cache_risk, "reference_MiB_per_s": row.bw_MiB_per_s})
    io = means[means["benchmark"] == "io"]
    for (tier, pattern, operation), group in io.groupby(["tier", "pattern", "operation"], sort=True):
        picks = []
        single = group[group["tasks"] == 1]
        if not single.empty:
            picks.append((f"{pattern}, 1 task", single.iloc[0]))
        picks.append((f"{pattern}, best", group.loc[group["bw_MiB_per_s"].idxmax()]))
        for label, row in picks:
            refs.append({"tier": tier, "step": None, "reference": label, "reference_benchmark": "io",
                         "reference_pattern": pattern, "reference_operation": operation,
                         "reference_tool": row["tool"], "reference_tasks": row["tasks"],
                         "reference_from_cache": row["cache_risk"], "reference_MiB_per_s": row["bw_MiB_per_s"]})
    return pd.DataFrame(refs, columns=["tier", "step", "reference", "reference_benchmark", "reference_pattern",
                                       "reference_operation", "reference_tool", "reference_tasks",
                                       "reference_from_cache", "reference_MiB_per_s"])


def efficiency_table(bench: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """One row per arm x tier x step x I/O activity x reference: surrogate MiB/s over benchmark MiB/s.

    The surrogate's seconds are those of step_summary and phase_throughput: per job (arm, cycle, step), the
    time its events of the activity cover, overlapping events (parallel copies, ranks writing at once)
    once; summed over the jobs (``surrogate_covered_s``, which divides the bytes). ``surrogate_summed_s``
    adds every event's seconds up. Reads compare with reads; writes and staging copies (timed on the
    tier they land on) with writes.
    """
    events = cycle_records(events)
    io = events[events["op"].isin(["read", "write", "copy"]) & (events["bytes"] > 0)].copy()
    if io.empty:
        return pd.DataFrame(columns=list(EFFICIENCY_COLUMNS))
    io["activity"] = io["phase"] + ":" + io["op"]
    if "cached_fraction" not in io:
        io["cached_fraction"] = float("nan")
    io["cached_bytes"] = io["cached_fraction"] * io["bytes"]
    io["measured_bytes"] = io["bytes"].where(io["cached_fraction"].notna(), 0)
    keys = ["study", "arm", "tier", "step", "activity"]
    per_job = io.groupby([*keys, "cycle"], sort=True)
    jobs = per_job.agg(surrogate_bytes=("bytes", "sum"), surrogate_summed_s=("seconds", "sum"),
                       cached_bytes=("cached_bytes", "sum"), measured_bytes=("measured_bytes", "sum"))
    jobs["surrogate_covered_s"] = covered_per_group(group_codes(per_job), io["t_start"].to_numpy(),
                                                    (io["t_start"] + io["seconds"]).to_numpy(), len(jobs))
    jobs["surrogate_jobs"] = 1
    surrogate = jobs.groupby(level=keys, sort=True).sum().reset_index()
    # reads: the share of their bytes the page cache held as they began (blank where not measured)
    surrogate["surrogate_cached_fraction"] = (surrogate["cached_bytes"] / surrogate["measured_bytes"]).where(
        surrogate["measured_bytes"] > 0)
    surrogate["surrogate_MiB_per_s"] = (surrogate["surrogate_bytes"] / MiB / surrogate["surrogate_covered_s"]).where(
        surrogate["surrogate_covered_s"] > 0)
    surrogate["reference_operation"] = surrogate["activity"].map(lambda a: "read" if a.endswith(":read") else "write")
    refs = _references(bench)
    replay = refs[refs["reference"] == "replay"]
    patterns = refs[refs["reference"] != "replay"].drop(columns="step")
    run = surrogate[surrogate["activity"].str.startswith("run:")]
    merged = pd.concat([
        run.merge(replay, on=["tier", "step", "reference_operation"], how="inner"),
        surrogate.merge(patterns, on=["tier", "reference_operation"], how="inner"),
    ], ignore_index=True)
    if merged.empty:
        return pd.DataFrame(columns=list(EFFICIENCY_COLUMNS))
    merged["efficiency"] = merged["surrogate_MiB_per_s"] / merged["reference_MiB_per_s"]
    merged["reference_tasks"] = merged["reference_tasks"].astype("Int64")
    return merged.reindex(columns=list(EFFICIENCY_COLUMNS)).sort_values(
        ["arm", "tier", "step", "activity", "reference"], kind="stable").reset_index(drop=True)


def write_benchmark_tables(point_files: list[str | Path], events_path: Path, *, benchmarks_csv: Path,
                           benchmarks_parquet: Path, efficiency: Path) -> None:
    """The benchmarks table (CSV and Parquet) and the efficiency table, where the caller names them."""
    bench = benchmark_table(load_points(point_files))
    events = pd.read_parquet(events_path)
    for path, frame in ((benchmarks_parquet, bench), (benchmarks_csv, bench),
                        (efficiency, efficiency_table(bench, events))):
        write_table(frame, Path(path))
