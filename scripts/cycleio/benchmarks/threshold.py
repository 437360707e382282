"""When a measurement means something: one threshold for the paired replay (which does not replay what it
could not time) and for every table that judges a row (report.benchtables)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config.schema import schema_default
from ..config.sizes import parse_size


def _default(key: str):
    return schema_default(f"benchmarks.replay.{key}")


@dataclass(frozen=True)
class TimedThreshold:
    """Config benchmarks.replay: min_bytes, min_seconds, tolerance; the reasons in docs/performance.md. A step's
    row in ``efficiency`` and ``io_gap`` is timed when the step moved at least ``min_bytes`` per job and both the
    step and its reference took at least ``min_seconds`` per job; a benchmark repetition in ``benchmarks`` when
    it moved at least ``min_bytes`` in at least ``min_seconds`` (a few MiB in a few milliseconds is the tool's
    timer resolution, not the tier), or, in a phase bounded by time (a stonewalled benchmark phase), lasted at
    least ``min_seconds`` and moved anything: such a phase lasts its bound whatever the tier's speed, so a slow
    tier's few MiB in 0.3 s are its speed, not the timer's."""

    min_bytes: int = parse_size(_default("min_bytes"), "benchmarks.replay.min_bytes")
    min_seconds: float = _default("min_seconds")
    tolerance: float = _default("tolerance")

    def enough(self, nbytes, seconds, bounded_by_time=False):
        """Whether ``nbytes`` in ``seconds`` can be timed (scalars, or Series element by element);
        ``bounded_by_time``: whether the phase ended when its time was up (its bytes then need only be some)."""
        return (seconds >= self.min_seconds) & ((nbytes >= self.min_bytes) | (bounded_by_time & (nbytes > 0)))
