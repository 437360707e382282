"""Benchmarks on the tiers: what each tier can do, measured in the same study as the steps. This
module holds the plan (the points of a study, validated from its config) and runs a point.

A benchmark point is one tier x one named pattern x one task count. ``io`` patterns run IOR
(IO500-like ``easy``: a file per process and MiB transfers; ``hard``: one shared file and
47,008-byte transfers; or custom ones); ``metadata`` patterns run mdtest; ``fieldio`` runs the
field-I/O patterns of :mod:`cycleio.benchmarks.fieldio`. The replay of each step's own I/O, which the
efficiency table divides by, runs inside the steps' jobs (:mod:`cycleio.benchmarks.paired`); the plan
checks its settings and tool.

Tool choice ``auto | ior | fio`` (:mod:`cycleio.benchmarks.tools`, one module per tool): IOR and
mdtest when found (a configured path, else PATH), otherwise fio runs the equivalent pattern
(sequential blocks, ``numjobs`` tasks, direct I/O, fsync; the ``filecreate``/``filestat``/
``filedelete`` engines for metadata). The plan finds the tools when the config is loaded, so a
missing one stops the study before its first job. IOR and mdtest start through the study's launcher
template (``mpiexec -n {ntasks}``, ``srun -n {ntasks}``). Raw outputs (JSON, stdout, stderr, and a
``.meta.json`` with the exact command line) stay beside the parsed rows; a failed run fails with the
tool's own message.

Rows are :data:`cycleio.benchmarks.rows.ROW_KEYS` plus the context in
:data:`cycleio.benchmarks.common.CONTEXT_COLUMNS`: one per tier x pattern x tasks x operation x
repetition (``aggregate="rep"``) and the max/min/mean over repetitions (``aggregate`` "max", "min",
"mean"), as IOR reports them.
"""

from __future__ import annotations

import csv
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..config.keys import ConfigError, persistent_tiers, unknown_choice
from ..config.sizes import parse_size
from ..fsutil import landing
from ..storage.bbrequest import burst_buffer_request
from ..config.tierspec import Tier
from .common import COLUMNS, BenchmarkError, parse_run, run_tool, time_limit
from .points import benchmark_folder, context, finish, fresh, log_rows, summarize
from .rows import MiB
from .specs import FieldIOSpec, IOPattern, MetadataPattern, PointSettings, segments_behind_time_bound
from .tools import NATIVE, choose_tool, fio, ior, mdtest

log = logging.getLogger("cycleio")

BENCHMARKS = ("io", "metadata", "fieldio")


# --------------------------------------------------------------------------- the plan from config
# The config has passed the schema (defaults filled in, types, enums and name patterns checked): what is
# checked here spans keys or needs the tool's rules.


def _task_list(value: list[int] | None, fallback: list[int], key: str) -> list[int]:
    """A pattern's own task counts, or the benchmarks' when it gives none (null)."""
    tasks = list(fallback if value is None else value)
    if not tasks:
        raise ConfigError(f"config key '{key}': expected at least one task count")
    return tasks


def io_pattern_from_config(name: str, spec: dict, key: str, max_MiB_per_s_per_task: float) -> IOPattern:
    """A bandwidth pattern; one bounded by time gets the segments its bound needs (segments_behind_time_bound)."""
    api = spec["api"]
    transfer = parse_size(spec["transfer_size"], f"{key}.transfer_size")
    block = parse_size(spec["block_size"], f"{key}.block_size")
    if transfer % ior.WORD_BYTES:
        raise ConfigError(f"config key '{key}.transfer_size': {transfer} bytes is not a multiple of "
                          f"{ior.WORD_BYTES} bytes, as IOR requires")
    if block % transfer:
        raise ConfigError(
            f"config key '{key}.block_size': {block} bytes is not a multiple of transfer_size ({transfer} bytes), "
            "as IOR requires"
        )
    if spec["direct_io"] and api not in ("POSIX",):
        raise ConfigError(f"config key '{key}.direct_io': direct I/O is an IOR POSIX option; api is {api!r}")
    bound = float(spec["stonewall_s"])
    return IOPattern(
        name=name, api=api, file_per_proc=spec["file_per_proc"], transfer_size_bytes=transfer,
        block_size_bytes=block, fsync=spec["fsync"], direct_io=spec["direct_io"],
        segments=segments_behind_time_bound(block, spec["segments"], bound, max_MiB_per_s_per_task),
        reorder=spec["reorder"], stonewall_s=bound, random=spec["random"],
    )


