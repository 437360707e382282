"""The README's table of cycleio's own numbers: a line per benchmark of the latest `make bench`, the goals it met
and its weakest case (the one nearest its goal, or furthest from it on the failing side).

bench/run.py writes it between the two markers below after a full-length run (not after --quick, whose numbers
are a smoke test's); tests/test_docs.py checks that the README holds the table bench/results.json gives, so the
README never shows numbers the results do not.
"""

from __future__ import annotations

from pathlib import Path

from cycleio.fsutil import replace_between_markers

from common import passes

START = "<!-- the table below is written by make bench from bench/results.json -->"
END = "<!-- end of the table make bench writes -->"

# what each benchmark sets against what, in a few words (docs/performance.md has the whole table)
MEASURES = {
    "efficiency": "each step's MiB/s over a fio replay of its own files (C48 and C96, disk and /dev/shm)",
    "staging": "staging's copy rate over `cp`+`sync` and over the tiers' limit (fio), one node and three",
    "planning": "a dry run of 124 cycles over a bare Snakemake workflow of the same shape (lower is better)",
    "memory": "peak memory of one output hour, C48 to C768, over 2 GiB (lower is better)",
    "aggregation": "1,000,000 records into the tables, over 10 s (lower is better)",
    "study": "the default study twice: its minutes and disk over 5 min and 10 GB, the method's goals",
    "soak": "the smoke study killed and resumed at random, against a run never killed",
    "parallel": "the shared-file write strategies over fio with the same tasks and file (a comparison)",
    "darshan": "a Darshan log's replay over fio writing the same bytes; planning a long trace",
}


def _margin(r: dict) -> float:
    """How far a row's median ratio is on the passing side of its goal (1 at the goal, below 1 missing it). A count
    that must stay at zero (the soak's temporaries left, goal <= 0) is at its goal when it is zero."""
    if r.get("higher_is_better", True):
        return r["median"] / r["goal"]
    if r["median"] == 0:
        return 1.0 if r["goal"] == 0 else float("inf")
    return r["goal"] / r["median"]


def _weakest(r: dict) -> str:
    """``case: 0.95 (0.86-1.03), goal >= 1.00``: the ratio's median, its spread over the repeats, the goal."""
    sign = ">=" if r.get("higher_is_better", True) else "<="
    spread = "one run" if r["repeats"] == 1 else f"{r['min']:.2f}-{r['max']:.2f}"
    return f"{r['case']}: {r['median']:.2f} ({spread}), goal {sign} {r['goal']:.2f}"


def table(results: dict, order: list[str]) -> str:
    """The Markdown table of ``results`` (bench/results.json), a line per benchmark in ``order`` (one the results
    hold no run of says so)."""
    lines = ["| benchmark | what it sets against what | goals met | its weakest case: median ratio (min-max over "
             "the repeats), goal |", "|---|---|---|---|"]
    for name in order:
        rows = [r for r in results["rows"] if r["run"] == name]
        if not rows:
            lines.append(f"| {name} | {MEASURES.get(name, '')} | no run in the results | - |")
            continue
        judged = [r for r in rows if passes(r) is not None]
        met = f"{sum(bool(passes(r)) for r in judged)} of {len(judged)}" if judged else "no goal"
        weakest = _weakest(min(judged, key=_margin)) if judged else "-"
        lines.append(f"| {name} | {MEASURES.get(name, '')} | {met} | {weakest} |")
    return "\n".join(lines)


def update(readme: Path, results: dict, order: list[str]) -> None:
    """Put the table of ``results`` between the README's markers (fsutil.replace_between_markers)."""
    replace_between_markers(readme, START, END, table(results, order) + "\n", "make bench's latest numbers")
