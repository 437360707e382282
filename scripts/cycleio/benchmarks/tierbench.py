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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..config.keys import ConfigError, persistent_tiers, unknown_choice
from ..config.sizes import parse_size
from ..fsutil import landing
from ..storage.bbrequest import burst_buffer_request
from ..config.tierspec import Tier
from . import multinode
from .common import COLUMNS, BenchmarkError, parse_run, run_tool, time_limit
from .points import benchmark_folder, context, finish, fresh, log_rows, summarize
from .rows import MiB
from .specs import (FieldIOSpec, IOPattern, MetadataPattern, PointSettings, parse_shape, segments_behind_time_bound,
                    shape_name, shape_of)
from .tools import NATIVE, choose_tool, fio, ior, mdtest

log = logging.getLogger("cycleio")

BENCHMARKS = ("io", "metadata", "fieldio")


# --------------------------------------------------------------------------- the plan from config
# The config has passed the schema (defaults filled in, types, enums and name patterns checked): what is
# checked here spans keys or needs the tool's rules.


def _task_list(value: list[int] | None, fallback: list[int], key: str, what: str = "task count") -> list[int]:
    """A pattern's own task (or node) counts, or the benchmarks' when it gives none (null)."""
    tasks = list(fallback if value is None else value)
    if not tasks:
        raise ConfigError(f"config key '{key}': expected at least one {what}")
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
    # (benchmark, tier, pattern, shape): shape is the task count on one node, or "N3.n2" (specs.shape_of)
    points: list = field(default_factory=list)
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
        tasks, nodes = list(bench["tasks"]), list(bench["nodes"])

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
                      _task_list(patterns[name]["tasks"], tasks, f"{key}.tasks"),
                      _nodes(patterns[name]["nodes"], nodes, key))
        metadata = bench["metadata"]
        for index, name in enumerate(bench["metadata_patterns"]):
            if name not in metadata:
                raise unknown_choice(f"benchmarks.metadata_patterns[{index}]", name, sorted(metadata),
                                     "a pattern in benchmarks.metadata")
            key = f"benchmarks.metadata.{name}"
            pattern = metadata_pattern_from_config(name, metadata[name], key)
            plan._add("metadata", name, asdict(pattern), reps(metadata[name]),
                      _task_list(metadata[name]["tasks"], tasks, f"{key}.tasks"),
                      _nodes(metadata[name]["nodes"], nodes, key))
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
        tools are missing (or cannot run a pattern, or a pattern across nodes) stops before its first job."""
        needs = [(kind, name, IOPattern(**spec) if kind == "io" else None)
                 for (kind, name), (spec, _) in self.specs.items() if kind in NATIVE]
        if self.replay:  # the paired replay runs fio
            needs.append(("replay", "", None))
        for kind, name, pattern in needs:
            try:
                tool = choose_tool("fio" if kind == "replay" else self.tool, kind, self.paths, pattern)
            except BenchmarkError as err:
                raise ConfigError(str(err)) from None
            if kind != "replay":
                self._check_across_nodes(kind, name, tool.name)

    def _check_across_nodes(self, kind: str, name: str, tool: str) -> None:
        """One MPI job of IOR or mdtest across nodes cannot share a file or a folder tree on a tier that each node
        has its own of (``shared: false``); fio, one per node, can (each node its own folder)."""
        spec, _ = self.specs[(kind, name)]
        if tool == "fio" or (tool == "ior" and spec["file_per_proc"]):
            return
        why = ("IOR's ranks on every node would write one shared file, of which each node would hold only its own "
               "ranks' parts" if tool == "ior" else
               "mdtest's first rank makes the folder tree every rank works in, which the other nodes would not see")
        for benchmark, tier, pattern, shape in self.points:
            nodes, _ = parse_shape(shape)
            if (benchmark, pattern) == (kind, name) and nodes > 1 and not self.tiers[tier].shared:
                key = f"benchmarks.{'patterns' if kind == 'io' else 'metadata'}.{name}.nodes"
                raise ConfigError(
                    f"config key '{key}': {kind} pattern {name} runs over {nodes} nodes on tier '{tier}', which is not "
                    f"shared across nodes (tiers.{tier}.shared: false): {why}. Set {key} to [1], leave the tier out "
                    "of benchmarks.tiers, or set benchmarks.tool to fio (one fio per node, each in its own folder)")

    def _add(self, benchmark: str, pattern: str, spec: dict, repetitions: int, tasks: list[int],
             nodes: list[int] = (1,)) -> None:
        self.specs[(benchmark, pattern)] = (spec, repetitions)
        for tier in self.tiers:
            for count in nodes:
                for per_node in tasks:
                    self.points.append((benchmark, tier, pattern, shape_of(count, per_node)))

    def point_list(self, benchmark: str) -> list[tuple[str, str, int | str]]:
        """(tier, pattern, shape) of every point of one benchmark: its task count on one node, or "N3.n2"."""
        return [(tier, pattern, shape) for kind, tier, pattern, shape in self.points if kind == benchmark]

    def settings(self, benchmark: str, tier: str, pattern: str, shape: int | str) -> PointSettings:
        """A point's settings; ``shape``: its task count on one node (4, "4", "n4") or "N3.n2" (3 nodes x 2 tasks)."""
        if (benchmark, pattern) not in self.specs or tier not in self.tiers:
            raise ValueError(f"no {benchmark} benchmark {pattern!r} on tier {tier!r} in this study's plan")
        spec, repetitions = self.specs[(benchmark, pattern)]
        nodes, per_node = parse_shape(shape)
        return PointSettings(study=self.study, benchmark=benchmark, tier=self.tiers[tier], pattern=pattern,
                             spec=spec, tasks=nodes * per_node, repetitions=repetitions, tool=self.tool,
                             paths=dict(self.paths), launcher=self.launcher, nodes=nodes)

    def point_json(self, benchmark: str, tier: str, pattern: str, shape: int | str) -> str:
        return self.settings(benchmark, tier, pattern, shape).to_json()

    def local_run_problem(self) -> str | None:
        """Why the plan cannot run without a cluster (its points over several nodes need a Slurm job each), or None."""
        spread = sorted({parse_shape(shape)[0] for *_, shape in self.points if parse_shape(shape)[0] > 1})
        if not self.enabled or not spread:
            return None
        return (f"config key 'benchmarks.nodes': points over {' and '.join(map(str, spread))} nodes run as Slurm jobs "
                "of as many nodes, but this study runs its jobs here (no cluster executor): run it with a Slurm "
                "profile (PROFILE=profiles/slurm, docs/cluster.md), or set benchmarks.nodes (and any pattern's "
                "nodes) to [1]")

    @staticmethod
    def describe(shape: int | str) -> str:
        """A point's shape in words: "2 tasks", "3 nodes x 2 tasks"."""
        nodes, per_node = parse_shape(shape)
        tasks = f"{per_node} task{'s' if per_node != 1 else ''}"
        return tasks if nodes == 1 else f"{nodes} nodes x {tasks}"

    def rule_resources(self) -> dict[str, Callable]:
        """Slurm resources of a benchmark job (:func:`point_resources`), as functions of its wildcards (``tier``,
        and ``shape`` or ``ntasks``). Local runs ignore them; a site overrides them in its profile."""
        computed: dict[tuple, dict] = {}

        def resource(key: str) -> Callable:
            def value(wildcards):
                shape = getattr(wildcards, "shape", None) or getattr(wildcards, "ntasks", 1)
                point = (wildcards.tier, *parse_shape(shape))
                if point not in computed:
                    computed[point] = point_resources(self.tiers[point[0]], *point[1:])
                return computed[point][key]

            return value

        return {key: resource(key) for key in RESOURCE_KEYS}

    # Paths, built with the workflow's one path provider ``out`` (rules/common.smk).
    def point_files(self, out: Callable) -> list[str]:
        """The CSV of every benchmark point."""
        files = [out("bench", tier, kind, f"{pattern}.{shape_name(shape)}.csv")
                 for kind in ("io", "metadata") for tier, pattern, shape in self.point_list(kind)]
        files += [out("bench", tier, "fieldio", f"n{tasks}.csv") for tier, _, tasks in self.point_list("fieldio")]
        return files


