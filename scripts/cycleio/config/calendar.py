"""Cycle calendar: cycle names are ``YYYYMMDDHH`` strings, every ``interval_hours`` from start to end.

The first cycle of a study is a half cycle (cold start: fcst and post only); every later cycle runs
prep, anal, fcst and post, and its analysis reads the previous cycle's forecast.
"""

from __future__ import annotations

from datetime import datetime, timedelta

CYCLE_FORMAT = "%Y%m%d%H"
# The GDAS steps of a cycle, in order: the one list of them (the Snakefile's step wildcard is made from it)
FULL_CYCLE_STEPS = ("prep", "anal", "fcst", "post")
HALF_CYCLE_STEPS = FULL_CYCLE_STEPS[FULL_CYCLE_STEPS.index("fcst"):]  # the cold start's cycle starts at the forecast
# The Snakefile's step wildcard: the GDAS steps, cycle (an arm staged once per cycle), the ensemble forecasts (efcsNN)
# and the replay jobs of Darshan logs (darshan_<name>, darshan_<name>_n<ranks> of a sweep)
STEP_WILDCARD = "|".join(FULL_CYCLE_STEPS) + r"|cycle|efcs\d\d|darshan_[a-z][a-z0-9]*(_n[0-9]+)?"
_STEP_RANKS = {step: index for index, step in enumerate(FULL_CYCLE_STEPS)}


def step_rank(step: str) -> tuple[int, str]:
    """The key every table and figure sorts steps by: the GDAS steps in their order, then any other job by name."""
    return _STEP_RANKS.get(step, len(_STEP_RANKS)), step


def parse_cycle(value: str | int) -> datetime:
    """Parse ``YYYYMMDDHH`` (a string, or an integer as ``--config`` delivers it)."""
    text = str(value)
    if len(text) != 10 or not text.isdigit():
        raise ValueError(f"cycle {text!r} is not of the form YYYYMMDDHH")
    try:
        return datetime.strptime(text, CYCLE_FORMAT)
    except ValueError as err:
        raise ValueError(f"cycle {text!r} is not a valid date and hour ({err})") from None


def format_cycle(when: datetime) -> str:
    return when.strftime(CYCLE_FORMAT)


def shift_cycle(cycle: str, hours: int) -> str:
    return format_cycle(parse_cycle(cycle) + timedelta(hours=hours))


def cycles(start: str | int, end: str | int, interval_hours: int = 6) -> list[str]:
    """All cycles from start to end inclusive, in chronological order."""
    first, last = parse_cycle(start), parse_cycle(end)
    if last < first:
        raise ValueError(f"end {format_cycle(last)} is before start {format_cycle(first)}")
    if interval_hours <= 0:
        raise ValueError(f"interval_hours must be positive, got {interval_hours}")
    step = timedelta(hours=interval_hours)
    out, when = [], first
    while when <= last:
        out.append(format_cycle(when))
        when += step
    return out


def previous_cycle(cycle: str, interval_hours: int = 6) -> str:
    return shift_cycle(cycle, -interval_hours)


def is_half_cycle(cycle: str, start: str | int) -> bool:
    """The study's first cycle is the cold-start half cycle."""
    return parse_cycle(cycle) == parse_cycle(start)


def steps_of_cycle(cycle: str, start: str | int, ensemble_jobs: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """The steps of a cycle: the half cycle's fcst and post, or prep, anal, fcst, post and the
    ensemble forecast jobs (efcs01, ...), which start from the cycle's analysis as the EnKF's do."""
    return HALF_CYCLE_STEPS if is_half_cycle(cycle, start) else (*FULL_CYCLE_STEPS, *ensemble_jobs)


def com_dir(cycle: str, run: str = "gdas") -> str:
    """The COM folder of a cycle relative to ROTDIR: ``gdas.YYYYMMDD/HH``."""
    return f"{run}.{cycle[:8]}/{cycle[8:]}"


# The cycle's archive jobs (docs/archive.md): ``arch`` (the deterministic cycle's tarballs) and, in a full cycle
# with an ensemble, one ``earcNN`` per group of members (global-workflow's enkfgdas_earcNN, NN from 01).
ARCHIVE_JOB = r"arch|earc\d\d"


def is_archive_job(name: str) -> bool:
    """Whether a job of a cycle is one of its archive jobs (``arch``, ``earcNN``)."""
    return name == "arch" or (name.startswith("earc") and len(name) == 6 and name[4:].isdigit())


def member_groups(members: int, per_group: int, prefix: str) -> dict[str, range]:
    """Jobs of ``per_group`` members each, numbered from 01 (``efcs01``, ``earc01``, ...) -> their members (from 1);
    the last group holds what is left."""
    if members <= 0:
        return {}
    return {f"{prefix}{group + 1:02d}": range(first, min(first + per_group, members + 1))
            for group, first in enumerate(range(1, members + 1, per_group))}


def ensemble_archive_jobs(members: int, members_per_job: int, members_per_group: int) -> dict[str, tuple[str, ...]]:
    """Each ``earcNN`` job of a full cycle -> the ``efcsNN`` jobs that write its group's members."""
    forecasts = member_groups(members, members_per_job, "efcs")
    return {name: tuple(job for job, written in forecasts.items() if set(written) & set(group))
            for name, group in member_groups(members, members_per_group, "earc").items()}
