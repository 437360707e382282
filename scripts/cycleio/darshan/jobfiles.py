"""A replay job of a study's cycle (config ``darshan.jobs.<name>``): its log found and planned, and its files.

A replay job is a step of its own kind (surrogates/darshanjob.py runs it): the files its log reads live on the
arm's persistent tier under ``darshan/<name>/`` (laid out once per arm by the job ``darshan_inputs``, as the
cold start is made once), are staged into the job's folder on scratch, the replay runs there, and what it
wrote is staged out to the cycle's folder, ``gdas.YYYYMMDD/HH/darshan/<name>/`` (which a finished cycle's
cleanup removes with the rest of the cycle). A file is named as the replay names it (``plan.ReplayFile.path``).

``find_log`` reads ``log``: a path, or ``example:NAME`` for a log shipped in pydarshan's wheel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..config.calendar import com_dir
from .logs import DarshanLogError, JobLog, read_log
from .plan import Plan, make_plan

EXAMPLE = "example:"
INPUTS_DIR = "darshan"  # on the persistent tier: darshan/<name>/, the files the job's log reads


def example_logs() -> Path:
    """The folder of the logs pydarshan's wheel ships (darshan/examples/example_logs)."""
    import darshan

    return Path(darshan.__file__).parent / "examples" / "example_logs"


def find_log(text: str) -> Path:
    """The log ``text`` names: ``example:NAME`` (pydarshan's), else a path (``~`` and variables expanded,
    relative to the working directory), made absolute; DarshanLogError when there is no such file."""
    if text.startswith(EXAMPLE):
        name = text[len(EXAMPLE):]
        path = example_logs() / name
        if not path.is_file():
            shipped = ", ".join(sorted(p.name for p in example_logs().glob("*.darshan")))
            raise DarshanLogError(f"{text}: pydarshan ships no log {name!r}; expected one of: {shipped}")
        return path
    path = Path(os.path.expandvars(os.path.expanduser(text)))
    if not path.is_file():
        raise DarshanLogError(f"{path}: no such file; expected a Darshan log (*.darshan), or example:NAME for one "
                              "of pydarshan's")
    return path.resolve()


def input_dir(name: str) -> str:
    return f"{INPUTS_DIR}/{name}"


def output_dir(name: str, cycle: str) -> str:
    return f"{com_dir(cycle, 'gdas')}/{INPUTS_DIR}/{name}"


@dataclass(frozen=True)
class ReplayFiles:
    """What a replay job reads and writes: (file, bytes) of its inputs (laid out before it runs: the bytes its
    reads reach, 0 for a file it only opened or stat'ed) and of its outputs (the files it writes, at their
    largest), the room it takes in one folder, and its totals."""

    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    room_bytes: int
    read_bytes: int
    write_bytes: int
    n_ops: int
    log_ranks: int


def replay_files(plan: Plan) -> ReplayFiles:
    inputs = tuple((f.path, f.read_extent) for f in plan.files
                   if f.read_extent > 0 or not any(f.logged_ops.values()))
    outputs = tuple((f.path, f.extent) for f in plan.files if f.logged_ops.get("write") or f.logged_bytes.get("write"))
    return ReplayFiles(inputs=inputs, outputs=outputs, room_bytes=plan.room_bytes(), read_bytes=plan.bytes("read"),
                       write_bytes=plan.bytes("write"), n_ops=plan.n_ops, log_ranks=plan.log_ranks)


def plan_job(spec: dict) -> tuple[JobLog, Plan]:
    """The log of a replay job's settings (``path`` if found already, else ``log``) read and checked, and its plan
    at the job's ranks, scale, timing and layer; DarshanLogError naming what is wrong."""
    job = read_log(spec.get("path") or find_log(spec["log"]))
    return job, make_plan(job, spec["ranks"], spec["scale"], spec["timing"], spec["layer"])
