"""The study's answer subcommands of ``cycleio``: summary, timeline, answer figures, io gap figure, scaling fit,
plan, compare."""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("cycleio")


def _paths(*paths) -> list[Path]:
    return [Path(p) for p in paths if p]


def cmd_summary(args) -> None:
    from ..report.answers import summary_table_from_tables

    summary_table_from_tables(Path(args.step_summary), Path(args.tiers), Path(args.events),
                              Path(args.efficiency) if args.efficiency else None, Path(args.out),
                              Path(args.io_gap) if args.io_gap else None)
    log.info("wrote %s", args.out)


def cmd_summary_md(args) -> None:
    from ..report.answers import summary_markdown_from_csv

    from ..benchmarks.threshold import TimedThreshold

    print(summary_markdown_from_csv(Path(args.answers), Path(args.out), args.title,
                                    Path(args.fits) if args.fits else None,
                                    Path(args.capacity) if args.capacity else None,
                                    Path(args.replays) if args.replays else None,
                                    TimedThreshold() if args.min_seconds is None
                                    else TimedThreshold(min_seconds=args.min_seconds)))


def cmd_replay_jobs(args) -> None:
    from ..fsutil import write_table
    from ..report.darshananswer import replay_table

    write_table(replay_table([Path(p) for p in args.manifests]), Path(args.out))


def cmd_timeline(args) -> None:
    import pandas as pd

    from ..fsutil import write_table
    from ..report.answerfigures import io_share_figure, timeline_figure, timeline_table
    from ..records import cycle_records, replay_records

    events = pd.read_parquet(args.events)
    replays = replay_records(events)
    events = pd.concat([cycle_records(events), replays[replays["op"] == "wall"]], ignore_index=True)
    table = timeline_table(events)
    write_table(table, Path(args.out_table))
    timeline_figure(table, _paths(args.png, args.svg), args.title)
    summary = pd.read_csv(args.step_summary, dtype={"cycle": str})
    io_share_figure(summary, _paths(args.share_png, args.share_svg), args.title)


def cmd_answer_figures(args) -> None:
    import pandas as pd

    from ..report.answerfigures import efficiency_heatmap, staging_figure
    from ..report.answers import cycle_totals

    summary = pd.read_csv(args.step_summary, dtype={"cycle": str})
    answers = pd.read_csv(args.answers)
    if args.staging_png or args.staging_svg:
        staging_figure(cycle_totals(summary), answers, _paths(args.staging_png, args.staging_svg), args.title)
    if args.heatmap_png or args.heatmap_svg:
        efficiency = pd.read_csv(args.efficiency) if args.efficiency else None
        efficiency_heatmap(efficiency, _paths(args.heatmap_png, args.heatmap_svg), args.title)


def cmd_io_gap_figure(args) -> None:
    import pandas as pd

    from ..report.answerfigures import io_gap_figure

    io_gap_figure(pd.read_csv(args.io_gap), _paths(args.png, args.svg), args.title)


def cmd_scaling_fit(args) -> None:
    import pandas as pd

    from ..fsutil import write_table
    from ..report.scaling import fit_lines, fit_table

    fits = fit_table(pd.read_csv(args.benchmarks))
    write_table(fits, Path(args.out))
    for line in fit_lines(fits):
        print(line)
        log.info("%s", line)


def _study_inventory(study_json: str):
    import pandas as pd

    from ..config.settings import ArmSettings
    from ..workflow.catalog import inventory_rows

    study = json.loads(study_json)
    return pd.DataFrame([row for text in study["arms"]
                         for row in inventory_rows(ArmSettings.from_json(text), study["cycles"])])


def _config_inventory(configfiles: list[str], resolution: str):
    """The inventory of one arm's first two cycles at ``resolution``, from config files (default: the embedded
    default study), and the study's interval in hours."""
    import pandas as pd

    from snakemake.utils import update_config

    from ..config.settings import read_config_file
    from ..workflow.study import load_study
    from ..workflow.catalog import inventory_rows

    config: dict = {}
    for path in configfiles:
        update_config(config, read_config_file(path))
    config["resolution"] = resolution
    config, study = load_study(config)
    arm = next(iter(study.arms.values()))
    return pd.DataFrame(inventory_rows(arm, study.cycles[:2])), config["cycles"]["interval_hours"]