RESOURCE_KEYS = ("nodes", "tasks", "tasks_per_node", "mpi", "slurm_extra")


def point_resources(tier: Tier, nodes: int, tasks_per_node: int) -> dict:
    """Slurm resources of one benchmark job. On one node: its tasks, ``nodes: 1`` when the tier is not shared
    (Slurm may otherwise spread the ranks), ``srun`` for MPI. Over N nodes: ``nodes: N`` and N x M tasks, given as
    tasks per node (M > 1; the Slurm plugin takes one of the two) so that every node runs M, and ``srun``: the job's
    shell starts the ranks (IOR, mdtest) or one fio per node (benchmarks.nodes). Both: the tier's burst-buffer
    request. None leaves a resource to Slurm (Snakemake drops it)."""
    if nodes == 1:
        one = {"nodes": 1 if tasks_per_node == 1 or not tier.shared else None, "tasks": tasks_per_node,
               "tasks_per_node": None, "mpi": "srun" if tasks_per_node > 1 else None}
    else:
        one = {"nodes": nodes, "tasks": nodes if tasks_per_node == 1 else None,
               "tasks_per_node": tasks_per_node if tasks_per_node > 1 else None, "mpi": "srun"}
    return {**one, "slurm_extra": burst_buffer_request(tier)}


