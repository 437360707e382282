"""Records to tidy tables: one row per observation, one column per variable, units in names."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from ..intervals import covered_per_group
from ..fsutil import landing, write_table
from ..records import cycle_records, read_record_table, read_records, record_schema, replay_records
from ..units import MiB

# sync: making a batch of copies durable, then renaming; combine: per_rank pieces into one file
# rename: landing a written file safely (rename and directory sync), cycleio's own durability
# meta: a replay job's metadata calls as its Darshan log has them (opens, stats, seeks, fsyncs)
IO_OPS = ("read", "write", "copy", "sync", "checksum", "combine", "rename", "meta")
COMPUTE_OPS = ("compute",)  # the model's compute stand-in
# The surrogates' own CPU work, kept apart from storage time: making synthetic data, codec work
# (BitRound, shuffle, zlib, GRIB2 packing; inflating on read) and netCDF metadata (building a
# file's structure when writing, finding its chunks when reading).
CPU_OPS = {"generate": "generate_s", "encode": "codec_s", "decode": "codec_s", "define": "metadata_s",
           "locate": "metadata_s"}
PHASE_COLUMNS = ("stage_in", "run", "stage_out", "verify", "cleanup", "archive")  # archive: the arch job's
EVENT_ORDER = ("arm", "cycle", "step", "t_start")
CYCLE_TABLE_COLUMNS = ["study", "arm", "cycle", "step", "phase", "op", "tool", "tier", "fs_type", "host", "bytes",
                       "seconds", "t_start", "t_end"]  # what step_summary, phase_throughput and staging_table read


def load_events(record_files: list[str | Path]) -> pd.DataFrame:
    tables = [read_record_table(path) for path in record_files]
    records = pa.concat_tables(tables) if tables else record_schema().empty_table()
    # Arrow's sort is stable, as pandas' kind="stable", and keeps nulls last, as pandas does NaN.
    events = records.sort_by([(key, "ascending") for key in EVENT_ORDER]).to_pandas()
    events["MiB"] = events["bytes"] / MiB
    events["MiB_per_s"] = (events["MiB"] / events["seconds"]).where(events["seconds"] > 0)
    events["t_end"] = events["t_start"] + events["seconds"]
    return events


def group_codes(groups: pd.api.typing.DataFrameGroupBy) -> np.ndarray:
    """Each row's group number in the (sorted) order of the groups; -1 for rows with a missing key."""
    return groups.ngroup().fillna(-1).to_numpy(dtype=np.int64)


