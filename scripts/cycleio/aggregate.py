"""Records to tidy tables: one row per observation, one column per variable, units in names."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .fsutil import landing
from .records import RECORD_FIELDS, read_records

MiB = 2**20
IO_OPS = ("read", "write", "copy", "checksum")
COMPUTE_OPS = ("compute", "generate")  # generate: making the synthetic data, not I/O
PHASE_COLUMNS = ("stage_in", "run", "stage_out", "verify", "cleanup")


def load_events(record_files: list[str | Path]) -> pd.DataFrame:
    rows = [row for path in record_files for row in read_records(path)]
    events = pd.DataFrame(rows, columns=list(RECORD_FIELDS))
    events["MiB"] = events["bytes"] / MiB
    events["MiB_per_s"] = (events["MiB"] / events["seconds"]).where(events["seconds"] > 0)
    events["t_end"] = events["t_start"] + events["seconds"]
    return events.sort_values(["arm", "cycle", "step", "t_start"], kind="stable").reset_index(drop=True)


def step_summary(events: pd.DataFrame) -> pd.DataFrame:
    """Per study x arm x cycle x step: wall, phase and I/O seconds, bytes, I/O share and MiB/s."""
    keys = ["study", "arm", "cycle", "step"]
    groups = events.groupby(keys, sort=True)
    out = groups.agg(
        t_start=("t_start", "min"),
        t_end=("t_end", "max"),
    )
    out["wall_s"] = out["t_end"] - out["t_start"]
    by_phase = events.pivot_table(index=keys, columns="phase", values="seconds", aggfunc="sum", fill_value=0.0)
    for phase in PHASE_COLUMNS:
        out[f"{phase}_s"] = by_phase[phase] if phase in by_phase else 0.0
    io = events[events["op"].isin(IO_OPS)]
    out["io_s"] = io.groupby(keys)["seconds"].sum()
    out["compute_s"] = events[events["op"].isin(COMPUTE_OPS)].groupby(keys)["seconds"].sum()
    out = out.fillna({"io_s": 0.0, "compute_s": 0.0})
    out["staging_s"] = out["stage_in_s"] + out["stage_out_s"]
    out["io_fraction"] = (out["io_s"] / out["wall_s"]).where(out["wall_s"] > 0)

    def sum_bytes(mask) -> pd.Series:
        return events[mask].groupby(keys)["bytes"].sum()

    out["bytes_read"] = sum_bytes((events["phase"] == "run") & (events["op"] == "read"))
    out["bytes_written"] = sum_bytes((events["phase"] == "run") & (events["op"] == "write"))
    out["bytes_staged_in"] = sum_bytes(events["phase"] == "stage_in")
    out["bytes_staged_out"] = sum_bytes(events["phase"] == "stage_out")
    byte_cols = ["bytes_read", "bytes_written", "bytes_staged_in", "bytes_staged_out"]
    out[byte_cols] = out[byte_cols].fillna(0).astype("int64")
    write_s = events[(events["phase"] == "run") & (events["op"] == "write")].groupby(keys)["seconds"].sum()
    out["write_MiB_per_s"] = (out["bytes_written"] / MiB / write_s).where(write_s > 0)
    staged_s = out["stage_in_s"] + out["stage_out_s"]
    out["staging_MiB_per_s"] = ((out["bytes_staged_in"] + out["bytes_staged_out"]) / MiB / staged_s).where(staged_s > 0)
    return out.drop(columns=["t_end"]).reset_index()


def phase_throughput(events: pd.DataFrame) -> pd.DataFrame:
    """MiB/s per arm, tier and phase:op: total bytes over total seconds of the cycles' I/O events."""
    io = events[events["op"].isin(IO_OPS) & (events["step"] != "coldstart")].copy()
    io["activity"] = io["phase"] + ":" + io["op"]
    table = io.groupby(["study", "arm", "tier", "activity"], sort=True).agg(
        bytes=("bytes", "sum"), seconds=("seconds", "sum"), n_events=("bytes", "size")
    )
    table["MiB_per_s"] = (table["bytes"] / MiB / table["seconds"]).where(table["seconds"] > 0)
    return table.reset_index()


def write_table(frame: pd.DataFrame, path: Path) -> None:
    with landing(path) as tmp:
        if path.suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)


def aggregate(record_files: list[str | Path], out_dir: Path) -> dict[str, Path]:
    events = load_events(record_files)
    if events.empty:
        raise ValueError("no records to aggregate: the study has produced no record files yet")
    cycle_events = events[events["step"] != "coldstart"]
    tables = {
        "io_events.parquet": events,
        "io_events.csv": events,
        "step_summary.csv": step_summary(cycle_events),
        "phase_throughput.csv": phase_throughput(events),
    }
    written = {}
    for name, frame in tables.items():
        write_table(frame, out_dir / name)
        written[name] = out_dir / name
    return written
