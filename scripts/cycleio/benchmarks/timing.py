"""When a measurement means something: one threshold for the paired replay (which does not replay what it
could not time) and for every table that judges a row (report.benchtables)."""

from __future__ import annotations

from dataclasses import dataclass

from ..units import MiB


@dataclass(frozen=True)
class Timing:
    """Config benchmarks.replay: min_bytes, min_seconds, tolerance; the reasons in docs/performance.md. A step's
    row in ``efficiency`` and ``io_gap`` is timed when the step moved at least ``min_bytes`` per job and both the
    step and its reference took at least ``min_seconds`` per job; a benchmark repetition in ``benchmarks`` when
    it moved at least ``min_bytes`` in at least ``min_seconds`` (a few MiB in a few milliseconds is the tool's
    timer resolution, not the tier)."""

    min_bytes: int = 32 * MiB
    min_seconds: float = 0.1
    tolerance: float = 0.15

    def enough(self, nbytes, seconds):
        """Whether ``nbytes`` in ``seconds`` can be timed (scalars, or Series element by element)."""
        return (nbytes >= self.min_bytes) & (seconds >= self.min_seconds)