def cmd_plan(args) -> None:
    import pandas as pd

    from ..fsutil import write_table
    from ..report.scaling import capacity_plan, fit_table, plan_lines

    results = Path(args.results) if args.results else None
    benchmarks = Path(args.benchmarks) if args.benchmarks else results / "tables" / "benchmarks.csv"
    summary_path = Path(args.step_summary) if args.step_summary else (
        results / "tables" / "step_summary.csv" if results else None)
    if args.study_json:
        inventory, interval = _study_inventory(args.study_json), None
    else:
        inventory, interval = _config_inventory(args.configfile, args.resolution)
    interval_hours = args.interval_hours or interval
    if not interval_hours:
        raise ValueError("give --interval-hours (the target hours between cycles)")
    fits = fit_table(pd.read_csv(benchmarks))
    if fits.empty:
        raise ValueError(f"{benchmarks} has no io benchmark to fit: the plan needs the benchmarks")
    summary = pd.read_csv(summary_path) if summary_path and summary_path.exists() else None
    plan = capacity_plan(inventory, fits, resolution=args.resolution, interval_hours=interval_hours,
                         io_budget_fraction=args.budget, summary=summary, units=json.loads(args.units),
                         archive=args.archive)
    out = Path(args.out) if args.out else (results / "capacity.csv" if results else Path("capacity.csv"))
    write_table(plan, out)
    for line in plan_lines(plan):
        print(line)
    log.info("wrote %s", out)


def cmd_compare(args) -> None:
    from ..report.compare import compare_results

    table = compare_results(Path(args.results_a), Path(args.results_b), out_csv=Path(args.out_csv),
                            figures=_paths(args.png, args.svg))
    for line in table.attrs.get("lines", []):
        print(line)


