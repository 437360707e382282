"""Covered time: the length of a union of time intervals, where overlapping (parallel) events count once.

The report's tables take it per job and per activity (report/aggregate.py, report/benchtables.py), the
forecast's launcher for the writers' busy time (surrogates/forecast/launcher.py). numpy only: the
launcher runs in every forecast job and imports no pandas.
"""

from __future__ import annotations

import numpy as np


def covered_per_group(group, start, stop, n_groups: int) -> np.ndarray:
    """Per group (codes 0 .. n_groups-1; -1: none), the length of the union of the intervals [start, stop).

    Sweeps each group's intervals in order of (start, stop), adding what reaches past the furthest stop so far.
    np.bincount sums the additions one by one in that order: each total is the float a plain loop would give.
    An interval without a start or stop (NaN) covers nothing; touching intervals add up.
    """
    group = np.asarray(group, dtype=np.int64)
    start, stop = np.asarray(start, dtype=np.float64), np.asarray(stop, dtype=np.float64)
    order = np.lexsort((stop, start, group))
    order = order[(group[order] >= 0) & ~np.isnan(start[order]) & ~np.isnan(stop[order])]
    if len(order) == 0:
        return np.zeros(n_groups)
    group, start, stop = group[order], start[order], stop[order]
    # The furthest stop so far within each group, by a running maximum of the stops' ranks among all stops:
    # each group's ranks are lifted above every earlier group's, so the maximum never reaches back across a group.
    n = len(stop)
    by_stop = np.argsort(stop, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[by_stop] = np.arange(n)
    lift = group * n
    furthest = stop[by_stop][np.maximum.accumulate(lift + rank) - lift]
    furthest_before = np.concatenate([[-np.inf], furthest[:-1]])
    furthest_before[np.concatenate([[True], group[1:] != group[:-1]])] = -np.inf  # each group starts afresh
    added = np.maximum(stop - np.maximum(start, furthest_before), 0.0)
    return np.bincount(group, weights=added, minlength=n_groups)


def covered_seconds(start, stop) -> float:
    """Length of the union of the intervals [start[i], stop[i]): overlapping intervals count once."""
    start = np.asarray(start, dtype=np.float64)
    return float(covered_per_group(np.zeros(len(start), dtype=np.int64), start, stop, 1)[0])
