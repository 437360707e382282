"""The surrogate against the model it stands for: a real job's Darshan log (config ``darshan.jobs.<name>.log``) beside
the Darshan logs of the GDAS step it stands for (``darshan.jobs.<name>.stands_for``), as the study ran that step under
darshan-runtime (``instruments.darshan``), measure by measure: ``tables/surrogate_vs_log.csv``.

Both sides are counted the same way, from Darshan's POSIX counters of files on storage (what the log sets apart left
out): the files read and written, the bytes and calls each way, the mean access size, the access-size histogram (the
share of each direction's calls per bin) and the share of the I/O time spent in metadata calls (open, stat, seek,
fsync, close). The surrogate's side is its run alone: the files its run phase read and wrote (its records), on the arm
that runs on the persistent tier, where nothing else of the job touches them (no stage-in copy or verification);
a file written under a temporary name counts as the file it became.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..darshan.runtime import RECORDS_SUFFIX, job_logs
from ..fsutil import final_path

if TYPE_CHECKING:
    import pandas as pd

# Darshan's access-size bins (darshan.logs.SIZE_BINS' names), here so that the Snakefile's parse, which reads
# ``requests``, loads neither pandas nor pydarshan
SIZE_BIN_NAMES = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G",
                  "1G_PLUS")

MODULE = "POSIX"
COLUMNS = ["job", "log", "step", "arm", "cycle", "measure", "unit", "surrogate", "real", "surrogate_over_real"]
MANIFEST_SUFFIX = ".manifest.json"
DIRECTION_COUNTERS = {  # the POSIX counters of one direction: left out of a file the run did not move that way
    "read": ["POSIX_READS", "POSIX_BYTES_READ", "POSIX_F_READ_TIME", *(f"POSIX_SIZE_READ_{b}" for b in SIZE_BIN_NAMES)],
    "write": ["POSIX_WRITES", "POSIX_BYTES_WRITTEN", "POSIX_F_WRITE_TIME",
              *(f"POSIX_SIZE_WRITE_{b}" for b in SIZE_BIN_NAMES)],
}


def shape(table: pd.DataFrame) -> list[tuple[str, str, float]]:
    """(measure, unit, value) of a job's POSIX records of files (``files_of``'s rows, any number of logs)."""
    from ..darshan.logs import DIRECTIONS, bytes_of, histogram_of, ops_of, seconds_of

    out: list[tuple[str, str, float]] = []
    per_file = {}
    for direction in DIRECTIONS:
        per_file[direction] = bytes_of(table, MODULE, direction).groupby(table["file"]).sum()
    for direction in DIRECTIONS:
        nbytes, calls = bytes_of(table, MODULE, direction).sum(), ops_of(table, MODULE, direction).sum()
        out += [(f"files_{direction}", "files", float((per_file[direction] > 0).sum())),
                (f"bytes_{direction}", "bytes", float(nbytes)),
                (f"calls_{direction}", "calls", float(calls)),
                (f"mean_{direction}_size", "bytes", float(nbytes / calls) if calls else float("nan"))]
        histogram = histogram_of(table, MODULE, direction).sum()
        total = histogram.sum()
        out += [(f"{direction}_calls_{name}", "share of calls",
                 float(histogram[name] / total) if total else float("nan")) for name in SIZE_BIN_NAMES]
    seconds = {what: seconds_of(table, MODULE, what).sum() for what in ("read", "write", "meta")}
    busy = sum(seconds.values())
    out.append(("metadata_share", "share of I/O time", float(seconds["meta"] / busy) if busy else float("nan")))
    return out


def real_shape(log_path: Path) -> list[tuple[str, str, float]]:
    from ..darshan.logs import files_of, read_log

    return shape(files_of(read_log(log_path), MODULE))


def surrogate_shape(manifest_path: Path) -> list[tuple[str, str, float]]:
    """The step's run, from the logs beside the job's records: the files its run read and wrote (its records)."""
    import pandas as pd

    from ..darshan.logs import DIRECTIONS, files_of, read_log

    manifest = json.loads(manifest_path.read_text())
    records_path = manifest_path.with_name(manifest_path.name.removesuffix(MANIFEST_SUFFIX) + RECORDS_SUFFIX)
    logs = job_logs(records_path)
    if not logs:
        raise ValueError(f"{records_path}: no Darshan log beside it; the step's jobs must run under darshan-runtime "
                         "(config instruments.darshan)")
    records = pd.read_json(records_path, lines=True)
    run = records[(records["phase"] == "run") & records["op"].isin(["read", "write"]) & (records["file"] != "")]
    root = manifest["root"].rstrip("/")
    wanted = {direction: {f"{root}/{name}" for name in run.loc[run["op"] == direction, "file"]}
              for direction in DIRECTIONS}
    tables = [files_of(read_log(path, require_files=False), MODULE) for path in logs]
    table = pd.concat([t for t in tables if not t.empty], ignore_index=True)
    final = table["file"].map(final_path)
    # a direction's counters of the files the run moved that way; the other direction's zeroed (a written file's
    # read-back by verification is not the run's)
    keep_read, keep_write = final.isin(wanted["read"]), final.isin(wanted["write"])
    table = table[keep_read | keep_write].copy()
    for direction, keep in (("read", keep_read), ("write", keep_write)):
        table.loc[~keep[table.index], [c for c in DIRECTION_COUNTERS[direction] if c in table]] = 0
    table["file"] = final[table.index]
    return shape(table)


def comparison(job: str, log_path: Path, step: str, manifest_path: Path) -> pd.DataFrame:
    import pandas as pd

    manifest = json.loads(manifest_path.read_text())
    real = {measure: (unit, value) for measure, unit, value in real_shape(log_path)}
    rows = []
    for measure, unit, value in surrogate_shape(manifest_path):
        other = real[measure][1]
        rows.append({"job": job, "log": str(log_path), "step": step, "arm": manifest["arm"], "cycle": manifest["cycle"],
                     "measure": measure, "unit": unit, "surrogate": value, "real": other,
                     "surrogate_over_real": value / other if other else float("nan")})
    return pd.DataFrame(rows, columns=COLUMNS)


def requests(study) -> list[dict]:
    """What the study compares (config darshan.jobs.<name>.stands_for): per such job, its log and the step it stands
    for, on the study's last cycle and its arm that runs on the persistent tier (crosschecks: there is one)."""
    from ..darshan.jobfiles import find_log

    unstaged = [arm for arm in study.arms.values() if not arm.staged]
    if not unstaged:
        return []
    arm = unstaged[0]
    return [{"job": name, "step": job["stands_for"], "log": str(find_log(job["log"])), "arm": arm.arm,
             "cycle": study.cycles[-1]}
            for name, job in sorted(arm.darshan.get("jobs", {}).items()) if job.get("stands_for")]


def write_comparisons(comparisons: list[dict], out: Path) -> None:
    """tables/surrogate_vs_log.csv: ``comparisons`` as :func:`requests` made them, each with its step's ``manifest``."""
    import pandas as pd

    from ..fsutil import write_table

    frames = [comparison(c["job"], Path(c["log"]), c["step"], Path(c["manifest"])) for c in comparisons]
    write_table(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS), out)