def _nodes(value: list[int] | None, fallback: list[int], key: str) -> list[int]:
    """A pattern's node counts (``key``.nodes), or benchmarks.nodes when it gives none."""
    return _task_list(value, fallback, f"{key}.nodes", "node count")


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
    name = f"{pattern.name}.{shape_name(shape_of(settings.nodes, settings.tasks_per_node))}"
    site, work = benchmark_folder(settings.tier, settings.study, f"io-{name.replace('.', '-')}")
    nodes = multinode.PointNodes(settings, work, raw_dir, name)
    site.require_space(pattern.bytes_per_task * nodes.tasks_on_a_folder(tasks),
                       f"pattern {pattern.name} with {nodes.tasks_on_a_folder(tasks)} tasks")
    label = f"[{settings.tier.name} io {name} {tool.name}]"
    bound = f"each phase {pattern.stonewall_s:g} s, up to " if pattern.stonewall_s > 0 else ""
    log.info("%s %s%d MiB per task, transfer %d bytes, %s, %d repetitions%s", label, bound,
             pattern.bytes_per_task // MiB, pattern.transfer_size_bytes,
             "file per process" if pattern.file_per_proc else "one shared file", reps,
             f", {settings.nodes} nodes x {settings.tasks_per_node} tasks" + (", each node its own folder"
                                                                             if nodes.own else "")
             if settings.nodes > 1 else "")
    nbytes = 2 * pattern.bytes_per_task * tasks  # written, then read, per repetition
    calls = nbytes / pattern.transfer_size_bytes
    version = tool.version()
    t_start = time.time()
    try:
        nodes.prepare()
        if tool.name == "ior":
            summary = raw_dir / f"{name}.json"
            # on folders of their own the nodes cannot read each other's files: each task reads its own
            argv = ior.command(tool.path, replace(pattern, reorder="none") if nodes.own else pattern, tasks, reps,
                               work / "testfile", summary, settings.launcher)
            run = run_tool(tool.label, argv, raw_dir, name, time_limit(reps * nbytes, reps * calls))
            rows = parse_run(ior.parse_json, summary, tool.label, run, stdout_path=run.stdout)
            rows = [{**r, "tasks": tasks, "nodes": settings.nodes} for r in rows]
        else:
            def one_run(rep_name: str) -> list[dict]:
                limit = time_limit(nbytes, calls)
                if settings.nodes > 1:
                    return _fio_io_across_nodes(tool, pattern, nodes, rep_name, limit)
                if pattern.stonewall_s > 0:
                    return _fio_phases_bounded_by_time(tool, pattern, tasks, work, raw_dir, rep_name, limit)
                argv = fio.io_command(tool.path, pattern, tasks, work, raw_dir / f"{rep_name}.json")
                run = run_tool(tool.label, argv, raw_dir, rep_name, limit)
                return parse_run(fio.parse, raw_dir / f"{rep_name}.json", tool.label, run)

            # the pattern's parameters, so rows compare across tools
            rows = _repetitions(reps, name, work, one_run, version, {
                "tasks": tasks, "nodes": settings.nodes, "file_per_proc": pattern.file_per_proc,
                "block_size_bytes": pattern.block_size_bytes, "segments": pattern.segments,
                "reorder": pattern.reorder, "fsync": pattern.fsync, "stonewall_s": pattern.stonewall_s,
                "cold_cache": fio.reads_from_storage(pattern)})
    finally:
        nodes.clean()
    rows = finish(rows, nodes.context(settings, site), t_start)
    log_rows(label, rows)
    return rows if tool.name == "ior" else rows + summarize(rows)


