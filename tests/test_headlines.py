"""The summary's first lines (report.headlines): each question answered in one sentence, with its band or verdict,
or why the study cannot say; on the hand-made step_summary of conftest, whose numbers test_report_answers works out."""

from __future__ import annotations

import pandas as pd

from conftest import step_summary
from cycleio.report.answers import arm_summary, summary_markdown
from cycleio.report.headlines import answer_lines, capacity_sentence
from test_report_answers import efficiency, tiers, write_times


def capacity(fitted: bool = True) -> pd.DataFrame:
    row = {"step": "cycle", "resolution": "C768", "interval_hours": 6.0, "io_budget_fraction": 0.1,
           "cycle_bytes": 489.2 * 2**30, "needed_MiB_per_s": 232.0, "unit": "client nodes", "units_measured": 1}
    return pd.DataFrame([
        {**row, "tier": "lustre", "pattern": "easy", "measured_plateau_MiB_per_s": 400.0 if fitted else float("nan"),
         "units_needed": 0.6 if fitted else float("nan"), "plateau_reached": True},
        {**row, "tier": "shm", "pattern": "easy", "measured_plateau_MiB_per_s": float("nan"),
         "units_needed": float("nan"), "plateau_reached": False},
    ])


def test_the_summary_leads_with_one_sentence_per_question():
    table = arm_summary(step_summary(), tiers(), efficiency(), write_times())
    text = summary_markdown(table, "fx", capacity())
    head = text.split("## Per arm")[0]
    assert head.index("## The answers") < head.index("A cycle's I/O") < head.index("How close to the storage") \
        < head.index("What staging buys") < head.index("Write strategies") < head.index("Capacity plan")
    assert "lustre 2.0 s of 8.5 s (24%)" in head  # the io_s of fcst in each of its two full cycles
    assert "1 of 3 timed step rows run at the tier's speed or within noise" in head
    assert "lustre 1.00 (band 0.90-1.10)" in head
    # shm saves 2.25 ± 0.25 s (faster); node_local 0.25 ± 0.75 (within noise)
    assert "staging pays on shm: node_local +0.25 ± 0.75 s per cycle against lustre (within noise); " \
           "shm +2.25 ± 0.25 s per cycle against lustre (faster)." in head
    assert "quilt keeps the compute ranks waiting least per forecast, serial most" in head
    assert "(mean of 2 forecasts per arm)" in head


def test_on_a_machine_that_hands_freed_memory_to_its_host_the_staging_answer_says_to_compare_runs():
    """There a stage-out runs as fast as the memory it lands in (docs/performance.md): the sentence says so once,
    pointing at a heading the page has; elsewhere it says nothing of it."""
    import re

    from conftest import REPO
    from cycleio.report.headlines import PAGE_REPORTING_DOC, staging_sentence

    table = arm_summary(step_summary(), tiers(), efficiency(), write_times())
    assert "compare two runs" not in staging_sentence(table)
    said = staging_sentence(table.assign(free_page_reporting=[True] * len(table)))
    assert said.endswith(f"compare two runs before trusting a verdict of a few seconds ({PAGE_REPORTING_DOC}).")
    page, heading = PAGE_REPORTING_DOC.split(", ", 1)
    assert re.search(rf"^#+ {re.escape(heading)}$", (REPO / page).read_text(), re.MULTILINE)


def test_a_question_the_study_cannot_answer_says_why():
    table = arm_summary(step_summary(), tiers())
    lines = "\n".join(answer_lines(table, capacity(fitted=False)))
    assert "no paired replay ran (benchmarks.enabled or benchmarks.replay.enabled is off)" in lines
    assert "too few timed points to plan lustre (easy), shm (easy)" in lines
    untimed = efficiency().assign(timed=False)
    lines = "\n".join(answer_lines(arm_summary(step_summary(), tiers(), untimed)))
    assert "no step's reads or writes were both large and long enough to time" in lines
    assert capacity_sentence(None).startswith("no capacity plan: the tier benchmarks did not run")


def test_the_capacity_plan_in_a_sentence_with_its_units():
    said = capacity_sentence(capacity())
    assert said == ("C768 every 6 h moves 489.2 GiB per cycle and needs 232 MiB/s to keep its I/O within 10% of the "
                    "cycle; lustre (easy) needs 0.6 client nodes (plateau 400 MiB/s on 1 client node); too few timed points "
                    "to plan shm (easy).")


def test_a_study_of_only_the_half_cycle_is_answered_by_it():
    """The write strategies' study runs fcst and post of the first cycle only: its summary answers from them."""
    half = step_summary()
    half = half[half["cycle"] == half["cycle"].min()]
    table = arm_summary(half, tiers(), write_times=write_times())
    assert not table.empty and not table["full_cycles"].any()
    text = summary_markdown(table, "fx")
    assert "This study runs only a half cycle (fcst and post)" in text and "over its half cycle" in text
    assert "a half cycle's I/O" in text and "one cycle per arm." in text
    assert "No full cycle has finished" not in text