def step_summary(events: pd.DataFrame, replays: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per study x arm x cycle x step: wall, phase and I/O seconds, bytes, I/O share and MiB/s.

    ``events``: the cycles' records (records.cycle_records). Seconds are covered time: what a job's events
    of a kind overlap (parallel copies, ranks writing at once) counts once. ``replays``: the paired replays'
    records (records.replay_records); the time they cover inside a job is the instrument's, not the job's:
    it is left out of ``wall_s`` and shown as ``paired_replay_s``.
    """
    keys = ["study", "arm", "cycle", "step"]
    groups = events.groupby(keys, sort=True)
    out = groups.agg(
        t_start=("t_start", "min"),
        t_end=("t_end", "max"),
    )
    # Each event's row of out: the many subsets below are grouped by this number, not by four strings.
    job = group_codes(groups)
    t_start, t_end = events["t_start"].to_numpy(), events["t_end"].to_numpy()
    phase, op = events["phase"], events["op"]

    def covered(mask: pd.Series) -> np.ndarray:
        mask = mask.to_numpy()
        return covered_per_group(job[mask], t_start[mask], t_end[mask], len(out))

    def summed(column: str, mask: pd.Series) -> np.ndarray:
        """Per job, the column's sum over the masked events; NaN for a job without any."""
        mask = mask.to_numpy() & (job >= 0)
        sums = pd.Series(events[column].to_numpy()[mask]).groupby(job[mask]).sum()
        return sums.reindex(range(len(out))).to_numpy()

    paired_replay_s = pd.Series(0.0, index=out.index)
    if replays is not None and not replays.empty:
        by_job = replays.groupby(keys, sort=True)
        covered_replay = pd.Series(covered_per_group(group_codes(by_job), replays["t_start"].to_numpy(),
                                                     replays["t_end"].to_numpy(), by_job.ngroups),
                                   index=by_job.size().index)
        paired_replay_s = covered_replay.reindex(out.index).fillna(0.0)
        # the job's span covers its replay too (after its last event, or between its run and stage_out)
        out["t_start"] = np.fmin(out["t_start"], by_job["t_start"].min().reindex(out.index))
        out["t_end"] = np.fmax(out["t_end"], by_job["t_end"].max().reindex(out.index))
    out["wall_s"] = out["t_end"] - out["t_start"] - paired_replay_s
    for name in PHASE_COLUMNS:
        out[f"{name}_s"] = covered(phase == name)
    # the stage-out's copies and its checksums run side by side (streams): their time together, counted once
    out["stage_out_verify_s"] = covered(phase.isin(["stage_out", "verify"]))
    out["io_s"] = covered(op.isin(IO_OPS))
    out["run_io_s"] = covered((phase == "run") & op.isin(IO_OPS))
    out["compute_s"] = covered(op.isin(COMPUTE_OPS))
    cpu_columns = sorted(set(CPU_OPS.values()))
    for column in cpu_columns:
        out[column] = covered(op.isin([name for name, cpu_column in CPU_OPS.items() if cpu_column == column]))
    out["staging_s"] = out["stage_in_s"] + out["stage_out_s"]
    out["io_fraction"] = (out["io_s"] / out["wall_s"]).where(out["wall_s"] > 0)

    run_writes = (phase == "run") & (op == "write")
    out["bytes_read"] = summed("bytes", (phase == "run") & (op == "read"))
    out["bytes_written"] = summed("bytes", run_writes)
    out["bytes_staged_in"] = summed("bytes", phase == "stage_in")
    out["bytes_staged_out"] = summed("bytes", phase == "stage_out")
    out["bytes_archived"] = summed("bytes", (phase == "archive") & (op == "write"))  # tarballs on the archive tier
    byte_cols = ["bytes_read", "bytes_written", "bytes_staged_in", "bytes_staged_out", "bytes_archived"]
    out[byte_cols] = out[byte_cols].fillna(0).astype("int64")
    write_s = summed("seconds", run_writes)
    out["write_MiB_per_s"] = (out["bytes_written"] / MiB / write_s).where(write_s > 0)
    staged_s = out["stage_in_s"] + out["stage_out_s"]
    out["staging_MiB_per_s"] = ((out["bytes_staged_in"] + out["bytes_staged_out"]) / MiB / staged_s).where(staged_s > 0)
    out["paired_replay_s"] = paired_replay_s
    return out.drop(columns=["t_end"]).reset_index()


def phase_throughput(events: pd.DataFrame) -> pd.DataFrame:
    """MiB/s per arm, tier and phase:op: total bytes over the time the cycles' I/O events cover.

    ``events``: the cycles' records (records.cycle_records), as for step_summary and staging_table.
    Parallel copies overlap, so the covered time, not the sum of the events' seconds, divides the bytes.
    """
    columns = ["study", "arm", "tier", "phase", "op", "bytes", "seconds", "t_start", "t_end"]
    io = events.loc[events["op"].isin(IO_OPS), columns]
    # A batch's sync belongs to copying: a copy is done when it is durable under its final name.
    io["activity"] = io["phase"] + ":" + io["op"].replace({"sync": "copy"})
    keys = ["study", "arm", "tier", "activity"]
    groups = io.groupby(keys, sort=True)
    table = groups.agg(bytes=("bytes", "sum"), summed_s=("seconds", "sum"), n_events=("bytes", "size"))
    table["seconds"] = covered_per_group(group_codes(groups), io["t_start"].to_numpy(), io["t_end"].to_numpy(),
                                         len(table))
    table["MiB_per_s"] = (table["bytes"] / MiB / table["seconds"]).where(table["seconds"] > 0)
    return table.reset_index()


def staging_table(events: pd.DataFrame) -> pd.DataFrame:
    """Per arm, cycle, job, direction and node: files, bytes, seconds and MiB/s of the copies, by method. A job
    over several nodes stages on each (runner.nodes): a row per node, so the slowest node shows."""
    copies = events[events["phase"].isin(["stage_in", "stage_out"]) & events["op"].isin(["copy", "sync"])]
    keys = ["study", "arm", "cycle", "step", "phase", "host", "tool", "tier", "fs_type"]
    table = copies.groupby(keys, sort=True).agg(
        n_files=("op", lambda ops: int((ops == "copy").sum())), bytes=("bytes", "sum"), copy_s=("seconds", "sum"),
        t_start=("t_start", "min"), t_end=("t_end", "max"),
    )
    table["wall_s"] = table["t_end"] - table["t_start"]
    # Parallel streams overlap copies: wall time, not the sum, gives the achieved rate.
    table["MiB_per_s"] = (table["bytes"] / MiB / table["wall_s"]).where(table["wall_s"] > 0)
    return table.drop(columns=["t_end"]).reset_index().rename(
        columns={"host": "node", "tool": "method", "tier": "dest_tier", "fs_type": "dest_fs_type"})


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
                         "host": manifest["provenance"].get("host"),
                         "free_page_reporting": manifest["provenance"].get("free_page_reporting"), **tier})
    return pd.DataFrame(rows)