def _fio_phases_bounded_by_time(tool, pattern: IOPattern, tasks: int, work: Path, raw_dir: Path, rep_name: str,
                                limit: float) -> list[dict]:
    """One repetition of a pattern bounded by time with fio, as two runs: the write phase, then the read phase
    sized to what the write phase wrote (fio.io_write_command, fio.io_read_command); its write row and read row.
    Jobs that the others crowded out of the write phase write on untimed to as much as the busiest wrote
    (fio.io_fill_command, IOR's wear-out), so that every task reads an equal share."""
    write_json, read_json = raw_dir / f"{rep_name}.write.json", raw_dir / f"{rep_name}.read.json"
    run = run_tool(tool.label, fio.io_write_command(tool.path, pattern, tasks, work, write_json), raw_dir,
                   f"{rep_name}.write", limit)
    written = parse_run(fio.parse, write_json, tool.label, run)
    per_job = fio.written_per_job(write_json)
    fill = fio.io_fill_command(tool.path, pattern, work, raw_dir / f"{rep_name}.fill.json", per_job)
    if fill:
        log.info("%s %s: the write phase's jobs wrote %s MiB: the others fill up to the most, untimed, before the "
                 "reads", pattern.name, rep_name, ", ".join(f"{nbytes / MiB:.1f}" for nbytes in per_job))
        run_tool(tool.label, fill, raw_dir, f"{rep_name}.fill", limit)
        per_job = fio.filled(pattern, per_job)
    argv = fio.io_read_command(tool.path, pattern, work, read_json, per_job)
    run = run_tool(tool.label, argv, raw_dir, f"{rep_name}.read", limit)
    return [fio.group_jobs(written), *parse_run(fio.parse, read_json, tool.label, run)]


def _fio_io_across_nodes(tool, pattern: IOPattern, nodes: multinode.PointNodes, rep_name: str, limit: float) -> list[dict]:
    """One repetition of an io pattern with one fio per node, each with the node's tasks in its own folder, merged
    into one point (multinode.merge_nodes); bounded by time, as two runs (the read phase of each node sized to
    what it wrote), with the wear-out of the jobs crowded out of the write phase, as on one node."""
    per_node, path = nodes.per_node, tool.path
    if pattern.stonewall_s <= 0:
        runs, _ = nodes.fio(tool, lambda node, folder: fio.io_command(
            path, pattern, per_node, folder, nodes.raw_dir / f"{rep_name}.node{node}.json"), rep_name, limit)
        return multinode.merge_nodes(runs)
    write_name, fill_name, read_name = f"{rep_name}.write", f"{rep_name}.fill", f"{rep_name}.read"
    written, outputs = nodes.fio(tool, lambda node, folder: fio.io_write_command(
        path, pattern, per_node, folder, nodes.raw_dir / f"{write_name}.node{node}.json"), write_name, limit)
    per_job = [fio.written_per_job(output) for output in outputs]
    target = max(fio.fill_target(pattern, jobs) for jobs in per_job)  # the busiest job of every node (wear-out)
    fills = [fio.io_fill_command(path, pattern, node_folder, nodes.raw_dir / f"{fill_name}.node{node}.json", jobs,
                                 target) for node, (jobs, node_folder) in enumerate(zip(per_job, nodes.folders()))]
    if any(fills):
        log.info("%s %s: the write phase's jobs wrote %s MiB (per node): the others fill up to the most, untimed, "
                 "before the reads", pattern.name, rep_name,
                 "; ".join(", ".join(f"{nbytes / MiB:.1f}" for nbytes in jobs) for jobs in per_job))
        nodes.run(tool, lambda node, folder: fills[node] or ["true"], fill_name, limit)
        per_job = [fio.filled(pattern, jobs, target) if fill else jobs for jobs, fill in zip(per_job, fills)]
    reads, _ = nodes.fio(tool, lambda node, folder: fio.io_read_command(
        path, pattern, folder, nodes.raw_dir / f"{read_name}.node{node}.json", per_job[node]),
        read_name, limit, fresh_folders=False)
    return multinode.merge_nodes([[fio.group_jobs(rows)] for rows in written]) + multinode.merge_nodes(reads)


