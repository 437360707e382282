"""report.benchfigures: the scaling and field-I/O figures drawn from the benchmark points of the checked-in study
of tests/data (conftest's ``bench``), every bar and line worked out by hand from its points."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import assert_axes_carry_data, assert_png_drawn, bar_sizes
from cycleio.report.benchfigures import fieldio_figure, scaling_figure


def test_scaling_figure_draws_the_fixture_points(bench, tmp_path, drawn_figures):
    out = tmp_path / "scaling.png"
    scaling_figure(bench, out, "fx")
    (fig,) = drawn_figures
    assert_png_drawn(out, (17, 5.2))
    assert_axes_carry_data(fig)
    write, read, metadata = fig.axes
    for ax, means in ((write, {"lustre / easy": [128, 256], "shm / easy": [512, 1024]}),
                      (read, {"lustre / easy": [256, 512], "shm / easy": [1024, 2048]})):
        # one line per tier and pattern through the means at 1 and 2 tasks (replays and field I/O are not here)
        lines = {c.get_label(): list(c.lines[0].get_ydata()) for c in ax.containers}
        assert lines == means
        assert list(ax.containers[0].lines[0].get_xdata()) == [1, 2]
    assert read.get_title() == "read (reads may come from the page cache)"
    # metadata: the mean operations per second of each tier at its largest task count (1)
    assert sorted(bar_sizes(metadata)) == sorted([5500, 22000, 4400, 55000, 110000, 44000])


def test_points_over_several_nodes_are_series_of_their_own(bench, tmp_path, drawn_figures):
    """The fixture's io points again as if measured on 3 nodes (3 times the tasks, 2.5 times the bandwidth): a
    series per tier, pattern and node count, against the tasks on all nodes, which the axis says."""
    io = bench[bench["benchmark"] == "io"].copy()
    io["nodes"], io["tasks"], io["bw_MiB_per_s"] = 3, io["tasks"] * 3, io["bw_MiB_per_s"] * 2.5
    scaling_figure(pd.concat([bench, io], ignore_index=True), tmp_path / "scaling.png", "fx")
    (fig,) = drawn_figures
    write = fig.axes[0]
    lines = {c.get_label(): (list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata())) for c in write.containers}
    assert lines["lustre / easy"] == ([1, 2], [128, 256])
    assert lines["lustre / easy, 3 nodes"] == ([3, 6], [320, 640])
    assert lines["shm / easy, 3 nodes"] == ([3, 6], [1280, 2560])
    assert "half-filled: 3 nodes, their tasks on all nodes" in write.get_xlabel()


def test_fieldio_figure_draws_the_fixture_points(bench, tmp_path, drawn_figures):
    out = tmp_path / "fieldio.png"
    fieldio_figure(bench, out, "fx")
    (fig,) = drawn_figures
    assert_png_drawn(out, (15, 4.3 * 2 + 1))
    assert_axes_carry_data(fig)
    (appended, appended_latency), (per_field, per_field_latency) = (fig.axes[:2], fig.axes[2:4])
    assert appended.get_title().startswith("appended: field I/O")
    # bandwidth: pattern 1's write and read per tier, then the easy pattern at the same 2 tasks
    easy = [256, 512, 1024, 2048]
    assert sorted(bar_sizes(appended)) == sorted([64, 130, 640, 1300] + easy)
    assert sorted(bar_sizes(per_field)) == sorted([32, 100, 320, 1000] + easy)
    # the latency axes: whole decades, one plain label each, no minor labels to crowd them
    for ax in (appended_latency, per_field_latency):
        labels = [t.get_text() for t in ax.get_yticklabels()]
        low, high = ax.get_ylim()
        assert labels and all(label and float(label) > 0 for label in labels)
        assert math.log10(low).is_integer() and math.log10(high).is_integer()
        assert all(not t.get_text() for t in ax.get_yticklabels(minor=True))
    # 8 MiB of field I/O per point is too small to time: every field-I/O bar is hatched, the easy pattern's
    # lustre points (64 MiB and more in 0.2 s and more) are not
    hatched = [bar.get_hatch() for bar in appended.patches if bar.get_height() > 0]
    assert hatched.count("///") >= 4
    # latency: the mean over the repetitions of one field operation's latency, in ms
    shm_write = 1e3 * (2 / 600 + 2 / 680) / 2
    assert [size for size in bar_sizes(appended_latency) if size == pytest.approx(shm_write)]
    assert len(bar_sizes(appended_latency)) == len(bar_sizes(per_field_latency)) == 4


def test_benchmark_figures_say_when_a_benchmark_is_missing(bench, tmp_path, drawn_figures):
    replays = bench[bench["benchmark"] == "replay"]
    scaling_figure(replays, tmp_path / "s.png", "fx")
    fieldio_figure(replays, tmp_path / "f.png", "fx")
    assert_png_drawn(tmp_path / "s.png", (12, 5.2), min_inked=0.001)  # no metadata points: no metadata panel
    assert_png_drawn(tmp_path / "f.png", (8, 4), min_inked=0.001)
    for fig in drawn_figures:
        assert_axes_carry_data(fig)  # every panel says there is nothing to show
    said = [t.get_text() for fig in drawn_figures for ax in fig.axes for t in ax.texts]
    assert said == ["no write benchmark", "no read benchmark",
                    "no field-I/O benchmark in this study\n(config/studies/benchmarks.yaml runs it)"]


def test_a_study_without_metadata_points_has_no_metadata_panel(bench, tmp_path, drawn_figures):
    scaling_figure(bench[bench["benchmark"] == "io"], tmp_path / "s.png", "fx")
    assert_png_drawn(tmp_path / "s.png", (12, 5.2))
    (fig,) = drawn_figures
    assert [ax.get_title().split(" (")[0] for ax in fig.axes] == ["write", "read"]
    assert_axes_carry_data(fig)


def test_points_with_more_tasks_than_the_machines_cores_are_shaded_as_oversubscribed(bench, tmp_path, drawn_figures):
    scaling_figure(bench.assign(host_cores=1), tmp_path / "over.png", "fx")
    scaling_figure(bench.assign(host_cores=2), tmp_path / "within.png", "fx")
    over, within = drawn_figures
    for ax in over.axes[:2]:
        assert ax.get_xlabel() == "tasks (1 core; shaded: oversubscribed)"
        [shade] = [patch for patch in ax.patches if patch.get_alpha() == 0.12]
        assert 1 < shade.get_x() < 2  # from between 1 and 2 tasks on
        assert any("oversubscribed" in text.get_text() for text in ax.texts)
    assert within.axes[0].get_xlabel() == "tasks (the machine has 2 cores)" and not within.axes[0].texts