def metadata_pattern_from_config(name: str, spec: dict, key: str) -> MetadataPattern:
    size = spec["file_size"]
    size = 0 if size in (0, "0") else parse_size(size, f"{key}.file_size")
    return MetadataPattern(name=name, files_per_task=spec["files_per_task"], file_size_bytes=size,
                           unique_dir=spec["unique_dir"])


@dataclass
class BenchmarkPlan:
    """The benchmark points of a study, validated; the rules ask it for files and settings."""

    enabled: bool
    study: str
    tool: str
    paths: dict
    launcher: str
    tiers: dict  # name -> Tier
    points: list = field(default_factory=list)  # (benchmark, tier, pattern, tasks)
    specs: dict = field(default_factory=dict)  # (benchmark, pattern) -> (spec dict, repetitions)
    replay: bool = True

    @classmethod
    def from_config(cls, config: dict) -> "BenchmarkPlan":
        """Check ``config["benchmarks"]`` of a config the schema has validated (defaults filled) across keys,
        IOR's size rules included, and find the tools its points will run; errors name the key.
        workflow.study.load_study calls it."""
        bench = config["benchmarks"]
        tiers_cfg = config["tiers"]
        names = bench["tiers"] or list(dict.fromkeys([*persistent_tiers(config), *config["scratch_tiers"]]))
        tiers = {}
        for index, name in enumerate(names):
            if name not in tiers_cfg:
                raise unknown_choice(f"benchmarks.tiers[{index}]", name, sorted(tiers_cfg), "a tier")
            tiers[name] = Tier(name=name, **tiers_cfg[name])
        plan = cls(enabled=bench["enabled"], study=config["study"], tool=bench["tool"],
                   paths={name: bench[f"{name}_path"] for name in ("ior", "mdtest", "fio")},
                   launcher=config["launcher"], tiers=tiers)
        tasks = list(bench["tasks"])

        def reps(spec: dict) -> int:
            return bench["repetitions"] if spec["repetitions"] is None else spec["repetitions"]

        patterns = bench["patterns"]
        for index, name in enumerate(bench["io_patterns"]):
            if name not in patterns:
                raise unknown_choice(f"benchmarks.io_patterns[{index}]", name, sorted(patterns),
                                     "a pattern in benchmarks.patterns")
            key = f"benchmarks.patterns.{name}"
            pattern = io_pattern_from_config(name, patterns[name], key, bench["stonewall_max_MiB_per_s_per_task"])
            plan._add("io", name, asdict(pattern), reps(patterns[name]),
                      _task_list(patterns[name]["tasks"], tasks, f"{key}.tasks"))
        metadata = bench["metadata"]
        for index, name in enumerate(bench["metadata_patterns"]):
            if name not in metadata:
                raise unknown_choice(f"benchmarks.metadata_patterns[{index}]", name, sorted(metadata),
                                     "a pattern in benchmarks.metadata")
            key = f"benchmarks.metadata.{name}"
            pattern = metadata_pattern_from_config(name, metadata[name], key)
            plan._add("metadata", name, asdict(pattern), reps(metadata[name]),
                      _task_list(metadata[name]["tasks"], tasks, f"{key}.tasks"))
        fio_cfg = bench["fieldio"]
        if fio_cfg["enabled"] and fio_cfg["patterns"]:
            access = [str(p) for p in fio_cfg["patterns"]]  # the schema takes 1 for "1"
            fio_tasks = list(fio_cfg["tasks"])
            if "2B" in access:
                for index, count in enumerate(fio_tasks):
                    if count < 2:
                        raise ConfigError(
                            f"config key 'benchmarks.fieldio.tasks[{index}]': {count} task cannot run access pattern 2B "
                            "(half the tasks write while the other half read); use 2 or more, or drop 2B from "
                            "benchmarks.fieldio.patterns")
            spec = FieldIOSpec(patterns=tuple(access), layouts=tuple(fio_cfg["layouts"]),
                               fields_per_task=fio_cfg["fields_per_task"],
                               field_size_bytes=parse_size(fio_cfg["field_size"], "benchmarks.fieldio.field_size"),
                               fsync=fio_cfg["fsync"])
            plan._add("fieldio", "fields", asdict(spec), reps(fio_cfg), fio_tasks)
        replay_cfg = bench["replay"]
        plan.replay = replay_cfg["enabled"]
        if plan.replay:
            transfer = replay_cfg["transfer_size"]
            if transfer != "auto":
                transfer = parse_size(transfer, "benchmarks.replay.transfer_size")
                if transfer % ior.WORD_BYTES:
                    raise ConfigError(f"config key 'benchmarks.replay.transfer_size': {transfer} bytes is not a multiple "
                                      f"of {ior.WORD_BYTES} bytes, as IOR requires (or use auto)")
            parse_size(replay_cfg["min_bytes"], "benchmarks.replay.min_bytes")
        if plan.enabled:
            plan._check_tools()
        return plan

    def _check_tools(self) -> None:
        """Find now, as each job will, the tool of every benchmark that needs one, so that a study whose
        tools are missing (or cannot run a pattern) stops before its first job."""
        needs = [(kind, IOPattern(**spec) if kind == "io" else None)
                 for (kind, _), (spec, _) in self.specs.items() if kind in NATIVE]
        if self.replay:  # the paired replay runs fio
            needs.append(("replay", None))
        for kind, pattern in needs:
            try:
                choose_tool("fio" if kind == "replay" else self.tool, kind, self.paths, pattern)
            except BenchmarkError as err:
                raise ConfigError(str(err)) from None

    def _add(self, benchmark: str, pattern: str, spec: dict, repetitions: int, tasks: list[int]) -> None:
        self.specs[(benchmark, pattern)] = (spec, repetitions)
        for tier in self.tiers:
            for count in tasks:
                self.points.append((benchmark, tier, pattern, count))

    def point_list(self, benchmark: str) -> list[tuple[str, str, int]]:
        """(tier, pattern, tasks) of every point of one benchmark."""
        return [(tier, pattern, tasks) for kind, tier, pattern, tasks in self.points if kind == benchmark]

    def settings(self, benchmark: str, tier: str, pattern: str, tasks: int) -> PointSettings:
        if (benchmark, pattern) not in self.specs or tier not in self.tiers:
            raise ValueError(f"no {benchmark} benchmark {pattern!r} on tier {tier!r} in this study's plan")
        spec, repetitions = self.specs[(benchmark, pattern)]
        return PointSettings(study=self.study, benchmark=benchmark, tier=self.tiers[tier], pattern=pattern,
                             spec=spec, tasks=int(tasks), repetitions=repetitions, tool=self.tool,
                             paths=dict(self.paths), launcher=self.launcher)

    def point_json(self, benchmark: str, tier: str, pattern: str, tasks: int | str) -> str:
        return self.settings(benchmark, tier, pattern, int(tasks)).to_json()

    def rule_resources(self) -> dict[str, Callable]:
        """Slurm resources of a benchmark job, as functions of its wildcards (``tier``, ``ntasks``):
        its tasks, one node when the tier is not shared, ``srun`` for MPI, and the tier's burst-buffer
        request. Local runs ignore them; a site overrides them in its profile."""


        def tasks(wildcards) -> int:
            return int(getattr(wildcards, "ntasks", 1))

        return {
            "tasks": tasks,
            "nodes": lambda wildcards: 1 if tasks(wildcards) == 1 or not self.tiers[wildcards.tier].shared else None,
            "mpi": lambda wildcards: "srun" if tasks(wildcards) > 1 else None,
            "slurm_extra": lambda wildcards: burst_buffer_request(self.tiers[wildcards.tier]),
        }

    # Paths, built with the workflow's one path provider ``out`` (rules/common.smk).
    def point_files(self, out: Callable) -> list[str]:
        """The CSV of every benchmark point."""
        files = [out("bench", tier, kind, f"{pattern}.n{tasks}.csv")
                 for kind in ("io", "metadata") for tier, pattern, tasks in self.point_list(kind)]
        files += [out("bench", tier, "fieldio", f"n{tasks}.csv") for tier, _, tasks in self.point_list("fieldio")]
        return files


