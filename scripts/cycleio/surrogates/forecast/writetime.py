"""A forecast's write times from its records: one definition for the launcher's log and the report.

- effective: per output hour, the slowest compute rank's ``write_effective`` (the ranks step
  together, so the slowest one holds the others); a forecast's effective time sums its hours;
- actual: the seconds the busiest rank spent on writer work (:data:`WRITER_OPS`): storage I/O
  (``write``, ``combine``), the library's work for it (``define``, ``encode``) and the safe landing
  (``rename``);
- final: the un-overlapped end (``write_final``: the last hour's output plus the writers' drain).

Records are mappings with ``op``, ``rank``, ``file`` and ``seconds``, as the rank program writes them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

WRITER_OPS = ("write", "combine", "define", "encode", "rename")


def effective_per_hour(records: Iterable[Mapping]) -> dict[str, float]:
    """Output hour (``f003``) -> the slowest compute rank's effective write seconds."""
    hours: dict[str, float] = {}
    for r in records:
        if r["op"] == "write_effective":
            hours[r["file"]] = max(hours.get(r["file"], 0.0), float(r["seconds"]))
    return dict(sorted(hours.items()))


def actual_seconds(records: Iterable[Mapping]) -> float:
    """The busiest rank's seconds of writer work."""
    busy: dict[int, float] = defaultdict(float)
    for r in records:
        rank = r.get("rank")
        if r["op"] in WRITER_OPS and rank is not None and rank == rank:  # NaN: a record from outside the program
            busy[int(rank)] += float(r["seconds"])
    return max(busy.values(), default=0.0)


def final_seconds(records: Iterable[Mapping]) -> float:
    return sum(float(r["seconds"]) for r in records if r["op"] == "write_final")
