"""Records: one timed I/O event each, written as JSON lines.

Everything the study measures is a record. Throughput is derived later as MiB/s (2**20 bytes).
"""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterator

from .fsutil import landing

PHASES = ("stage_in", "run", "stage_out", "verify", "cleanup")


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


def read_records(path: str | os.PathLike) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]
