"""Benchmark subcommands of ``cycleio`` (IOR, mdtest, fio, field I/O, parsing)."""

from __future__ import annotations

import argparse
import csv
import logging
import shutil
import sys
from pathlib import Path

from ..benchmarks.fieldio import LAYOUTS, PATTERNS

log = logging.getLogger("cycleio")

# Files beside benchmark outputs that are not outputs themselves (a folder given to `parse`).
_NOT_OUTPUTS = (".meta.json", ".stderr.txt", ".mdtest.csv", ".ops.csv")


def cmd_bench(args) -> None:
    from ..benchmarks.specs import PointSettings
    from ..benchmarks.tierbench import run_point, write_rows

    from ..storage.jobscratch import job_scratch

    settings = PointSettings.from_json(_settings_text(args.settings))
    with job_scratch([settings.tier], settings.study):  # in a batch job, its own folder goes at its end
        rows = run_point(settings, Path(args.raw))
    write_rows(rows, Path(args.out))
    log.info("wrote %d rows to %s (raw outputs in %s)", len(rows), args.out, args.raw)


def _settings_text(value: str) -> str:
    """JSON given inline, or @FILE."""
    return Path(value[1:]).read_text() if value.startswith("@") else value


def cmd_fieldio(args) -> None:
    """Field I/O by hand, on any folder: the same program and rows as the workflow's benchmark."""
    import socket
    import time

    from ..benchmarks.common import host_cores
    from ..benchmarks.fieldio import run_fieldio
    from ..benchmarks.points import finish, summarize
    from ..benchmarks.specs import FieldIOSpec
    from ..benchmarks.tierbench import write_rows
    from ..config.sizes import parse_size
    from ..storage.tiers import filesystem_type

    spec = FieldIOSpec(patterns=tuple(args.patterns), layouts=tuple(args.layouts), fields_per_task=args.fields,
                       field_size_bytes=parse_size(args.field_size, "--field-size"), fsync=args.fsync)
    directory = Path(args.dir)
    raw = Path(args.raw) if args.raw else Path(args.out).with_suffix(".raw")
    raw.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    work = directory / f".cycleio-fieldio-n{args.tasks}"
    try:
        rows = run_fieldio(work, spec, args.tasks, args.repetitions, args.launcher, raw, f"fieldio.n{args.tasks}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    context = {"study": "", "benchmark": "fieldio", "tier": args.tier or directory.name, "tier_kind": "",
               "fs_type": filesystem_type(directory), "host": socket.gethostname(), "host_cores": host_cores()}
    rows = [finish([row], {**context, "pattern": row["job"]}, t_start)[0] for row in rows]  # as the workflow's point
    write_rows(rows + summarize(rows), Path(args.out))
    log.info("wrote %d rows to %s (raw output in %s)", len(rows), args.out, raw)


def cmd_fieldio_rank(args) -> None:
    from ..benchmarks.fieldio import rank_main

    code = rank_main(args)
    if code:
        raise SystemExit(code)


def expand_paths(paths: list[str]) -> list[Path]:
    """Files as given; a folder gives its benchmark outputs (not .meta.json, stderr, CSV, nor an
    IOR/fio stdout whose JSON lies beside it)."""
    out: list[Path] = []
    for name in paths:
        path = Path(name)
        if not path.is_dir():
            out.append(path)
            continue
        for child in sorted(p for p in path.iterdir() if p.is_file()):
            if child.name.endswith(_NOT_OUTPUTS) or child.name == "settings.json":
                continue
            if child.name.endswith(".stdout.txt") and child.with_name(child.name[: -len(".stdout.txt")] + ".json").exists():
                continue
            out.append(child)
    return out


def cmd_parse(args) -> None:
    from ..benchmarks.benchparse import ROW_KEYS, BenchmarkOutputError, parse_any

    rows, failed = [], []
    files = expand_paths(args.paths)
    for path in files:
        try:
            rows += parse_any(path)
        except BenchmarkOutputError as err:
            failed.append(path)
            print(f"cycleio parse: cannot read {path}: {err}", file=sys.stderr)
    if args.out:
        from ..benchmarks.tierbench import write_rows

        write_rows(rows, Path(args.out), columns=ROW_KEYS)
    else:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(ROW_KEYS), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
        sys.stdout.flush()
    if failed:
        raise ValueError(f"{len(failed)} of {len(files)} outputs could not be read: "
                         + ", ".join(str(p) for p in failed))


def cmd_bench_tables(args) -> None:
    from ..report.benchtables import write_benchmark_tables

    from ..config.sizes import parse_size
    from ..benchmarks.threshold import TimedThreshold

    given = {"min_bytes": None if args.min_bytes is None else parse_size(args.min_bytes, "--min-bytes"),
             "min_seconds": args.min_seconds, "tolerance": args.tolerance}
    timing = TimedThreshold(**{key: value for key, value in given.items() if value is not None})
    write_benchmark_tables(args.points, Path(args.events), benchmarks_csv=Path(args.benchmarks),
                           benchmarks_parquet=Path(args.benchmarks_parquet), efficiency=Path(args.efficiency),
                           io_gap=Path(args.io_gap), timing=timing)
    for path in (args.benchmarks, args.benchmarks_parquet, args.efficiency, args.io_gap):
        log.info("wrote %s", path)


