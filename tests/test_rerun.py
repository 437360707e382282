"""A run that would redo some readers of a cycle the cleanup removed is refused before any job (unit tests of
workflow.rerun; tests/test_workflow.py refuses such a run of the smoke study)."""

from __future__ import annotations

from cycleio.workflow.rerun import CleanedCycle, redone_after_cleanup_problem, redone_readers

ARMS = "results/s/arms/lustre"
READERS = tuple(f"{ARMS}/{cycle}/{step}.manifest.json"
                for cycle, step in [("2026010100", "anal"), ("2026010100", "fcst"), ("2026010106", "anal"),
                                    ("2026010106", "fcst")])
CLEANED = [CleanedCycle("lustre", "2026010100", READERS)]


def test_redoing_some_readers_of_a_cleaned_cycle_is_named():
    assert redone_readers(CLEANED, {READERS[3]}) == [(CLEANED[0], [READERS[3]])]


def test_redoing_all_readers_or_none_is_fine():
    """--forcerun coldstart redoes every reader, and the jobs writing the cycle's files before them."""
    assert redone_readers(CLEANED, set(READERS)) == []
    assert redone_readers(CLEANED, {f"{ARMS}/2026010112/post.manifest.json"}) == []
    assert redone_after_cleanup_problem(CLEANED, {path: ["forced"] for path in READERS}) is None


def test_the_refusal_names_the_cycle_the_jobs_what_starts_it_and_the_ways_out():
    reasons = {READERS[2]: ["params have changed since last execution"],
               READERS[3]: ["input files updated by another job"],
               READERS[3].replace(".manifest.json", ".records.jsonl"): ["params have changed since last execution"]}
    problem = redone_after_cleanup_problem(CLEANED, reasons)
    assert "arm lustre, cycle 2026010100: this run would redo anal of 2026010106, fcst of 2026010106\n" in problem
    assert ("What starts the rerun: anal of 2026010106 in arm lustre (params have changed since last execution).\n"
            in problem)
    assert '--forcerun coldstart' in problem and "--config study=NAME" in problem and "cycles.keep: null" in problem


def test_many_causes_are_counted_past_the_first_few():
    readers = tuple(f"{ARMS}/2026010106/s{k}.manifest.json" for k in range(7))
    reasons = {path: ["output files have to be generated"] for path in readers[:6]}
    problem = redone_after_cleanup_problem([CleanedCycle("lustre", "2026010100", readers)], reasons)
    assert "s3 of 2026010106 in arm lustre (output files have to be generated), 2 more." in problem
