"""The ``cycleio`` command: what a person runs first, then (listed apart) the subcommands the workflow's rules run."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import textwrap
from pathlib import Path

from ..logsetup import setup_logging
from ..surrogates.grid import RESOLUTIONS
from ..units import MiB, format_bytes

log = logging.getLogger("cycleio")


def _job_settings(args):
    """A job's settings (``--arm-settings``); a job of a study with instruments.darshan re-executes itself under
    Darshan here, before it does anything (darshan.runtime), its log beside ``--records``."""
    from ..config.settings import ArmSettings
    from ..config.tierspec import expand_tier_path
    from ..darshan.runtime import preload_job

    settings = ArmSettings.from_json(args.arm_settings)
    if settings.darshan_library:
        tiers = [tier for tier in (settings.persistent, settings.scratch) if tier is not None]
        roots = [expand_tier_path(tier.name, tier.path, settings.study).resolve() for tier in tiers]
        preload_job(settings.darshan_library, Path(args.records), roots)
    return settings


def _arm_job(settings):
    """Around one job of an arm: in a batch job, its own folders on the arm's tiers go at its end."""
    from ..storage.jobscratch import job_scratch

    return job_scratch([settings.persistent, settings.scratch], settings.study)


def cmd_step(args) -> None:
    from ..benchmarks.paired import PairedReplay
    from ..runner.job import run_step

    settings = _job_settings(args)
    with _arm_job(settings):
        manifest = Path(args.manifest)
        failed_attempts = Path(args.failed_attempts) if args.failed_attempts else \
            manifest.with_name(manifest.name.removesuffix(".manifest.json") + ".failed-attempts")
        run_step(settings, args.cycle, args.step, Path(args.records), manifest, attempt=args.attempt,
                 failed_attempts=failed_attempts, replay=PairedReplay.from_settings(settings.replay))


def cmd_stage_node(args) -> None:
    from ..runner.nodes import stage_on_node

    stage_on_node(Path(args.plan))


def cmd_coldstart(args) -> None:
    from ..runner.persistentjobs import run_coldstart

    settings = _job_settings(args)
    with _arm_job(settings):
        run_coldstart(settings, Path(args.records), Path(args.manifest))


def cmd_darshan_inputs(args) -> None:
    from ..runner.persistentjobs import run_darshan_inputs

    settings = _job_settings(args)
    with _arm_job(settings):
        run_darshan_inputs(settings, Path(args.records), Path(args.manifest))


def cmd_dump(args) -> None:
    from ..runner.persistentjobs import run_arrival

    settings = _job_settings(args)
    with _arm_job(settings):
        run_arrival(settings, args.cycle, "dump", Path(args.records), Path(args.manifest))


def cmd_cleanup(args) -> None:
    from ..runner.persistentjobs import run_cleanup

    settings = _job_settings(args)
    with _arm_job(settings):
        run_cleanup(settings, args.cycle, Path(args.records), Path(args.manifest))


def cmd_archive(args) -> None:
    from ..benchmarks.paired import PairedReplay
    from ..runner.persistentjobs import run_archive

    settings = _job_settings(args)
    run_archive(settings, args.cycle, Path(args.records), Path(args.manifest), [Path(m) for m in args.manifests],
                attempt=args.attempt, replay=PairedReplay.from_settings(settings.replay), job=args.job)


def cmd_aggregate(args) -> None:
    from ..report.aggregate import StudyTables, aggregate

    tables = StudyTables(events=Path(args.events), events_csv=Path(args.events_csv), summary=Path(args.summary),
                         throughput=Path(args.throughput), staging=Path(args.staging), tiers=Path(args.tiers),
                         retries=Path(args.retries) if args.retries else None,
                         arms_dir=Path(args.arms_dir) if args.arms_dir else None)
    aggregate(args.records, tables, args.manifests)
    for name, path in vars(tables).items():
        if path is not None and name != "arms_dir":
            log.info("wrote %s", path)


def cmd_io_accounting(args) -> None:
    from ..report.accounting import write_accounting

    flagged = write_accounting(Path(args.events), Path(args.out), [Path(m) for m in args.manifests])
    log.info("wrote %s (%d job phases flagged)", args.out, flagged)


