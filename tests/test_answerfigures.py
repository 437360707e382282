"""report.answerfigures: the efficiency heatmap and the io_gap figure on the hand-made tables of conftest (not-timed
rows never colour a cell), what staging buys, and the timeline of the checked-in study of tests/data."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import C1, C2, NAN, REPLAYS, efficiency_fixture, io_gap_fixture


def test_heatmap_cells_colour_timed_rows_only_and_mark_the_close_ones():
    from cycleio.report.answerfigures import efficiency_cells, efficiency_matrix

    cells = efficiency_cells(efficiency_fixture()).set_index(["arm", "step", "direction"])
    assert len(cells) == len(REPLAYS)
    untimed = cells[~cells["timed"]]
    assert untimed["shade"].isna().all() and set(untimed["label"]) == {"not timed"}  # no colour, no ratio shown
    assert cells.loc[("lustre", "fcst", "write"), "shade"] == pytest.approx(math.log2(0.71))
    assert cells.loc[("lustre", "fcst", "write"), "label"] == "0.71\n0.65-0.78"
    assert cells.loc[("lustre", "post", "read"), "label"] == "0.80 ≈\n0.71-1.04"  # within noise
    assert cells.loc[("lustre", "anal", "write"), "label"] == "1.01 =\n0.99-1.03"  # at the tier's speed
    shade = efficiency_matrix(cells.reset_index())
    assert list(shade.index) == ["lustre", "shm"]
    assert list(shade.columns) == [(s, d) for s in ("prep", "anal", "fcst", "post") for d in ("read", "write")]
    assert int(shade.notna().to_numpy().sum()) == 8  # the timed rows
    assert math.isnan(shade.loc["shm", ("anal", "read")])  # no replay there: no cell either


@pytest.mark.parametrize("table", ["fixture", "all not timed", "empty", "none"])
def test_heatmap_writes_png_and_svg(tmp_path, table):
    from cycleio.report.answerfigures import efficiency_heatmap

    efficiency = {"fixture": efficiency_fixture(), "all not timed": efficiency_fixture().assign(timed=False),
                  "empty": efficiency_fixture().iloc[0:0], "none": None}[table]
    paths = [tmp_path / "heatmap.png", tmp_path / "heatmap.svg"]
    efficiency_heatmap(efficiency, paths, "fx")
    assert all(p.stat().st_size > 0 for p in paths)


def test_gap_segments_stack_to_the_steps_seconds():
    from cycleio.report.answerfigures import gap_segments

    lustre, _, _, shm, shm_post = io_gap_fixture().itertuples()
    segments = gap_segments(lustre)
    assert [s["part"] for s in segments] == ["tier_best_s", "pattern_s", "cycleio_s"]
    assert [s["left"] for s in segments] == pytest.approx([0, 3.5, 5.6])
    assert segments[-1]["left"] + segments[-1]["seconds"] == pytest.approx(lustre.step_s)
    assert (segments[2]["x_low"], segments[2]["x_high"]) == pytest.approx((5.7, 6.3))
    assert math.isnan(segments[0]["x_low"])  # the tier's best has no band
    assert [s["part"] for s in gap_segments(shm)] == ["replay_s", "cycleio_s"]
    assert gap_segments(shm_post)[-1]["seconds"] == -0.1
    # a replay faster than the best pattern measured is the tier at its best: the stack still ends at the step
    beaten = lustre._replace(pattern_s=-1.0, pattern_s_low=-1.2, pattern_s_high=-0.8, replay_s=2.5, replay_s_low=2.3,
                             replay_s_high=2.7, cycleio_s=lustre.step_s - 2.5)
    segments = gap_segments(beaten)
    assert [(s["part"], s["seconds"]) for s in segments] == [("tier_best_s", 2.5), ("cycleio_s", pytest.approx(
        lustre.step_s - 2.5))]
    assert (segments[0]["x_low"], segments[0]["x_high"]) == (2.3, 2.7)


def test_a_step_that_beat_its_replay_draws_no_bar_back_over_it(tmp_path, monkeypatch):
    """The replay's bar stays whole; the step's diamond and the note say it was faster (no hatched bar over it)."""
    import matplotlib.axes

    from cycleio.report.answerfigures import io_gap_figure

    widths, texts = [], []
    real_barh, real_text = matplotlib.axes.Axes.barh, matplotlib.axes.Axes.text
    monkeypatch.setattr(matplotlib.axes.Axes, "barh", lambda ax, y, width, **kw: widths.append(width) or
                        real_barh(ax, y, width, **kw))
    monkeypatch.setattr(matplotlib.axes.Axes, "text", lambda ax, x, y, s, **kw: texts.append(s) or
                        real_text(ax, x, y, s, **kw))
    io_gap_figure(io_gap_fixture().iloc[[4]], [tmp_path / "io_gap.png"], "fx")  # shm post: 0.1 s under its replay
    assert widths and min(widths) >= 0
    assert any("0.1 s under its replay" in text for text in texts)


def test_the_io_gap_figure_says_which_arms_it_leaves_out(tmp_path, monkeypatch):
    """An arm none of whose paired steps was timed (too little, or no fair reference) gets no panel: a note says so."""
    import matplotlib.figure

    from cycleio.report.answerfigures import io_gap_figure

    titles = []
    real_legend = matplotlib.figure.Figure.legend
    monkeypatch.setattr(matplotlib.figure.Figure, "legend", lambda fig, **kw: titles.append(kw.get("title")) or
                        real_legend(fig, **kw))
    gap = io_gap_fixture()
    gap.loc[gap["arm"] == "shm", "timed"] = False
    io_gap_figure(gap, [tmp_path / "io_gap.png"], "fx")
    assert titles and titles[0].startswith("not shown: arm shm (")
    io_gap_figure(io_gap_fixture(), [tmp_path / "io_gap.png"], "fx")
    assert titles[1] is None


@pytest.mark.parametrize("table", ["fixture", "blank tier_best_s", "empty", "none"])
def test_io_gap_figure_writes_png_and_svg(tmp_path, table):
    from cycleio.report.answerfigures import io_gap_figure

    gap = {"fixture": io_gap_fixture(), "blank tier_best_s": io_gap_fixture().assign(tier_best_s=NAN, pattern_s=NAN),
           "empty": io_gap_fixture().iloc[0:0], "none": None}[table]
    paths = [tmp_path / "io_gap.png", tmp_path / "io_gap.svg"]
    io_gap_figure(gap, paths, "fx")
    assert all(p.stat().st_size > 0 for p in paths)


def test_what_staging_buys_says_a_cost_as_a_cost_and_its_band_with_its_count():
    from cycleio.report.answerfigures import saving_label

    info = pd.DataFrame([{"arm": "lustre", "n_cycles": 2, "verdict": "baseline", "saved_s": math.nan,
                          "saved_se_s": math.nan, "baseline_arm": "lustre"},
                         {"arm": "shm", "n_cycles": 2, "verdict": "slower", "saved_s": -0.4, "saved_se_s": 0.001,
                          "baseline_arm": "lustre"},
                         {"arm": "nl", "n_cycles": 1, "verdict": "faster (one cycle, no spread)", "saved_s": 1.9,
                          "saved_se_s": math.nan, "baseline_arm": "lustre"}]).set_index("arm", drop=False)
    assert saving_label(2.36, info.loc["lustre"], info) == "2.36 s (baseline)"
    assert saving_label(2.8, info.loc["shm"], info) == (
        "2.80 s: costs 0.40 s ± <0.01 s (std. error over 2 cycles)\nagainst lustre: slower")
    assert saving_label(0.5, info.loc["nl"], info) == (
        "0.50 s: saves 1.90 s (one cycle, no band)\nagainst lustre: faster (one cycle, no spread)")


def test_what_staging_buys_ends_its_axis_where_the_data_do(tmp_path, drawn_figures):
    from cycleio.report.answerfigures import staging_figure

    cycles = pd.DataFrame([{"arm": arm, "cycle": cycle, "wall_s": wall, "stage_in_s": 0.1, "run_io_s": 0.5,
                            "compute_s": 0.5, "stage_out_s": 0.2, "verify_s": 0.1, "stage_out_verify_s": 0.25}
                           for arm, walls in (("lustre", (2.3, 2.4)), ("shm", (2.8, 2.8))) for cycle, wall in
                           zip((C1, C2), walls)])
    table = pd.DataFrame([{"arm": "lustre", "n_cycles": 2, "verdict": "baseline", "saved_s": math.nan,
                           "saved_se_s": math.nan, "baseline_arm": "lustre"},
                          {"arm": "shm", "n_cycles": 2, "verdict": "slower", "saved_s": -0.45, "saved_se_s": 0.05,
                           "baseline_arm": "lustre"}])
    staging_figure(cycles, table, tmp_path / "staging.png", "fx")
    (fig,) = drawn_figures
    bars, notes = fig.axes
    longest = max(cycles.groupby("arm")["wall_s"].mean())
    assert longest <= bars.get_xlim()[1] <= 1.05 * longest
    assert [t.get_text() for t in notes.texts] == [
        "2.35 s (baseline)", "2.80 s: costs 0.45 s ± 0.05 s (std. error over 2 cycles)\nagainst lustre: slower"]


def test_the_timeline_from_the_fixed_records(tables):
    """cycle_timeline on the fx study: each job's phases per rank and the forecast's output hours, from the
    arm's first record (offsets from the records, multiples of 1/64 s)."""
    from cycleio.report.answerfigures import timeline_table
    from cycleio.records import cycle_records

    timeline = timeline_table(cycle_records(pd.read_parquet(tables / "io_events.parquet")))
    shm = timeline[(timeline["arm"] == "shm") & (timeline["cycle"] == C1)].set_index(["step", "rank", "kind", "what"])
    assert shm.loc[("fcst", 0, "phase", "stage_in"), ["seconds", "t_from_arm_start_s"]].tolist() == [1.125, 100.0]
    assert shm.loc[("fcst", 1, "phase", "run"), "seconds"] == 4.875
    assert shm.loc[("fcst", 0, "output", "f006"), ["seconds", "t_from_arm_start_s"]].tolist() == [1.5, 106.5625]
    assert shm.loc[("fcst", 1, "wait", "f003"), "seconds"] == 1.3125
    assert set(shm.loc["post"].index.get_level_values("what")) == {"stage_in", "run", "verify", "stage_out", "cleanup"}


