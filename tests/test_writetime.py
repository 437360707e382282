"""The forecast's write times (surrogates/forecast/writetime.py) on records worked out by hand."""

from cycleio.surrogates.forecast.writetime import actual_seconds, effective_per_hour, final_seconds


def record(op, rank, seconds, file="f"):
    return {"op": op, "rank": rank, "seconds": seconds, "file": file}


RECORDS = [
    record("write_effective", 0, 0.5, "f003"), record("write_effective", 1, 0.75, "f003"),
    record("write_effective", 0, 1.0, "f006"), record("write_effective", 1, 0.25, "f006"),
    record("write", 2, 2.0), record("encode", 2, 0.5), record("rename", 2, 0.25),
    record("write", 3, 1.5), record("define", 3, 1.0), record("combine", 0, 0.5),
    record("generate", 2, 9.0), record("compute", 0, 9.0),
    record("write", float("nan"), 5.0),  # not the MPI program's
    record("write_final", 0, 0.125), record("write_final", 1, 0.25),
]


def test_effective_is_the_slowest_compute_rank_of_each_hour():
    assert effective_per_hour(RECORDS) == {"f003": 0.75, "f006": 1.0}


def test_actual_is_the_busiest_ranks_writer_work_and_final_adds_up():
    assert actual_seconds(RECORDS) == 2.75  # rank 2: write 2.0 + encode 0.5 + rename 0.25 (rank 3: 2.5)
    assert actual_seconds([]) == 0.0
    assert final_seconds(RECORDS) == 0.375