def cmd_surrogate_vs_log(args) -> None:
    from ..report.surrogatelog import write_comparisons

    comparisons = json.loads(args.comparisons)
    write_comparisons(comparisons, Path(args.out))
    log.info("wrote %s (%d real jobs against the steps they stand for)", args.out, len(comparisons))


def cmd_figures(args) -> None:
    import pandas as pd

    from ..report.throughputfigure import throughput_figure

    throughput_figure(pd.read_csv(args.throughput), pd.read_csv(args.summary), [Path(p) for p in args.out], args.title)


def cmd_write_figure(args) -> None:
    from ..report.writefigures import write_strategy_figure_from_tables

    write_strategy_figure_from_tables(Path(args.events), Path(args.summary), [Path(p) for p in args.out], args.title)
    log.info("wrote %s", " ".join(args.out))


def _read_configs(paths: list[str]) -> dict:
    """The config files laid over each other in order, as Snakemake lays its --configfile files."""
    from snakemake.utils import update_config

    from ..config.settings import read_config_file

    config: dict = {}
    for path in paths:
        update_config(config, read_config_file(path))
    return config


def cmd_inventory(args) -> None:
    import pandas as pd

    from ..fsutil import write_table
    from ..workflow.catalog import study_inventory
    from ..workflow.study import load_study

    config = _read_configs(args.configfile) if args.configfile else {}
    if args.resolution:
        config["resolution"] = args.resolution
    if args.levels:
        config["levels"] = args.levels
    # without config files: one arm and one full cycle are enough to list the files
    config.setdefault("scratch_tiers", ["lustre"])
    config.setdefault("cycles", {"start": "2026010100", "end": "2026010106"})
    config, study = load_study(config)
    rows = pd.DataFrame(study_inventory(study))
    rows = rows[rows["arm"] == next(iter(study.arms))]
    if args.out:
        write_table(rows, Path(args.out))
    full = rows[rows["cycle"] == rows["cycle"].max()]  # a full cycle
    full = full.assign(name=full["file"].str.rsplit("/", n=1).str[-1])
    print(f"# {study.name}: {config['resolution']} L{study.arms[next(iter(study.arms))].levels}, one full cycle "
          f"({full['cycle'].iloc[0]}); expected sizes (compressed history estimated)")
    for step, group in full.groupby("step", sort=False):
        print(f"\n{step}: {len(group)} files, {format_bytes(group['expected_bytes'].sum())}")
        for kind, files in group.groupby("kind", sort=False):
            example = files["name"].iloc[0]
            each = files["expected_bytes"]
            size = f"{each.iloc[0] / MiB:10.1f} MiB" if each.nunique() == 1 else f"{each.sum() / MiB:10.1f} MiB total"
            print(f"  {len(files):4d} x {kind:<15} {size}   e.g. {example}")


def cmd_inventory_table(args) -> None:
    import json

    import pandas as pd

    from ..fsutil import write_table
    from ..workflow.catalog import inventory_rows
    from ..config.settings import ArmSettings

    study = json.loads(args.study_json)
    rows = [row for text in study["arms"] for row in inventory_rows(ArmSettings.from_json(text), study["cycles"])]
    write_table(pd.DataFrame(rows), Path(args.out))


def cmd_study_name(args) -> None:
    overrides = command_line_config(shlex.split(args.snakemake_args or ""))
    from ..config.schema import schema_default

    print(overrides.get("study") or _read_configs(args.configfile).get("study", schema_default("study")))


def command_line_config(argv: list[str]) -> dict:
    """The values Snakemake's ``--config`` (``-C``) items in a command line give, parsed as Snakemake parses them
    (``staging={streams: 1}`` a dict, ``resolution=C96`` a string, numbers as numbers). Snakemake's parser is
    imported only when there are items: its module takes a second to import, and a plain ``make study`` has none."""
    entries: list[str] = []
    taking = False
    for word in argv:
        if word in ("--config", "-C"):
            taking = True
        elif word.startswith("-"):
            taking = False
        elif taking and "=" in word:
            entries.append(word)
    if not entries:
        return {}
    from snakemake.cli import parse_config

    return parse_config(entries)