def run_metadata(settings: PointSettings, raw_dir: Path) -> list[dict]:
    pattern, tasks, reps = settings.metadata_pattern(), settings.tasks, settings.repetitions
    tool = choose_tool(settings.tool, "metadata", settings.paths)
    name = f"{pattern.name}.{shape_name(shape_of(settings.nodes, settings.tasks_per_node))}"
    site, work = benchmark_folder(settings.tier, settings.study, f"md-{name.replace('.', '-')}")
    nodes = multinode.PointNodes(settings, work, raw_dir, name)
    if nodes.own and tool.name == "mdtest":
        raise BenchmarkError(f"mdtest cannot run over {settings.nodes} nodes on tier '{settings.tier.name}', which is "
                             "not shared across nodes: its first rank makes the folder tree every rank works in "
                             f"(config key benchmarks.metadata.{pattern.name}.nodes)")
    on_a_folder = nodes.tasks_on_a_folder(tasks)
    site.require_space(pattern.files_per_task * on_a_folder * max(pattern.file_size_bytes, 4096),
                       f"metadata {pattern.name}")
    label = f"[{settings.tier.name} metadata {name} {tool.name}]"
    log.info("%s %d files per task, %d bytes each, %s", label, pattern.files_per_task, pattern.file_size_bytes,
             "a folder per task" if pattern.unique_dir else "one shared folder")
    if tool.name == "fio" and pattern.file_size_bytes:
        log.info("%s fio's filecreate writes no data: file_size applies to mdtest only", label)
    files = pattern.files_per_task * tasks
    limit = time_limit(2 * files * pattern.file_size_bytes, 4 * files)  # create (write), stat, read, remove
    t_start = time.time()
    version = tool.version()

    def one_run(rep_name: str) -> list[dict]:
        if tool.name == "mdtest":
            argv = mdtest.command(tool.path, pattern, tasks, work / "mdtest", settings.launcher)
            run = run_tool(tool.label, argv, raw_dir, rep_name, limit)
            parsed = parse_run(mdtest.parse, run.stdout, tool.label, run)
            return [r for r in parsed if r["aggregate"] == "mean"]  # -i 1: max = min = mean
        if settings.nodes > 1:
            runs, _ = nodes.fio(tool, lambda node, folder: fio.metadata_command(
                tool.path, pattern, settings.tasks_per_node, folder, raw_dir / f"{rep_name}.node{node}.json"),
                rep_name, limit)
            return multinode.merge_nodes(runs)
        argv = fio.metadata_command(tool.path, pattern, tasks, work, raw_dir / f"{rep_name}.json")
        run = run_tool(tool.label, argv, raw_dir, rep_name, limit)
        return parse_run(fio.parse, raw_dir / f"{rep_name}.json", tool.label, run)

    try:
        nodes.prepare()
        rows = _repetitions(reps, name, work, one_run, version, {
            "tasks": tasks, "nodes": settings.nodes, "file_per_proc": pattern.unique_dir,
            "block_size_bytes": pattern.file_size_bytes, "segments": pattern.files_per_task})
    finally:
        nodes.clean()
    rows = finish(rows, nodes.context(settings, site), t_start)
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
