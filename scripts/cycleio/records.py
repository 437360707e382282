"""Records: one timed I/O event each, written as JSON lines.

Everything the study measures is a record. Throughput is derived later as MiB/s (2**20 bytes).

Which records count: io_events holds every record. Every table of the cycles' I/O (step_summary,
phase_throughput, staging, efficiency) and the benchmarks' replay of the steps take only the
cycles' own jobs (``cycle_records``): the steps and, with ``cycles.keep``, the cleanups. The cold
start, the observation dumps and the replay jobs' input files (``ARRIVALS``) write data that arrive from outside the cycle; their
records are kept, but no table counts them as a cycle's I/O.
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from .kernelio import CGROUP_TOOL, KERNEL_TOOL
from .fsutil import landing

if TYPE_CHECKING:  # Arrow reads records in the tables' jobs; a job that only writes them does not import it
    import pyarrow as pa

PHASES = ("stage_in", "run", "stage_out", "verify", "cleanup", "archive")
COUNTER_TOOLS = (KERNEL_TOOL, CGROUP_TOOL)  # records of what the kernel counted, not of cycleio's own events
# jobs (a record's ``step``) whose data arrive from outside the cycle; darshan_inputs is config.keys.DARSHAN_INPUTS
# (tests/test_registries.py holds them equal), the job laying out the files the replay jobs' logs read
ARRIVALS = ("coldstart", "dump", "darshan_inputs")
REPLAY = "replay"  # the phase of a paired replay's records: the instrument, not the cycle's I/O


def cycle_records(events):
    """The records of the cycles' own jobs, without ``ARRIVALS`` and without the paired replays' records
    (phase ``REPLAY``): what every table of the cycles' I/O counts.

    The kernel's counts (kernelio: tools ``kernel`` and ``cgroup``) are left out too: they restate the
    bytes of a whole phase, and only the accounting table (report/accounting.py) reads them.
    ``events``: a pandas DataFrame of records (io_events, or a selection of its columns with ``step``).
    """
    keep = ~events["step"].isin(ARRIVALS)
    if "phase" in events:
        keep &= events["phase"] != REPLAY
    if "tool" in events:
        keep &= ~events["tool"].isin(COUNTER_TOOLS)
    return events[keep]


def replay_records(events):
    """The paired replays' records (phase ``REPLAY``) of the cycles' jobs."""
    return events[(events["phase"] == REPLAY) & ~events["step"].isin(ARRIVALS)]


@dataclass
class Record:
    study: str
    arm: str
    cycle: str
    step: str
    phase: str
    op: str
    tier: str
    tier_kind: str
    fs_type: str
    strategy: str = ""
    tool: str = "cycleio"
    host: str = field(default_factory=socket.gethostname)
    rank: int = 0
    nranks: int = 1
    file: str = ""
    n_files: int = 1
    bytes: int = 0
    t_start: float = 0.0
    seconds: float = 0.0
    attempt: int = 1
    cache_risk: bool = False
    transfers: int = 0  # storage calls that moved the bytes (0: not counted); bytes/transfers = transfer size
    cached_fraction: float | None = None  # a read's file: share in the page cache when the read began
    mpiio: str = ""  # the shared-file write strategies' MPI-IO mode (collective, independent); "" for the others
    repetition: int = 0  # a paired replay's repetition (phase ``replay``)
    # a paired job's step run and replay repetitions: MiB of memory freed a moment before, not yet handed to the
    # host, as the block began (hostmemory.fresh_MiB); None where not probed
    fresh_MiB: float | None = None


RECORD_FIELDS = tuple(f.name for f in fields(Record))


class RecordLog:
    """Collects a job's records and lands them in one JSON-lines file, atomically."""

    def __init__(self, **context):
        unknown = set(context) - set(RECORD_FIELDS)
        if unknown:
            raise TypeError(f"unknown record fields: {sorted(unknown)}")
        self.context = context
        self.records: list[Record] = []

    def add(self, **values) -> Record:
        record = Record(**{**self.context, **values})
        self.records.append(record)
        return record

    @contextmanager
    def timed(self, **values) -> Iterator[dict]:
        """Time a block; the block may update the yielded dict (bytes, n_files, file ...)."""
        extra: dict = {}
        t_start = time.time()
        t0 = time.perf_counter()
        yield extra
        self.add(**{**values, **extra, "t_start": t_start, "seconds": time.perf_counter() - t0})

    def write(self, path: str | os.PathLike) -> None:
        with landing(path) as tmp:
            with open(tmp, "w") as handle:
                for record in self.records:
                    handle.write(json.dumps(asdict(record), sort_keys=True) + "\n")


def record_schema() -> pa.Schema:
    """One Arrow column per Record field, typed after the field: types stay stable and a missing field is null.

    Text is large_string, what pandas' str columns hold, so that to_pandas need not copy it.
    """
    import pyarrow as pa

    arrow_types = {"str": pa.large_string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(),
                   "float | None": pa.float64()}
    return pa.schema([(f.name, arrow_types[f.type]) for f in fields(Record)])


def _numbered_records(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}, column {error.pos + 1}: not JSON: {error.msg}") from error
            if not isinstance(record, dict):
                raise ValueError(f"{path}, line {number}: not a JSON object: {line.strip()[:80]}")
            yield number, record


def read_records(path: str | os.PathLike) -> list[dict]:
    """A record file's records as dicts; a malformed line raises ValueError naming the file and line."""
    return [record for _, record in _numbered_records(path)]


def read_record_table(path: str | os.PathLike) -> pa.Table:
    """A record file as an Arrow table of record_schema(): unknown fields are dropped, missing ones null.

    Arrow's JSON reader does the work; its errors name neither the file nor the line, so on an error the
    file is read again line by line, which either names the bad line or reads what Python's json accepts.
    """
    import pyarrow as pa
    import pyarrow.json as arrow_json

    schema = record_schema()
    options = arrow_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        return arrow_json.read_json(path, parse_options=options)
    except pa.ArrowInvalid:
        pass  # an empty file lands here too
    numbered = list(_numbered_records(path))
    try:
        return pa.Table.from_pylist([record for _, record in numbered], schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        for number, record in numbered:
            try:
                pa.Table.from_pylist([record], schema=schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
                raise ValueError(f"{path}, line {number}: a field's value does not fit its type: {error}") from None
        raise