def load_config_files(paths: list[str], snakemake_args: str | None = None):
    """The study of config files laid in order, then the ``--config`` items of the study's Snakemake arguments over
    them, as the run will see it; a ConfigError names the file that brings the problem."""
    from ..config.keys import ConfigError
    from ..workflow.study import load_study

    def load(files: list[str]):
        config = _read_configs(files)
        overrides = command_line_config(shlex.split(snakemake_args or ""))
        if overrides:
            from snakemake.utils import update_config

            update_config(config, overrides)  # as Snakemake lays them
        return load_study(config)

    try:
        return load(paths)
    except ConfigError as err:
        message = str(err)
        if message.startswith("config file "):  # a file that cannot be read or parsed names itself
            raise
        # the first file with which the same problem appears is the one that brings it
        for count in range(1, len(paths)):
            try:
                load(paths[:count])
            except ConfigError as earlier:
                if str(earlier) == message:
                    raise ConfigError(f"in {paths[count - 1]}: {message}") from None
        raise ConfigError(f"in {paths[-1]}: {message}") from None


def cmd_check_config(args) -> None:
    from ..config.keys import ConfigError
    from ..workflow.environment import parallel_stack_problem

    _, study = load_config_files(args.configfile, args.snakemake_args)
    problem = parallel_stack_problem(study)  # before any job: a study asking for a stack that is not here
    if problem:
        raise ConfigError(problem)
    print(f"study {study.name}: {len(study.cycles)} cycles ({study.cycles[0]} to {study.cycles[-1]}), "
          f"arms: {', '.join(study.arms)}")
    if study.darshan_files:
        from ..workflow.darshanjobs import describe_replay_jobs

        for line in describe_replay_jobs(study):
            print(line)


def cmd_cluster_check(args) -> None:
    from ..workflow.clustercheck import ClusterError, Profile, check_cluster

    profile = Profile.read(args.profile)
    if profile.executor != "slurm":
        print(f"profile {args.profile}: executor {profile.executor}, no cluster to check")
        return
    filled, study = load_config_files(args.configfile, args.snakemake_args)
    problems = check_cluster(profile, filled, study)
    if problems:
        raise ClusterError(problems)
    print(f"cluster checked for profile {args.profile}: Slurm answers, the partition, node sizes, burst buffers "
          "and MPI launcher fit the study")


def _print_or_update(text: str, update: str | None, update_page, what: str) -> None:
    """A generated reference: printed, or (``update``: a page) written between its markers."""
    if update:
        update_page(Path(update), text)
        log.info("updated %s in %s", what, update)
    else:
        print(text, end="")


def cmd_config_docs(args) -> None:
    from ..config.schema import load_schema
    from ..config.docs import schema_markdown, update_readme

    _print_or_update(schema_markdown(load_schema()), args.update, update_readme, "the configuration table")


def cmd_cli_docs(args) -> None:
    from .clidocs import cli_markdown, update_page

    _print_or_update(cli_markdown(build_parser(), USER_COMMANDS), args.update, update_page,
                     "the command-line reference")


def cmd_unlock_stale(args) -> None:
    from ..workflow.locks import remove_stale_lock

    remove_stale_lock(Path.cwd(), [a for a in args.snakemake_args if a != "--"])


def cmd_verify(args) -> None:
    from ..storage.checksums import verify_manifest

    manifests = sorted({m for given in map(Path, args.paths)
                        for m in (given.rglob("*.manifest.json") if given.is_dir() else [given])})
    if not manifests:
        raise ValueError(f"no *.manifest.json under {', '.join(args.paths)}")
    matched, problems = 0, []
    for manifest in manifests:
        good, bad = verify_manifest(manifest)
        matched += good
        problems += bad
    for problem in problems:
        print(problem)
    print(f"{len(manifests)} manifests: {matched} files match their checksums, {len(problems)} missing or differ")
    if problems:
        raise RuntimeError(f"{len(problems)} files listed in manifests are missing or differ (listed above)")


# What a person runs, in the order `cycleio --help` lists them; every other subcommand is the rules' own (or started by
# another subcommand), listed apart in one line. The rules call them by name: none is renamed or dropped.
USER_COMMANDS = ("check-config", "cluster-check", "inventory", "plan", "compare", "verify", "unlock-stale", "parse",
                 "fieldio", "darshan", "config-docs", "cli-docs", "study-name")
