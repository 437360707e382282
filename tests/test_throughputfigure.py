"""report.throughputfigure: the throughput figure drawn from the tables of the checked-in study of tests/data (conftest's
``tables``), every bar worked out by hand from its records."""

from __future__ import annotations

import pytest
from conftest import assert_axes_carry_data, assert_png_drawn, bar_sizes, read_csv
from cycleio.report.throughputfigure import throughput_figure


def test_throughput_figure_draws_the_tables(tables, tmp_path, drawn_figures):
    throughput, summary = read_csv(tables, "phase_throughput.csv"), read_csv(tables, "step_summary.csv")
    out = tmp_path / "throughput.png"
    throughput_figure(throughput, summary, out, "fx")
    (fig,) = drawn_figures
    assert_png_drawn(out, (14, 5.6))
    assert_axes_carry_data(fig)
    left, right = fig.axes[:2]
    # left: one bar per arm and copy, read or write activity, as tall as its MiB/s (verify and rename are left out)
    expected = [91 / 7.75, 76 / 11.0,  # the baseline's reads and writes on lustre
                91 / 3.9375, 91 / 3.875, 76 / 5.5, 76 / 3.25]  # shm: stage-in, reads, writes, stage-out
    assert sorted(bar_sizes(left)) == pytest.approx(sorted(expected))
    # right: per arm, the seconds of the full cycle C1 (the half cycle C0 left out), every job's phases (run split
    # into storage I/O, CPU, generate, the rest) and what no phase times, up to the jobs' wall times: lustre
    # 13.25 + 4.875 + 3.375 of phases and 6.5 s of job start-up and bookkeeping; shm 15.8125 + 2.5625
    per_arm = {}
    for bar in right.patches:
        per_arm[round(bar.get_y(), 6)] = per_arm.get(round(bar.get_y(), 6), 0.0) + bar.get_width()
    assert [per_arm[y] for y in sorted(per_arm)] == pytest.approx([28.0, 18.375])  # lustre, shm
    # the same totals as what_staging_buys.png (a full cycle's wall time, the sum of its jobs')
    from cycleio.report.answerfigures import staging_parts
    from cycleio.report.answers import cycle_totals

    assert staging_parts(cycle_totals(summary))["wall_s"].tolist() == [28.0, 18.375]
    assert [t.get_text() for t in right.texts] == [" 28.00 s", " 18.38 s"]
    # the legends sit outside the data, and the right one has no stray title
    assert left.get_legend().get_bbox_to_anchor().y0 < left.get_window_extent().y0
    assert right.get_legend().get_title().get_text() == ""


def test_a_cycles_parts_add_up_to_its_wall_time_where_ranks_overlap():
    """Two ranks writing while the other makes data: the run's kinds of time add up to more than the run, and are
    drawn at their shares of it, so the bar ends at the cycle's wall time."""
    import pandas as pd

    from cycleio.report.throughputfigure import CYCLE_PARTS, cycle_parts

    job = {"study": "s", "arm": "a", "step": "fcst", "wall_s": 10.0, "stage_in_s": 1.0, "run_s": 6.0,
           "run_io_s": 5.0, "codec_s": 2.0, "metadata_s": 1.0, "generate_s": 2.0, "compute_s": 0.0,
           "stage_out_s": 1.0, "verify_s": 1.0, "stage_out_verify_s": 1.5, "cleanup_s": 0.5}
    summary = pd.DataFrame([{**job, "cycle": cycle} for cycle in ("2026010100", "2026010106", "2026010112")])
    parts = cycle_parts(summary).iloc[0]
    assert sum(parts[name] for name in CYCLE_PARTS) == pytest.approx(parts["wall_s"])
    assert parts["run_io_s"] == pytest.approx(5.0 * 6.0 / 10.0) and parts["run_other_s"] == 0