RETRY_COLUMNS = ["study", "arm", "cycle", "step", "attempt", "failed_in_phase", "host", "t_start", "seconds",
                 "bytes_moved", "succeeded_on_attempt"]


def failed_attempt_files(arms_dir: Path) -> list[Path]:
    """The records kept of failed attempts (runner.manifest): <arm>/<cycle>/<job>.failed-attempts/attemptN.PID.records.jsonl."""
    return sorted(Path(arms_dir).glob("**/*.failed-attempts/attempt*.records.jsonl"))


def retries_table(failed_files: list[Path], events: pd.DataFrame) -> pd.DataFrame:
    """One row per failed attempt of a job: the phase it failed in (its ``failed`` record), when, for how
    long, the bytes it had moved, and the attempt that then succeeded (from ``events``; empty if none did)."""
    rows = []
    for path in failed_files:
        records = pd.DataFrame(read_records(path))
        failed = records[records["op"] == "failed"]
        if failed.empty:
            continue
        end = failed.iloc[-1]
        rows.append({key: end.get(key) for key in ("study", "arm", "cycle", "step", "attempt", "host", "t_start",
                                                   "seconds")}
                    | {"failed_in_phase": end["phase"],
                       "bytes_moved": int(records.loc[records["op"].isin(["read", "write", "copy"]), "bytes"].sum())})
    table = pd.DataFrame(rows, columns=[c for c in RETRY_COLUMNS if c != "succeeded_on_attempt"])
    if "attempt" in events and not table.empty:
        done = events.groupby(["arm", "cycle", "step"])["attempt"].max().rename("succeeded_on_attempt").reset_index()
        table = table.merge(done, on=["arm", "cycle", "step"], how="left")
    else:
        table["succeeded_on_attempt"] = pd.Series(dtype="Int64")
    return table[RETRY_COLUMNS].sort_values(["arm", "cycle", "step", "attempt"], kind="stable")


@dataclass(frozen=True)
class StudyTables:
    """Where ``aggregate`` writes each table: the rule names every file (rules/report.smk)."""

    events: Path  # every record, Parquet
    events_csv: Path  # the same, CSV
    summary: Path  # step_summary
    throughput: Path  # phase_throughput
    staging: Path  # staging
    tiers: Path  # tiers (from the manifests)
    retries: Path | None = None  # the failed attempts, read from arms_dir
    arms_dir: Path | None = None  # where the jobs keep failed attempts' records


def _write_events(table: pa.Table, tables: StudyTables) -> None:
    """Every event, as parquet and as CSV (Arrow's writer: pandas' takes seconds per million rows)."""
    with landing(Path(tables.events)) as tmp:
        pq.write_table(table, tmp)
    with landing(Path(tables.events_csv)) as tmp:
        pa_csv.write_csv(table, tmp)


def aggregate(record_files: list[str | Path], tables: StudyTables, manifest_files: list[str | Path] = ()) -> None:
    """Turn the jobs' records into the study's tables; the manifests give the tiers table."""
    events = load_events(record_files)
    if events.empty:
        raise ValueError("no records to aggregate: the study has produced no record files yet")
    # The cycles' own jobs, with the columns their tables read: copying file names and the like would be waste.
    cycle_events = cycle_records(events)[CYCLE_TABLE_COLUMNS]
    with ThreadPoolExecutor(1) as background:
        # The files of every event take longest, mostly in Arrow code that releases the GIL (and in fsync): they
        # are written while pandas makes the summaries, from an Arrow table made here.
        events_written = background.submit(_write_events, pa.Table.from_pandas(events, preserve_index=False), tables)
        frames = {
            tables.summary: step_summary(cycle_events, replay_records(events)[CYCLE_TABLE_COLUMNS]),
            tables.throughput: phase_throughput(cycle_events),
            tables.staging: staging_table(cycle_events),
            tables.tiers: tiers_table([Path(path) for path in manifest_files]),
        }
        if tables.retries is not None:
            failed = failed_attempt_files(tables.arms_dir) if tables.arms_dir is not None else []
            frames[tables.retries] = retries_table(failed, events)
        for path, frame in frames.items():
            write_table(frame, Path(path))
        events_written.result()