INTERNAL_NOTE = "internal: the workflow's rules run it"
# The commands `make study` runs before Snakemake: their refusals are one line each, without the log's prefix.
STUDY_START_COMMANDS = ("check-config", "cluster-check")


class _Commands:
    """What the subcommands are added through (``add_parser``, as on argparse's subparsers), so that ``--help`` lists
    the user's commands, in USER_COMMANDS' order, and the rules' internal ones only by name in the epilog, with their
    own --help saying they are internal. argparse lists a subcommand when it is given a help, in the order added: an
    internal command gets none (its help becomes its description); a user command is configured on a parser of its
    own and added, with that parser as its parent, by :meth:`finish` in USER_COMMANDS' order."""

    def __init__(self, subparsers, prog: str):
        self.subparsers, self.prog = subparsers, prog
        self.user: dict[str, tuple[argparse.ArgumentParser, dict]] = {}
        self.internal: list[str] = []

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        if name in USER_COMMANDS:
            own = argparse.ArgumentParser(prog=f"{self.prog} {name}", add_help=False)
            self.user[name] = (own, kwargs)
            return own
        self.internal.append(name)
        kwargs["description"] = f"({INTERNAL_NOTE}) {kwargs.pop('help')}"
        return self.subparsers.add_parser(name, **kwargs)

    def finish(self, parser: argparse.ArgumentParser) -> None:
        missing = set(USER_COMMANDS) - set(self.user)
        if missing:
            raise AssertionError(f"USER_COMMANDS names no subcommand: {sorted(missing)}")
        for name in USER_COMMANDS:
            own, kwargs = self.user[name]
            self.subparsers.add_parser(name, parents=[own], **kwargs)
        parser.epilog = f"internal commands the workflow's rules run (each takes --help): {', '.join(self.internal)}"


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, whose paragraphs never break a command's name at its hyphen (scaling-fit)."""

    def _fill_text(self, text, width, indent):
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


