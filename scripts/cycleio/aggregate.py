"""Records to tidy tables: one row per observation, one column per variable, units in names."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .fsutil import landing
from .records import RECORD_FIELDS, read_records

MiB = 2**20
# sync: making a batch of copies durable, then renaming; combine: per_rank pieces into one file
# rename: landing a written file safely (rename and directory sync), cycleio's own durability
IO_OPS = ("read", "write", "copy", "sync", "checksum", "combine", "rename")
COMPUTE_OPS = ("compute",)  # the model's compute stand-in
# The surrogates' own CPU work, kept apart from storage time: making synthetic data, codec work
# (BitRound, shuffle, zlib, GRIB2 packing; inflating on read) and netCDF metadata (building a
# file's structure when writing, finding its chunks when reading).
CPU_OPS = {"generate": "generate_s", "encode": "codec_s", "decode": "codec_s", "define": "metadata_s",
           "locate": "metadata_s"}
ARRIVALS = ("coldstart", "dump")  # data that arrive from outside the cycle: not part of its I/O
PHASE_COLUMNS = ("stage_in", "run", "stage_out", "verify", "cleanup")


def load_events(record_files: list[str | Path]) -> pd.DataFrame:
    rows = [row for path in record_files for row in read_records(path)]
    events = pd.DataFrame(rows, columns=list(RECORD_FIELDS))
    events["MiB"] = events["bytes"] / MiB
    events["MiB_per_s"] = (events["MiB"] / events["seconds"]).where(events["seconds"] > 0)
    events["t_end"] = events["t_start"] + events["seconds"]
    return events.sort_values(["arm", "cycle", "step", "t_start"], kind="stable").reset_index(drop=True)


def covered_seconds(frame: pd.DataFrame) -> float:
    """Length of the union of the events' time intervals: overlapping (parallel) copies count once."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(zip(frame["t_start"], frame["t_end"])):
        if start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def _covered_by(events: pd.DataFrame, keys: list[str]) -> pd.Series:
    if events.empty:
        return pd.Series(dtype=float)
    return events.groupby(keys)[["t_start", "t_end"]].apply(covered_seconds)


def step_summary(events: pd.DataFrame) -> pd.DataFrame:
    """Per study x arm x cycle x step: wall, phase and I/O seconds, bytes, I/O share and MiB/s."""
    keys = ["study", "arm", "cycle", "step"]
    groups = events.groupby(keys, sort=True)
    out = groups.agg(
        t_start=("t_start", "min"),
        t_end=("t_end", "max"),
    )
    out["wall_s"] = out["t_end"] - out["t_start"]
    for phase in PHASE_COLUMNS:
        out[f"{phase}_s"] = _covered_by(events[events["phase"] == phase], keys)
    out["io_s"] = _covered_by(events[events["op"].isin(IO_OPS)], keys)
    out["run_io_s"] = _covered_by(events[(events["phase"] == "run") & events["op"].isin(IO_OPS)], keys)
    out["compute_s"] = _covered_by(events[events["op"].isin(COMPUTE_OPS)], keys)
    cpu_columns = sorted(set(CPU_OPS.values()))
    for column in cpu_columns:
        ops = [op for op, name in CPU_OPS.items() if name == column]
        out[column] = _covered_by(events[events["op"].isin(ops)], keys)
    seconds = [f"{phase}_s" for phase in PHASE_COLUMNS] + ["io_s", "run_io_s", "compute_s", *cpu_columns]
    out[seconds] = out[seconds].fillna(0.0)
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
    """MiB/s per arm, tier and phase:op: total bytes over the time the cycles' I/O events cover.

    Parallel copies overlap, so the covered time, not the sum of the events' seconds, divides the bytes.
    """
    io = events[events["op"].isin(IO_OPS) & ~events["step"].isin(ARRIVALS)].copy()
    # A batch's sync belongs to copying: a copy is done when it is durable under its final name.
    io["activity"] = io["phase"] + ":" + io["op"].replace({"sync": "copy"})
    keys = ["study", "arm", "tier", "activity"]
    table = io.groupby(keys, sort=True).agg(bytes=("bytes", "sum"), summed_s=("seconds", "sum"),
                                           n_events=("bytes", "size"))
    table["seconds"] = _covered_by(io, keys)
    table["MiB_per_s"] = (table["bytes"] / MiB / table["seconds"]).where(table["seconds"] > 0)
    return table.reset_index()


def staging_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per arm, cycle, job and direction: files, bytes, seconds and MiB/s of the copies, by method."""
    copies = events[events["phase"].isin(["stage_in", "stage_out"]) & events["op"].isin(["copy", "sync"])]
    keys = ["study", "arm", "cycle", "step", "phase", "tool", "tier", "fs_type"]
    table = copies.groupby(keys, sort=True).agg(
        n_files=("op", lambda ops: int((ops == "copy").sum())), bytes=("bytes", "sum"), copy_s=("seconds", "sum"),
        t_start=("t_start", "min"), t_end=("t_end", "max"),
    )
    table["wall_s"] = table["t_end"] - table["t_start"]
    # Parallel streams overlap copies: wall time, not the sum, gives the achieved rate.
    table["MiB_per_s"] = (table["bytes"] / MiB / table["wall_s"]).where(table["wall_s"] > 0)
    return table.drop(columns=["t_end"]).reset_index().rename(
        columns={"tool": "method", "tier": "dest_tier", "fs_type": "dest_fs_type"})


def tiers_table(manifest_files: list[Path]) -> pd.DataFrame:
    """What each arm's jobs found on their tiers (first job per arm and role): provenance of the study."""
    rows, seen = [], set()
    for path in manifest_files:
        manifest = json.loads(Path(path).read_text())
        for role, tier in manifest.get("provenance", {}).get("tiers", {}).items():
            key = (manifest["arm"], role)
            if key in seen:
                continue
            seen.add(key)
            rows.append({"study": manifest["study"], "arm": manifest["arm"], "role": role,
                         "host": manifest["provenance"].get("host"), **tier})
    return pd.DataFrame(rows)


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
    cycle_events = events[~events["step"].isin(ARRIVALS)]
    manifests = [Path(str(p).replace(".records.jsonl", ".manifest.json")) for p in record_files]
    tables = {
        "io_events.parquet": events,
        "io_events.csv": events,
        "step_summary.csv": step_summary(cycle_events),
        "phase_throughput.csv": phase_throughput(events),
        "staging.csv": staging_table(cycle_events),
        "tiers.csv": tiers_table([p for p in manifests if p.exists()]),
    }
    written = {}
    for name, frame in tables.items():
        write_table(frame, out_dir / name)
        written[name] = out_dir / name
    return written