def register(sub) -> None:
    """Add the answer subcommands to the ``cycleio`` parser's subparsers."""
    s = sub.add_parser("summary", help="the study's answer per arm (summary.csv)")
    s.add_argument("--step-summary", required=True, help="tables/step_summary.csv")
    s.add_argument("--tiers", required=True, help="tables/tiers.csv")
    s.add_argument("--events", required=True, help="tables/io_events.parquet")
    s.add_argument("--efficiency", help="tables/efficiency.csv (when the benchmarks ran)")
    s.add_argument("--io-gap", help="tables/io_gap.csv (when the benchmarks ran)")
    s.add_argument("--out", required=True, help="summary.csv to write")
    s.set_defaults(func=cmd_summary)

    md = sub.add_parser("summary-md", help="summary.md from summary.csv (printed too)")
    md.add_argument("--answers", required=True, help="summary.csv (the summary command's)")
    md.add_argument("--fits", help="tables/scaling_fit.csv: add the tiers' model")
    md.add_argument("--capacity", help="capacity.csv: add the capacity plan")
    md.add_argument("--replays", help="tables/replay_jobs.csv: add the replay jobs' answer")
    md.add_argument("--out", required=True, help="summary.md to write")
    md.add_argument("--title", default="cycleio study")
    md.add_argument("--min-seconds", type=float,
                    help="benchmarks.replay.min_seconds (by default the schema's): a replay job's I/O shorter than "
                         "this is too short to time")
    md.set_defaults(func=cmd_summary_md)

    rj = sub.add_parser("replay-jobs", help="tables/replay_jobs.csv: each replay job's logged and replayed I/O time, "
                                            "from the replay jobs' manifests")
    rj.add_argument("--manifests", nargs="+", required=True, help="the replay jobs' manifests")
    rj.add_argument("--out", required=True, help="replay_jobs.csv to write")
    rj.set_defaults(func=cmd_replay_jobs)

    t = sub.add_parser("timeline", help="cycle_timeline table, its figure and the I/O share per step")
    t.add_argument("--events", required=True, help="tables/io_events.parquet")
    t.add_argument("--step-summary", required=True, help="tables/step_summary.csv")
    t.add_argument("--out-table", required=True, help="CSV to write: one row per phase or output hour per rank")
    t.add_argument("--png", help="timeline figure (PNG)")
    t.add_argument("--svg", help="timeline figure (SVG)")
    t.add_argument("--share-png", help="I/O share per step (PNG)")
    t.add_argument("--share-svg", help="I/O share per step (SVG)")
    t.add_argument("--title", default="cycleio study")
    t.set_defaults(func=cmd_timeline)

    f = sub.add_parser("answer-figures", help="what staging buys per arm, and the efficiency heatmap")
    f.add_argument("--step-summary", required=True, help="tables/step_summary.csv")
    f.add_argument("--answers", required=True, help="summary.csv (the summary command's)")
    f.add_argument("--efficiency", help="tables/efficiency.csv")
    f.add_argument("--staging-png")
    f.add_argument("--staging-svg")
    f.add_argument("--heatmap-png")
    f.add_argument("--heatmap-svg")
    f.add_argument("--title", default="cycleio study")
    f.set_defaults(func=cmd_answer_figures)

    g = sub.add_parser("io-gap-figure", help="where a step's storage seconds go: the tier, the file pattern, cycleio")
    g.add_argument("--io-gap", required=True, help="tables/io_gap.csv")
    g.add_argument("--png", help="the figure (PNG)")
    g.add_argument("--svg", help="the figure (SVG)")
    g.add_argument("--title", default="cycleio study")
    g.set_defaults(func=cmd_io_gap_figure)

    fit = sub.add_parser("scaling-fit", help="fit each tier's bandwidth against tasks as linear up to a plateau")
    fit.add_argument("--benchmarks", required=True, help="tables/benchmarks.csv")
    fit.add_argument("--out", required=True, help="CSV to write: one fit per tier x pattern x operation")
    fit.set_defaults(func=cmd_scaling_fit)

    p = sub.add_parser("plan", help="capacity plan: bandwidth and units of each measured tier a target needs")
    p.add_argument("results", nargs="?", help="a study's results folder (results/<study>)")
    p.add_argument("--benchmarks", help="benchmarks.csv (default: RESULTS/tables/benchmarks.csv)")
    p.add_argument("--step-summary", help="step_summary.csv: the steps' read-to-write ratios (default: RESULTS')")
    p.add_argument("--study-json", help="the target study's cycles and one arm (the rule passes it)")
    p.add_argument("--configfile", nargs="*", default=[], help="the study's config files (without --study-json)")
    p.add_argument("--resolution", default="C768", help="target resolution (config key plan.resolution)")
    p.add_argument("--interval-hours", type=int, help="target hours between cycles (default: the study's)")
    p.add_argument("--budget", type=float, default=0.1, help="share of the interval a cycle's I/O may take")
    p.add_argument("--units", default="{}", help='config key plan.units as JSON, e.g. '
                   '\'{"lustre": {"name": "OSTs", "measured": 4}}\' (default: count client nodes)')
    p.add_argument("--archive", action="store_true",
                   help="add the archive's row: a cycle's tarballs and the bandwidth that archives them within the interval")
    p.add_argument("--out", help="capacity.csv to write (default: RESULTS/capacity.csv)")
    p.set_defaults(func=cmd_plan)

    c = sub.add_parser("compare", help="compare two studies' results by arm, step and activity")
    c.add_argument("results_a", help="results/<study A> (before)")
    c.add_argument("results_b", help="results/<study B> (after)")
    c.add_argument("--out-csv", required=True, help="the differences table")
    c.add_argument("--png", help="the differences figure (PNG)")
    c.add_argument("--svg", help="the differences figure (SVG)")
    c.set_defaults(func=cmd_compare)