def build_parser() -> argparse.ArgumentParser:
    """The ``cycleio`` command line: every subcommand with its options (``cli-docs`` renders it as docs/cli.md)."""
    parser = argparse.ArgumentParser(
        prog="cycleio", description="I/O studies of cycled weather-forecast systems (`make study` runs one).",
        formatter_class=lambda prog: _HelpFormatter(prog, max_help_position=20, width=100))
    parser.add_argument("--log", help="also write the log to this file")
    sub = _Commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands",
                                          help="what a person runs (cycleio COMMAND --help for its options):"),
                    parser.prog)

    step = sub.add_parser("step", help="run one step's job (stage_in, run, stage_out, verify, cleanup)")
    step.add_argument("--arm-settings", required=True, help="the arm's settings as JSON (the rules pass them)")
    step.add_argument("--cycle", required=True, help="YYYYMMDDHH")
    step.add_argument("--step", required=True,
                      help="prep, anal, fcst, post, an ensemble job efcsNN, `cycle` for all the cycle's steps in one job, "
                           "or a replay job darshan_NAME (config darshan.jobs)")
    step.add_argument("--attempt", type=int, default=1)
    step.add_argument("--records", required=True, help="JSON-lines records to write")
    step.add_argument("--manifest", required=True, help="manifest to write last")
    step.add_argument("--failed-attempts", help="folder that keeps a failed attempt's records (attemptN.PID.records.jsonl); "
                                                "by default STEP.failed-attempts beside the manifest")
    step.set_defaults(func=cmd_step)

    node = sub.add_parser("stage-node", help="one node's part of a job's staging over several nodes (runner.nodes): "
                          "one task per node, started by the job with srun")
    node.add_argument("--plan", required=True, help="the job's plan (JSON) for this action")
    node.set_defaults(func=cmd_stage_node)

    cold = sub.add_parser("coldstart", help="write an arm's cold-start initial conditions")
    cold.add_argument("--arm-settings", required=True)
    cold.add_argument("--records", required=True)
    cold.add_argument("--manifest", required=True)
    cold.set_defaults(func=cmd_coldstart)

    inputs = sub.add_parser("darshan-inputs", help="lay out the files the replay jobs' Darshan logs read, once per arm, "
                                                   "on the persistent tier")
    inputs.add_argument("--arm-settings", required=True)
    inputs.add_argument("--records", required=True)
    inputs.add_argument("--manifest", required=True)
    inputs.set_defaults(func=cmd_darshan_inputs)

    dump = sub.add_parser("dump", help="write a cycle's observation dumps on the persistent tier")
    dump.add_argument("--arm-settings", required=True)
    dump.add_argument("--cycle", required=True)
    dump.add_argument("--records", required=True)
    dump.add_argument("--manifest", required=True)
    dump.set_defaults(func=cmd_dump)

    clean = sub.add_parser("cleanup", help="remove a finished cycle's data from the persistent tier (GDAS cleanup)")
    clean.add_argument("--arm-settings", required=True)
    clean.add_argument("--cycle", required=True)
    clean.add_argument("--records", required=True)
    clean.add_argument("--manifest", required=True)
    clean.set_defaults(func=cmd_cleanup)

    arch = sub.add_parser("archive", help="write a cycle's tarballs to the archive tier, indexed and read back "
                          "(arch, earcNN)")
    arch.add_argument("--arm-settings", required=True)
    arch.add_argument("--cycle", required=True)
    arch.add_argument("--job", default="arch", help="arch (the cycle's tarballs) or earcNN (a group of ensemble "
                      "members' enkfgdas_grpNN.tar)")
    arch.add_argument("--attempt", type=int, default=1)
    arch.add_argument("--records", required=True)
    arch.add_argument("--manifest", required=True)
    arch.add_argument("--manifests", nargs="*", default=[],
                      help="the manifests of the jobs that wrote its members: the checksums its files landed with, "
                      "checked on read-back")
    arch.set_defaults(func=cmd_archive)

    agg = sub.add_parser("aggregate", help="records to tidy tables (each table's file named by its option)")
    agg.add_argument("--events", required=True, help="Parquet to write: every record (io_events)")
    agg.add_argument("--events-csv", required=True, help="CSV to write: the same records")
    agg.add_argument("--summary", required=True, help="CSV to write: one row per job (step_summary)")
    agg.add_argument("--throughput", required=True, help="CSV to write: MiB/s per arm, tier and activity")
    agg.add_argument("--staging", required=True, help="CSV to write: the copies per job and direction")
    agg.add_argument("--tiers", required=True, help="CSV to write: the tiers as the jobs found them")
    agg.add_argument("--retries", help="CSV to write: one row per failed attempt of a job (read under --arms-dir)")
    agg.add_argument("--arms-dir", help="the study's arms folder, where jobs keep their failed attempts' records")
    agg.add_argument("--manifests", nargs="*", default=[], help="the jobs' manifests (for the tiers table)")
    agg.add_argument("records", nargs="+", help="the jobs' JSON-lines records")
    agg.set_defaults(func=cmd_aggregate)

    acc = sub.add_parser("io-accounting", help="each job phase's records against what the kernel (and Darshan) counted")
    acc.add_argument("--events", required=True, help="the io_events Parquet table (aggregate)")
    acc.add_argument("--manifests", nargs="*", default=[],
                     help="the jobs' manifests: a job's Darshan logs beside them (instruments.darshan) add a row "
                          "per job")
    acc.add_argument("--out", required=True, help="CSV to write: one row per job and phase (io_accounting)")
    acc.set_defaults(func=cmd_io_accounting)

    svl = sub.add_parser("surrogate-vs-log", help="a real job's Darshan log beside the surrogate step's it stands for")
    svl.add_argument("--comparisons", required=True,
                     help='JSON list of {"job", "log", "step", "manifest"}: a real log and the manifest of '
                          "the step's job (run under instruments.darshan)")
    svl.add_argument("--out", required=True, help="CSV to write: one row per real job and measure (surrogate_vs_log)")
    svl.set_defaults(func=cmd_surrogate_vs_log)

    fig = sub.add_parser("figures", help="throughput figure from the tables")
    fig.add_argument("--summary", required=True, help="step_summary.csv")
    fig.add_argument("--throughput", required=True, help="phase_throughput.csv")
    fig.add_argument("--out", required=True, nargs="+", help="the figure: .png, .svg or both")
    fig.add_argument("--title", default="cycleio study")
    fig.set_defaults(func=cmd_figures)

    figure = sub.add_parser("write-figure", help="effective against actual write time per strategy and arm")
    figure.add_argument("--events", required=True, help="tables/io_events.parquet")
    figure.add_argument("--summary", required=True, help="tables/step_summary.csv")
    figure.add_argument("--out", required=True, nargs="+", help="the figure: .png, .svg or both")
    figure.add_argument("--title", default="cycleio: forecast write strategies")
    figure.set_defaults(func=cmd_write_figure)

    check = sub.add_parser("check-config", help="validate study config files (later files override)")
    check.add_argument("configfile", nargs="+")
    check.add_argument("--snakemake-args", help="the study's Snakemake arguments (make's ARGS): a --config study=X wins")
    check.set_defaults(func=cmd_check_config)

    cluster = sub.add_parser("cluster-check", help="check the cluster a workflow profile sends jobs to, before any job")
    cluster.add_argument("--profile", required=True, help="the workflow profile folder (make's PROFILE)")
    cluster.add_argument("configfile", nargs="+", help="study config files (later files override)")
    cluster.add_argument("--snakemake-args", help="the study's Snakemake arguments (make's ARGS)")
    cluster.set_defaults(func=cmd_cluster_check)

    inv = sub.add_parser("inventory", help="print the files each step writes, with expected sizes")
    inv.add_argument("--resolution", choices=RESOLUTIONS)
    inv.add_argument("--levels", type=int)
    inv.add_argument("--out", help="also write every file of the study (arms x cycles) as CSV")
    inv.add_argument("configfile", nargs="*", help="study config files (default: config/config.yaml's defaults)")
    inv.set_defaults(func=cmd_inventory)

    table = sub.add_parser("inventory-table", help="write the study's expected files as a table (the rules call it)")
    table.add_argument("--study-json", required=True, help='{"cycles": [...], "arms": [arm settings JSON, ...]}')
    table.add_argument("--out", required=True)
    table.set_defaults(func=cmd_inventory_table)

    name = sub.add_parser("study-name", help="print the study name of config files (later files override)")
    name.add_argument("configfile", nargs="+")
    name.add_argument("--snakemake-args", help="the study's Snakemake arguments (make's ARGS): a --config study=X wins")
    name.set_defaults(func=cmd_study_name)

    docs = sub.add_parser("config-docs", help="print the configuration reference (markdown) from the schema")
    docs.add_argument("--update", metavar="FILE",
                      help="replace the table between the config-table markers of this file (docs/configuration.md)")
    docs.set_defaults(func=cmd_config_docs)

    cli_docs = sub.add_parser("cli-docs", help="print the command-line reference (markdown) from this parser")
    cli_docs.add_argument("--update", metavar="FILE",
                          help="replace the reference between the cli-reference markers of this file (docs/cli.md)")
    cli_docs.set_defaults(func=cmd_cli_docs)

    unlock = sub.add_parser("unlock-stale", help="remove the Snakemake lock a killed run left (never a live run's)")
    unlock.add_argument("snakemake_args", nargs=argparse.REMAINDER,
                        help="after --: the study's Snakemake config arguments (--configfile ...)")
    unlock.set_defaults(func=cmd_unlock_stale)

    verify = sub.add_parser("verify", help="re-read every file the jobs' manifests list against its checksum")
    verify.add_argument("paths", nargs="+", help="manifests, or folders searched for *.manifest.json "
                        "(results/STUDY/arms for a whole study)")
    verify.set_defaults(func=cmd_verify)

    from .answers import register as register_answers
    from .bench import register as register_bench
    from .darshan import register as register_darshan

    register_bench(sub)
    register_darshan(sub)
    register_answers(sub)
    sub.finish(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log)
    try:
        args.func(args)
    except (ValueError, RuntimeError, OSError) as err:
        if args.command in STUDY_START_COMMANDS and isinstance(err, ValueError):
            # what `make study` runs first: one line per problem, as the Snakefile refuses a study
            what = "cannot start the study" if args.command == "check-config" else "cluster check"
            for line in str(err).splitlines():
                print(f"cycleio: {what}: {line}", file=sys.stderr)
            return 1
        message = f"cycleio {args.command}: error: {err}"
        log.error(message, exc_info=not isinstance(err, ValueError))
        if args.log:
            print(message, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