def test_the_timeline_gives_a_job_over_nodes_a_lane_per_node_and_a_job_on_one_node_a_lane_per_rank(tables, tmp_path):
    """A forecast over three nodes (its ranks and each node's stage-in, stage-out and cleanup task, as runner.nodes
    records them) gets a lane per node and rank, so the slowest node's stage-out shows; the fx study's jobs, each on
    one node, keep their lanes and labels."""
    from cycleio.records import cycle_records
    from cycleio.report.answerfigures import lane_label, timeline_figure, timeline_lanes, timeline_table

    one_node = timeline_table(cycle_records(pd.read_parquet(tables / "io_events.parquet")))
    assert {lane[2] for lane in timeline_lanes(one_node)} == {""}  # no node named: lanes as before
    assert lane_label((C1, "fcst", "", 0)) == f"{C1[-4:]} fcst" and lane_label((C1, "fcst", "", 2)).endswith(" r2")

    def row(host, rank, phase, t_start, seconds):
        return {"study": "m", "arm": "node_local", "cycle": C1, "step": "fcst", "host": host, "rank": rank,
                "phase": phase, "op": "copy", "file": "a.nc", "t_start": t_start, "seconds": seconds, "bytes": 1}

    rows = [row("n1", 0, "stage_in", 0.0, 1.0), row("n1", 0, "run", 1.0, 3.0), row("n2", 1, "run", 1.0, 3.0),
            row("n3", 2, "run", 1.0, 3.0), row("n2", 0, "stage_out", 4.0, 0.5), row("n3", 0, "stage_out", 4.0, 2.5)]
    rows += [{**r, "step": "post", "host": "n1", "rank": 0} for r in (row("", 0, "stage_in", 7.0, 0.2),)]
    table = timeline_table(pd.DataFrame(rows))
    lanes = set(timeline_lanes(table))
    assert lanes == {(C1, "fcst", "n1", 0), (C1, "fcst", "n2", 1), (C1, "fcst", "n3", 2), (C1, "fcst", "n2", 0),
                     (C1, "fcst", "n3", 0), (C1, "post", "", 0)}
    assert lane_label((C1, "fcst", "n3", 0)) == f"{C1[-4:]} fcst n3"
    assert lane_label((C1, "fcst", "n2", 1)) == f"{C1[-4:]} fcst n2 r1"
    # cycle_timeline.csv has the stage-out of each node: the slowest is n3's
    out = table[(table["what"] == "stage_out")].set_index("host")["seconds"]
    assert out.idxmax() == "n3" and out["n3"] == 2.5
    paths = [tmp_path / "timeline.png"]
    timeline_figure(table, paths, "m")
    assert paths[0].stat().st_size > 0