# --------------------------------------------------------------------------- running


def _repetitions(reps: int, name: str, work: Path, one_run: Callable[[str], list[dict]], version: str | None,
                 fixed: dict) -> list[dict]:
    """Run a tool ``reps`` times, each in a fresh ``work`` folder (``one_run(rep_name)`` gives its rows); every
    row becomes a repetition's row with ``fixed``'s values (the point's and its pattern's parameters)."""
    rows: list[dict] = []
    for rep in range(reps):
        rep_name = f"{name}.rep{rep}"
        fresh(work)
        rows += [{**r, "aggregate": "rep", "repetition": rep, "repetitions": reps,
                  "tool_version": r["tool_version"] or version, **fixed} for r in one_run(rep_name)]
    return rows


def run_io(settings: PointSettings, raw_dir: Path) -> list[dict]:
    pattern, tasks, reps = settings.io_pattern(), settings.tasks, settings.repetitions
    tool = choose_tool(settings.tool, "io", settings.paths, pattern)
    site, work = benchmark_folder(settings.tier, settings.study, f"io-{pattern.name}-n{tasks}")
    site.require_space(pattern.bytes_per_task * tasks, f"pattern {pattern.name} with {tasks} tasks")
    label = f"[{settings.tier.name} io {pattern.name} n{tasks} {tool.name}]"
    name = f"{pattern.name}.n{tasks}"
    bound = f"each phase {pattern.stonewall_s:g} s, up to " if pattern.stonewall_s > 0 else ""
    log.info("%s %s%d MiB per task, transfer %d bytes, %s, %d repetitions", label, bound, pattern.bytes_per_task // MiB,
             pattern.transfer_size_bytes, "file per process" if pattern.file_per_proc else "one shared file", reps)
    nbytes = 2 * pattern.bytes_per_task * tasks  # written, then read, per repetition
    calls = nbytes / pattern.transfer_size_bytes
    version = tool.version()
    t_start = time.time()
    try:
        if tool.name == "ior":
            summary = raw_dir / f"{name}.json"
            fresh(work)
            argv = ior.command(tool.path, pattern, tasks, reps, work / "testfile", summary, settings.launcher)
            run = run_tool(tool.label, argv, raw_dir, name, time_limit(reps * nbytes, reps * calls))
            rows = parse_run(ior.parse_json, summary, tool.label, run, stdout_path=run.stdout)
            rows = [{**r, "tasks": tasks} for r in rows]
        else:
            def one_run(rep_name: str) -> list[dict]:
                if pattern.stonewall_s > 0:
                    return _fio_phases_bounded_by_time(tool, pattern, tasks, work, raw_dir, rep_name,
                                                       time_limit(nbytes, calls))
                argv = fio.io_command(tool.path, pattern, tasks, work, raw_dir / f"{rep_name}.json")
                run = run_tool(tool.label, argv, raw_dir, rep_name, time_limit(nbytes, calls))
                return parse_run(fio.parse, raw_dir / f"{rep_name}.json", tool.label, run)

            # the pattern's parameters, so rows compare across tools
            rows = _repetitions(reps, name, work, one_run, version, {
                "tasks": tasks, "file_per_proc": pattern.file_per_proc, "block_size_bytes": pattern.block_size_bytes,
                "segments": pattern.segments, "reorder": pattern.reorder, "fsync": pattern.fsync,
                "stonewall_s": pattern.stonewall_s, "cold_cache": fio.reads_from_storage(pattern)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = finish(rows, context(settings, site), t_start)
    log_rows(label, rows)
    return rows if tool.name == "ior" else rows + summarize(rows)


def _fio_phases_bounded_by_time(tool, pattern: IOPattern, tasks: int, work: Path, raw_dir: Path, rep_name: str,
                                limit: float) -> list[dict]:
    """One repetition of a pattern bounded by time with fio, as two runs: the write phase, then the read phase
    sized to what the write phase wrote (fio.io_write_command, fio.io_read_command); its write row and read row."""
    write_json, read_json = raw_dir / f"{rep_name}.write.json", raw_dir / f"{rep_name}.read.json"
    run = run_tool(tool.label, fio.io_write_command(tool.path, pattern, tasks, work, write_json), raw_dir,
                   f"{rep_name}.write", limit)
    written = parse_run(fio.parse, write_json, tool.label, run)
    argv = fio.io_read_command(tool.path, pattern, work, read_json, fio.written_per_job(write_json))
    run = run_tool(tool.label, argv, raw_dir, f"{rep_name}.read", limit)
    return [fio.group_jobs(written), *parse_run(fio.parse, read_json, tool.label, run)]


def run_metadata(settings: PointSettings, raw_dir: Path) -> list[dict]:
    pattern, tasks, reps = settings.metadata_pattern(), settings.tasks, settings.repetitions
    tool = choose_tool(settings.tool, "metadata", settings.paths)
    site, work = benchmark_folder(settings.tier, settings.study, f"md-{pattern.name}-n{tasks}")
    site.require_space(pattern.files_per_task * tasks * max(pattern.file_size_bytes, 4096), f"metadata {pattern.name}")
    label = f"[{settings.tier.name} metadata {pattern.name} n{tasks} {tool.name}]"
    log.info("%s %d files per task, %d bytes each, %s", label, pattern.files_per_task, pattern.file_size_bytes,
             "a folder per task" if pattern.unique_dir else "one shared folder")
    if tool.name == "fio" and pattern.file_size_bytes:
        log.info("%s fio's filecreate writes no data: file_size applies to mdtest only", label)
    files = pattern.files_per_task * tasks
    limit = time_limit(2 * files * pattern.file_size_bytes, 4 * files)  # create (write), stat, read, remove
    name, t_start = f"{pattern.name}.n{tasks}", time.time()
    version = tool.version()

    def one_run(rep_name: str) -> list[dict]:
        if tool.name == "mdtest":
            argv = mdtest.command(tool.path, pattern, tasks, work / "mdtest", settings.launcher)
            run = run_tool(tool.label, argv, raw_dir, rep_name, limit)
            parsed = parse_run(mdtest.parse, run.stdout, tool.label, run)
            return [r for r in parsed if r["aggregate"] == "mean"]  # -i 1: max = min = mean
        argv = fio.metadata_command(tool.path, pattern, tasks, work, raw_dir / f"{rep_name}.json")
        run = run_tool(tool.label, argv, raw_dir, rep_name, limit)
        return parse_run(fio.parse, raw_dir / f"{rep_name}.json", tool.label, run)

    try:
        rows = _repetitions(reps, name, work, one_run, version, {
            "tasks": tasks, "file_per_proc": pattern.unique_dir, "block_size_bytes": pattern.file_size_bytes,
            "segments": pattern.files_per_task})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = finish(rows, context(settings, site), t_start)
    log_rows(label, rows)
    return rows + summarize(rows)


def run_fieldio_point(settings: PointSettings, raw_dir: Path) -> list[dict]:
    from .fieldio import run_fieldio

    spec, tasks = settings.fieldio_spec(), settings.tasks
    site, work = benchmark_folder(settings.tier, settings.study, f"fieldio-n{tasks}")
    site.require_space(spec.fields_per_task * spec.field_size_bytes * tasks * 2, "field I/O")
    label = f"[{settings.tier.name} fieldio n{tasks}]"
    t_start = time.time()
    try:
        rows = run_fieldio(work, spec, tasks, settings.repetitions, settings.launcher, raw_dir,
                           f"fieldio.n{tasks}", label)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [finish([r], context(settings, site, pattern=r["job"]), t_start)[0] for r in rows]
    return rows + summarize(rows)


def run_point(settings: PointSettings, raw_dir: Path) -> list[dict]:
    """Run one benchmark point; raw outputs land in ``raw_dir``; return its rows."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "settings.json").write_text(json.dumps(asdict(settings), indent=2, sort_keys=True) + "\n")
    if settings.benchmark == "io":
        return run_io(settings, raw_dir)
    if settings.benchmark == "metadata":
        return run_metadata(settings, raw_dir)
    if settings.benchmark == "fieldio":
        return run_fieldio_point(settings, raw_dir)
    raise ValueError(f"unknown benchmark {settings.benchmark!r}; expected one of: {', '.join(BENCHMARKS)}")


def write_rows(rows: list[dict], path: Path, columns: tuple = COLUMNS) -> None:
    """Rows to CSV (atomically); None becomes an empty cell."""
    with landing(path) as tmp:
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: ("" if v is None else v) for k, v in row.items()})


__all__ = ["BenchmarkPlan", "run_point", "write_rows"]