def cmd_bench_figures(args) -> None:
    import pandas as pd

    from ..report.benchfigures import fieldio_figure, scaling_figure

    if not (args.scaling or args.fieldio):
        raise SystemExit("cycleio bench-figures: give --scaling, --fieldio or both")
    table = pd.read_csv(args.table)
    if args.scaling:
        fits = pd.read_csv(args.fits, dtype={"tasks_measured": str}) if args.fits else None
        scaling_figure(table, [Path(p) for p in args.scaling], args.title, fits)
    if args.fieldio:
        fieldio_figure(table, [Path(p) for p in args.fieldio], args.title)


def register(sub) -> None:
    """Add the benchmark subcommands to the ``cycleio`` parser's subparsers."""
    bench = sub.add_parser("bench", help="run one benchmark point (tier x pattern x tasks): IOR/mdtest or fio, "
                                         "or field I/O")
    bench.add_argument("--settings", required=True, help="the point's settings as JSON, or @FILE (the rules pass them)")
    bench.add_argument("--out", required=True, help="CSV of the point's tidy rows")
    bench.add_argument("--raw", required=True, help="folder for the raw outputs (JSON, stdout, stderr, command lines)")
    bench.set_defaults(func=cmd_bench)

    fio = sub.add_parser("fieldio", help="field I/O (FDB-like objects) on a folder, through the MPI launcher")
    fio.add_argument("--dir", required=True, help="folder on the storage to measure")
    fio.add_argument("--tier", default="", help="tier name for the rows (default: the folder's name)")
    fio.add_argument("--tasks", type=int, default=2, help="MPI ranks (default 2)")
    fio.add_argument("--patterns", nargs="+", default=list(PATTERNS), choices=PATTERNS)
    fio.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS)
    fio.add_argument("--fields", type=int, default=100, help="fields per task (default 100)")
    fio.add_argument("--field-size", default="1m", help="bytes per field, e.g. 1m, 64k (default 1m)")
    fio.add_argument("--fsync", action=argparse.BooleanOptionalAction, default=True, help="fsync every field")
    fio.add_argument("--repetitions", type=int, default=3)
    fio.add_argument("--launcher", default="mpiexec -n {ntasks}", help="MPI launcher template")
    fio.add_argument("--out", required=True, help="CSV of tidy rows")
    fio.add_argument("--raw", help="folder for the raw output (default: OUT without .csv, plus .raw)")
    fio.set_defaults(func=cmd_fieldio)

    rank = sub.add_parser("fieldio-rank", help="the field-I/O MPI program (started by `fieldio` and `bench`)")
    rank.add_argument("--dir", required=True)
    rank.add_argument("--patterns", nargs="+", required=True)
    rank.add_argument("--layouts", nargs="+", required=True)
    rank.add_argument("--fields", type=int, required=True)
    rank.add_argument("--field-size", type=int, required=True)
    rank.add_argument("--fsync", action=argparse.BooleanOptionalAction, default=True)
    rank.add_argument("--repetitions", type=int, default=1)
    rank.add_argument("--out", required=True, help="JSON written by rank 0")
    rank.set_defaults(func=cmd_fieldio_rank)

    parse = sub.add_parser("parse", help="IOR, mdtest, fio (and field-I/O) outputs to tidy CSV rows")
    parse.add_argument("paths", nargs="+", metavar="PATH", help="output files, or folders of them")
    parse.add_argument("--out", help="CSV file to write (default: stdout)")
    parse.set_defaults(func=cmd_parse)

    tables = sub.add_parser("bench-tables", help="benchmark points to the benchmarks and efficiency tables")
    tables.add_argument("--events", required=True, help="the study's io_events.parquet")
    tables.add_argument("--benchmarks", required=True, help="CSV to write: every benchmark row")
    tables.add_argument("--benchmarks-parquet", required=True, help="Parquet to write: the same rows")
    tables.add_argument("--efficiency", required=True, help="CSV to write: the steps' MiB/s over their references")
    tables.add_argument("--io-gap", required=True, help="CSV to write: where a step's I/O seconds go")
    # no defaults here: an option left out takes the config schema's (benchmarks.threshold.TimedThreshold)
    tables.add_argument("--min-bytes", help="less per job is not timed (benchmarks.replay.min_bytes)")
    tables.add_argument("--min-seconds", type=float,
                        help="fewer seconds per job is not timed (benchmarks.replay.min_seconds)")
    tables.add_argument("--tolerance", type=float,
                        help="within 1 +/- this of the replay is at the tier's speed (benchmarks.replay.tolerance)")
    tables.add_argument("points", nargs="*", help="CSV files of benchmark points")
    tables.set_defaults(func=cmd_bench_tables)

    figures = sub.add_parser("bench-figures", help="scaling and field-I/O figures from the benchmarks table")
    figures.add_argument("--table", required=True, help="benchmarks.csv")
    figures.add_argument("--fits", help="scaling_fit.csv: the tiers' linear-to-plateau models, drawn over the points")
    figures.add_argument("--scaling", nargs="+", help=".png and/or .svg: MiB/s against tasks per tier; metadata rates")
    figures.add_argument("--fieldio", nargs="+", help=".png and/or .svg: field I/O against IOR-like patterns per tier")
    figures.add_argument("--title", default="cycleio benchmarks")
    figures.set_defaults(func=cmd_bench_figures)
