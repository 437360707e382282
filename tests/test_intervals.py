"""Covered time (cycleio.intervals): the union of intervals, overlaps counted once, per group or in all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from cycleio.intervals import covered_per_group, covered_seconds

REPO = Path(__file__).resolve().parents[1]


def swept(intervals: list[tuple[float, float]]) -> float:
    """The plain loop the vectorized sweep must equal, float for float."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def test_overlapping_intervals_count_once():
    # [0, 2] and [1, 3] overlap; [1, 1.5] lies inside them; [5, 6] stands alone; [12, 12] is empty
    assert covered_seconds([5.0, 0.0, 1.0, 1.0, 12.0], [6.0, 2.0, 3.0, 1.5, 12.0]) == 3.0 + 1.0
    assert covered_seconds([0.0, 0.0], [4.0, 4.0]) == 4.0  # the same interval twice


def test_touching_intervals_add_up():
    assert covered_seconds([0.0, 1.0, 2.0], [1.0, 2.0, 3.5]) == 3.5


def test_no_intervals_cover_nothing():
    assert covered_seconds([], []) == 0.0
    assert covered_per_group([], [], [], 3).tolist() == [0.0, 0.0, 0.0]


def test_an_interval_without_start_or_stop_covers_nothing():
    nan = float("nan")
    assert covered_seconds([0.0, nan, 1.0], [2.0, 5.0, nan]) == 2.0
    assert covered_seconds([nan], [nan]) == 0.0


def test_each_group_is_swept_on_its_own():
    # group 1 starts before group 0 ends; rows of group -1 (no group) and NaN are left out; group 2 has none
    group = [0, 1, 0, -1, 1, 1]
    start = [0.0, 1.0, 4.0, 0.0, 1.5, float("nan")]
    stop = [2.0, 3.0, 5.0, 100.0, 2.0, 9.0]
    assert covered_per_group(group, start, stop, 3).tolist() == [3.0, 2.0, 0.0]


def test_sums_are_the_floats_of_a_plain_loop():
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(1, 80))
        group = rng.integers(0, 4, n)
        start = rng.random(n) * 10
        stop = start + rng.random(n) * 3
        got = covered_per_group(group, start, stop, 4)
        for g in range(4):
            assert got[g] == swept([(a, b) for a, b, k in zip(start, stop, group) if k == g])


def test_the_launcher_path_loads_no_pandas():
    """The forecast's launcher (every fcst job) sums its write times (writetime.py) without loading pandas."""
    program = ("import json, sys; import cycleio.surrogates.forecast.launcher; "
               "print(json.dumps(sorted(sys.modules)))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "scripts"),
                                                                     os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    loaded = set(json.loads(result.stdout))
    assert "cycleio.surrogates.forecast.writetime" in loaded and "pandas" not in loaded

