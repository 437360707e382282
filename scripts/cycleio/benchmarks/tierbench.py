"""Benchmarks on the tiers: what each tier can do, measured in the same study as the steps.

A benchmark point is one tier x one named pattern x one task count. ``io`` patterns run IOR
(IO500-like ``easy``: a file per process and MiB transfers; ``hard``: one shared file and
47,008-byte transfers; or custom ones); ``metadata`` patterns run mdtest; ``fieldio`` runs the
field-I/O patterns of :mod:`cycleio.benchmarks.fieldio`; ``replay`` repeats each surrogate step's I/O (same
files, same bytes per file) so the efficiency table compares like with like.

Tool choice ``auto | ior | fio``: IOR and mdtest when found (a configured path, else PATH),
otherwise fio runs the equivalent pattern (sequential blocks, ``numjobs`` tasks, direct I/O, fsync;
the ``filecreate``/``filestat``/``filedelete`` engines for metadata). IOR and mdtest start through
the study's launcher template (``mpiexec -n {ntasks}``, ``srun -n {ntasks}``). Raw outputs (JSON,
stdout, stderr, and a ``.meta.json`` with the exact command line) stay beside the parsed rows; a
failed run fails with the tool's own message.

Rows are :data:`cycleio.benchmarks.benchparse.ROW_KEYS` plus the context in :data:`CONTEXT_COLUMNS`: one per
tier x pattern x tasks x operation x repetition (``aggregate="rep"``) and the max/min/mean over
repetitions (``aggregate`` "max", "min", "mean"), as IOR reports them.
"""

from __future__ import annotations

import csv
import difflib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import benchparse
from .benchparse import BenchmarkOutputError
from .common import COLUMNS, BenchmarkError, Run, _which, launcher_argv, run_tool, tool_failure
from ..config.settings import ConfigError, persistent_tiers
from ..storage.fsutil import landing
from ..storage.tiers import Tier, check_writable, filesystem_type, free_bytes

log = logging.getLogger("cycleio")
MiB = 2**20

BENCHMARKS = ("io", "metadata", "fieldio", "replay")
TOOL_CHOICES = ("auto", "ior", "fio")
IOR_APIS = ("POSIX", "MPIIO", "HDF5", "NCMPI", "MMAP")
FIO_ENGINES = {"POSIX": "psync", "MMAP": "mmap"}  # the IOR APIs fio can stand for
REORDERS = ("none", "constant", "random")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]*$")
READ_OPERATIONS = ("read", "file_read")  # reads that the page cache may serve


# --------------------------------------------------------------------------- sizes and settings


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)


def parse_size(value: Any, key: str) -> int:
    """Bytes from 47008, "47008", "1m", "2MiB", "64k" (binary units, as IOR reads them)."""
    if isinstance(value, bool):
        raise ConfigError(f"config key '{key}': expected a size such as 1m or 47008, got {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ConfigError(
                f"config key '{key}': {value!r} is not a size; expected bytes or a number with k, m, g (e.g. 1m, 47008)"
            )
        scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[match.group(2).lower()]
        size = int(float(match.group(1)) * scale)
    if size <= 0:
        raise ConfigError(f"config key '{key}': a size must be positive, got {value!r}")
    return size


def ior_size(nbytes: int) -> str:
    """IOR's spelling of a size: 1m, 256m, 4k, or plain bytes (47008)."""
    for unit, suffix in ((2**30, "g"), (2**20, "m"), (2**10, "k")):
        if nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return str(nbytes)


@dataclass(frozen=True)
class IOPattern:
    """An IOR-style bandwidth pattern; bytes per task = block_size_bytes x segments."""

    name: str
    api: str = "POSIX"
    file_per_proc: bool = True
    transfer_size_bytes: int = 2 * MiB
    block_size_bytes: int = 64 * MiB
    segments: int = 1
    fsync: bool = True
    direct_io: bool = False
    reorder: str = "constant"
    stonewall_s: float = 0.0
    random: bool = False

    @property
    def bytes_per_task(self) -> int:
        return self.block_size_bytes * self.segments


@dataclass(frozen=True)
class MetadataPattern:
    """An mdtest-style pattern: files per task, bytes written and read per file, own folder per task."""

    name: str
    files_per_task: int = 1000
    file_size_bytes: int = 0
    unique_dir: bool = True


@dataclass(frozen=True)
class FieldIOSpec:
    patterns: tuple = ("0A", "0B", "1", "2B")
    layouts: tuple = ("file_per_field", "appended")
    fields_per_task: int = 100
    field_size_bytes: int = MiB
    fsync: bool = True


@dataclass(frozen=True)
class ReplaySpec:
    transfer_size_bytes: int = 0  # 0: the surrogates' own mean transfer per step and operation
    max_files: int = 100


@dataclass
class PointSettings:
    """Everything one benchmark job needs; rules pass it to ``cycleio bench`` as JSON."""

    study: str
    benchmark: str
    tier: Tier
    pattern: str
    spec: dict
    tasks: int
    repetitions: int
    tool: str = "auto"
    paths: dict = field(default_factory=dict)
    launcher: str = "mpiexec -n {ntasks}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "PointSettings":
        raw = json.loads(text)
        raw["tier"] = Tier(**raw["tier"])
        return cls(**raw)

    def io_pattern(self) -> IOPattern:
        return IOPattern(**self.spec)

    def metadata_pattern(self) -> MetadataPattern:
        return MetadataPattern(**self.spec)

    def fieldio_spec(self) -> FieldIOSpec:
        spec = dict(self.spec)
        spec["patterns"], spec["layouts"] = tuple(spec["patterns"]), tuple(spec["layouts"])
        return FieldIOSpec(**spec)

    def replay_spec(self) -> ReplaySpec:
        return ReplaySpec(**self.spec)


# --------------------------------------------------------------------------- the plan from config


def _unknown(key: str, value: str, allowed: list[str], what: str) -> ConfigError:
    close = difflib.get_close_matches(str(value), allowed, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ConfigError(
        f"config key '{key}': {value!r} is not {what}{hint}; expected one of: {', '.join(allowed) or '(none defined)'}"
    )


def _task_list(value, fallback: list[int], key: str) -> list[int]:
    tasks = list(fallback if value is None else value)
    for index, count in enumerate(tasks):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"config key '{key}[{index}]': expected a task count of 1 or more, got {count!r}")
    if not tasks:
        raise ConfigError(f"config key '{key}': expected at least one task count")
    return tasks


def io_pattern_from_config(name: str, spec: dict, key: str) -> IOPattern:
    api = spec.get("api", "POSIX")
    if api not in IOR_APIS:
        raise ConfigError(f"config key '{key}.api': {api!r} is not allowed; expected one of: {', '.join(IOR_APIS)}")
    reorder = spec.get("reorder", "constant")
    if reorder not in REORDERS:
        raise ConfigError(f"config key '{key}.reorder': {reorder!r} is not allowed; expected one of: {', '.join(REORDERS)}")
    transfer = parse_size(spec.get("transfer_size", "2m"), f"{key}.transfer_size")
    block = parse_size(spec.get("block_size", "64m"), f"{key}.block_size")
    if block % transfer:
        raise ConfigError(
            f"config key '{key}.block_size': {block} bytes is not a multiple of transfer_size ({transfer} bytes), "
            "as IOR requires"
        )
    if spec.get("direct_io", False) and api not in ("POSIX",):
        raise ConfigError(f"config key '{key}.direct_io': direct I/O is an IOR POSIX option; api is {api!r}")
    segments = spec.get("segments", 1)
    stonewall = spec.get("stonewall_s", 0.0)
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ConfigError(f"config key '{key}.segments': expected an integer of 1 or more, got {segments!r}")
    if isinstance(stonewall, bool) or not isinstance(stonewall, (int, float)) or stonewall < 0:
        raise ConfigError(f"config key '{key}.stonewall_s': expected seconds >= 0, got {stonewall!r}")
    return IOPattern(
        name=name, api=api, file_per_proc=bool(spec.get("file_per_proc", True)), transfer_size_bytes=transfer,
        block_size_bytes=block, segments=segments, fsync=bool(spec.get("fsync", True)),
        direct_io=bool(spec.get("direct_io", False)), reorder=reorder, stonewall_s=float(stonewall),
        random=bool(spec.get("random", False)),
    )


def metadata_pattern_from_config(name: str, spec: dict, key: str) -> MetadataPattern:
    files = spec.get("files_per_task", 1000)
    if isinstance(files, bool) or not isinstance(files, int) or files < 1:
        raise ConfigError(f"config key '{key}.files_per_task': expected an integer of 1 or more, got {files!r}")
    size = spec.get("file_size", 0)
    size = 0 if size in (0, "0") else parse_size(size, f"{key}.file_size")
    return MetadataPattern(name=name, files_per_task=files, file_size_bytes=size,
                           unique_dir=bool(spec.get("unique_dir", True)))


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
        """Validate ``config["benchmarks"]`` (defaults filled) across keys; errors name the key."""
        bench = config.get("benchmarks") or {}
        tiers_cfg = config["tiers"]
        names = bench.get("tiers") or list(dict.fromkeys([*persistent_tiers(config), *config["scratch_tiers"]]))
        tiers = {}
        for index, name in enumerate(names):
            if name not in tiers_cfg:
                raise _unknown(f"benchmarks.tiers[{index}]", name, sorted(tiers_cfg), "a tier")
            tiers[name] = Tier(name=name, **tiers_cfg[name])
        tool = bench.get("tool", "auto")
        if tool not in TOOL_CHOICES:
            raise ConfigError(f"config key 'benchmarks.tool': {tool!r} is not allowed; expected one of: auto, ior, fio")
        launcher = config.get("launcher", "mpiexec -n {ntasks}")
        try:
            launcher.format(ntasks=1)
        except (KeyError, IndexError, ValueError) as err:
            raise ConfigError(f"config key 'launcher': {launcher!r} is not a valid template ({err}); "
                              "the only placeholder is {ntasks}") from None
        plan = cls(enabled=bool(bench.get("enabled", True)), study=config["study"], tool=tool,
                   paths={name: bench.get(f"{name}_path", "") for name in ("ior", "mdtest", "fio")},
                   launcher=launcher, tiers=tiers)
        tasks = _task_list(bench.get("tasks"), [1, 2, 4], "benchmarks.tasks")
        repetitions = bench.get("repetitions", 3)

        def reps(spec: dict) -> int:
            value = spec.get("repetitions")
            return repetitions if value is None else value

        patterns = bench.get("patterns") or {}
        for index, name in enumerate(bench.get("io_patterns", [])):
            if name not in patterns:
                raise _unknown(f"benchmarks.io_patterns[{index}]", name, sorted(patterns), "a pattern in benchmarks.patterns")
            key = f"benchmarks.patterns.{name}"
            if not NAME.match(name):
                raise ConfigError(f"config key '{key}': pattern names are letters, digits and _")
            pattern = io_pattern_from_config(name, patterns[name], key)
            if tool == "fio" and pattern.api not in FIO_ENGINES:
                raise ConfigError(f"config key '{key}.api': {pattern.api} needs IOR, but benchmarks.tool is fio "
                                  f"(fio stands for {', '.join(FIO_ENGINES)} only)")
            plan._add("io", name, asdict(pattern), reps(patterns[name]),
                      _task_list(patterns[name].get("tasks"), tasks, f"{key}.tasks"))
        metadata = bench.get("metadata") or {}
        for index, name in enumerate(bench.get("metadata_patterns", [])):
            if name not in metadata:
                raise _unknown(f"benchmarks.metadata_patterns[{index}]", name, sorted(metadata),
                               "a pattern in benchmarks.metadata")
            key = f"benchmarks.metadata.{name}"
            if not NAME.match(name):
                raise ConfigError(f"config key '{key}': pattern names are letters, digits and _")
            pattern = metadata_pattern_from_config(name, metadata[name], key)
            plan._add("metadata", name, asdict(pattern), reps(metadata[name]),
                      _task_list(metadata[name].get("tasks"), tasks, f"{key}.tasks"))
        fio_cfg = bench.get("fieldio") or {}
        if fio_cfg.get("enabled", True) and fio_cfg.get("patterns", ["0A"]):
            from .fieldio import LAYOUTS, PATTERNS

            access = [str(p) for p in fio_cfg.get("patterns", list(PATTERNS))]
            for index, name in enumerate(access):
                if name not in PATTERNS:
                    raise _unknown(f"benchmarks.fieldio.patterns[{index}]", name, list(PATTERNS), "a field-I/O access pattern")
            layouts = list(fio_cfg.get("layouts", list(LAYOUTS)))
            for index, name in enumerate(layouts):
                if name not in LAYOUTS:
                    raise _unknown(f"benchmarks.fieldio.layouts[{index}]", name, list(LAYOUTS), "a field layout")
            fio_tasks = _task_list(fio_cfg.get("tasks"), [2, 4], "benchmarks.fieldio.tasks")
            if "2B" in access:
                for index, count in enumerate(fio_tasks):
                    if count < 2:
                        raise ConfigError(
                            f"config key 'benchmarks.fieldio.tasks[{index}]': {count} task cannot run access pattern 2B "
                            "(half the tasks write while the other half read); use 2 or more, or drop 2B from "
                            "benchmarks.fieldio.patterns")
            fields_per_task = fio_cfg.get("fields_per_task", 100)
            if isinstance(fields_per_task, bool) or not isinstance(fields_per_task, int) or fields_per_task < 1:
                raise ConfigError(f"config key 'benchmarks.fieldio.fields_per_task': expected an integer of 1 or more, "
                                  f"got {fields_per_task!r}")
            spec = FieldIOSpec(patterns=tuple(access), layouts=tuple(layouts), fields_per_task=fields_per_task,
                               field_size_bytes=parse_size(fio_cfg.get("field_size", "1m"), "benchmarks.fieldio.field_size"),
                               fsync=bool(fio_cfg.get("fsync", True)))
            plan._add("fieldio", "fields", asdict(spec), reps(fio_cfg), fio_tasks)
        replay_cfg = bench.get("replay") or {}
        plan.replay = bool(replay_cfg.get("enabled", True))
        if plan.replay:
            spec = ReplaySpec(
                transfer_size_bytes=0 if replay_cfg.get("transfer_size", "auto") == "auto" else parse_size(
                    replay_cfg["transfer_size"], "benchmarks.replay.transfer_size"),
                max_files=int(replay_cfg.get("max_files", 100)),
            )
            plan.specs[("replay", "steps")] = (asdict(spec), reps(replay_cfg))
        return plan

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

    def replay_json(self, tier: str) -> str:
        spec, repetitions = self.specs[("replay", "steps")]
        return PointSettings(study=self.study, benchmark="replay", tier=self.tiers[tier], pattern="steps", spec=spec,
                             tasks=1, repetitions=repetitions, tool=self.tool, paths=dict(self.paths),
                             launcher=self.launcher).to_json()

    def rule_resources(self) -> dict[str, Callable]:
        """Slurm resources of a benchmark job, as functions of its wildcards (``tier``, ``ntasks``):
        its tasks, one node when the tier is not shared, ``srun`` for MPI, and the tier's burst-buffer
        request. Local runs ignore them; a site overrides them in its profile."""

        def request(tier: Tier) -> str:
            try:
                from ..workflow.slurm import burst_buffer_request
            except ImportError:
                return ""
            return burst_buffer_request(tier)

        def tasks(wildcards) -> int:
            return int(getattr(wildcards, "ntasks", 1))

        return {
            "tasks": tasks,
            "nodes": lambda wildcards: 1 if tasks(wildcards) == 1 or not self.tiers[wildcards.tier].shared else None,
            "mpi": lambda wildcards: "srun" if tasks(wildcards) > 1 else None,
            "slurm_extra": lambda wildcards: request(self.tiers[wildcards.tier]),
        }

    # Paths, built with the workflow's one path provider ``out`` (rules/common.smk).
    def point_files(self, out: Callable) -> list[str]:
        """The CSV of every benchmark point (and of each tier's replay)."""
        files = [out("bench", tier, kind, f"{pattern}.n{tasks}.csv")
                 for kind in ("io", "metadata") for tier, pattern, tasks in self.point_list(kind)]
        files += [out("bench", tier, "fieldio", f"n{tasks}.csv") for tier, _, tasks in self.point_list("fieldio")]
        if self.replay:
            files += [out("bench", tier, "replay.csv") for tier in self.tiers]
        return files


# --------------------------------------------------------------------------- tools


@dataclass(frozen=True)
class Tool:
    name: str  # ior, mdtest, fio
    path: str


def find_tool(name: str, configured: str = "") -> str | None:
    """A tool's executable: the configured path (or command name), else ``name`` on PATH."""
    if configured:
        candidate = os.path.expandvars(os.path.expanduser(configured))
        if os.sep in candidate:
            if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
                raise BenchmarkError(f"config key 'benchmarks.{name}_path': {configured!r} is not an executable file")
            return candidate
        found = _which(candidate)
        if not found:
            raise BenchmarkError(f"config key 'benchmarks.{name}_path': {configured!r} is not found on PATH")
        return found
    return _which(name)


def choose_tool(choice: str, benchmark: str, paths: dict) -> Tool:
    """IOR (io, replay) or mdtest (metadata) when found and allowed, else fio."""
    native = {"io": "ior", "replay": "ior", "metadata": "mdtest"}[benchmark]
    if choice in ("auto", "ior"):
        path = find_tool(native, paths.get(native, ""))
        if path:
            return Tool(native, path)
        if choice == "ior":
            raise BenchmarkError(
                f"benchmarks.tool is 'ior' but {native} was not found (benchmarks.{native}_path is "
                f"{paths.get(native, '')!r}, and {native} is not on PATH). IOR and mdtest cannot be installed from "
                "the package registries here: build them (https://github.com/hpc/ior) and set "
                f"benchmarks.{native}_path, or set benchmarks.tool to auto or fio"
            )
    path = find_tool("fio", paths.get("fio", ""))
    if not path:
        raise BenchmarkError("fio was not found on PATH (and benchmarks.fio_path is empty); install it "
                             "(Debian: apt-get install fio) or set benchmarks.fio_path")
    return Tool("fio", path)


def fio_version(path: str) -> str:
    result = subprocess.run([path, "--version"], capture_output=True, text=True)
    return result.stdout.strip().removeprefix("fio-")


# --------------------------------------------------------------------------- commands


def ior_command(ior: str, pattern: IOPattern, tasks: int, repetitions: int, test_file: Path,
                summary_file: Path, launcher: str) -> list[str]:
    """IOR's argv (behind the launcher): write then read, JSON summary to ``summary_file``.

    Options come in the order of the IOR 4.0.0 runs in tests/data, so those command lines are
    reproduced exactly.
    """
    argv = [*launcher_argv(launcher, tasks), ior, "-a", pattern.api]
    if pattern.file_per_proc:
        argv.append("-F")
    if pattern.random:
        argv.append("-z")
    argv += ["-w", "-r", "-t", ior_size(pattern.transfer_size_bytes), "-b", ior_size(pattern.block_size_bytes)]
    if pattern.segments != 1:
        argv += ["-s", str(pattern.segments)]
    if pattern.fsync:
        argv.append("-e")
    if pattern.reorder == "constant":
        argv += ["-C", "-Q", "1"]
    elif pattern.reorder == "random":
        argv.append("-Z")
    if pattern.stonewall_s > 0:
        argv += ["-D", f"{pattern.stonewall_s:g}"]
    argv += ["-i", str(repetitions)]
    if pattern.direct_io:
        argv.append("--posix.odirect")
    argv += ["-o", str(test_file), "-O", "summaryFormat=JSON", "-O", f"summaryFile={summary_file}"]
    return argv


def mdtest_command(mdtest: str, pattern: MetadataPattern, tasks: int, directory: Path, launcher: str) -> list[str]:
    """mdtest's argv for one repetition on files only, with the rate and time tables (-P)."""
    argv = [*launcher_argv(launcher, tasks), mdtest, "-n", str(pattern.files_per_task), "-i", "1",
            "-d", str(directory), "-F", "-P", "-N", "1"]
    if pattern.unique_dir:
        argv.append("-u")
    if pattern.file_size_bytes:
        argv += ["-w", str(pattern.file_size_bytes), "-e", str(pattern.file_size_bytes)]
    return argv


def fio_io_command(fio: str, pattern: IOPattern, tasks: int, directory: Path, json_out: Path) -> list[str]:
    """fio's equivalent of the IOR pattern: ``tasks`` jobs write, then (stonewall) read back.

    File per process: each job its own file of block x segments bytes. Shared file: job k writes
    IOR's layout, block k of every segment (fio zones: a block, then skip the other tasks' blocks).
    """
    block, segments, n = pattern.block_size_bytes, pattern.segments, tasks
    argv = [fio, "--output-format=json", f"--output={json_out}", f"--directory={directory}",
            f"--ioengine={FIO_ENGINES[pattern.api]}", f"--bs={pattern.transfer_size_bytes}", f"--numjobs={n}",
            "--group_reporting", "--fallocate=none"]
    if pattern.direct_io:
        argv.append("--direct=1")
    if pattern.file_per_proc:
        argv += ["--filename_format=cycleio.$jobnum", f"--size={block * segments}"]
    else:
        argv.append("--filename=shared.dat")
        if n == 1:
            argv.append(f"--size={block * segments}")
        elif segments == 1:
            argv += [f"--size={block}", f"--offset_increment={block}"]
        else:
            argv += [f"--size={(segments - 1) * n * block + block}", f"--io_size={segments * block}",
                     f"--offset_increment={block}", "--zonemode=strided", f"--zonerange={block}",
                     f"--zonesize={block}", f"--zoneskip={(n - 1) * block}"]
    if pattern.stonewall_s > 0:
        argv.append(f"--runtime={int(round(pattern.stonewall_s * 1000))}ms")
    rw_write, rw_read = ("randwrite", "randread") if pattern.random else ("write", "read")
    argv += ["--name=write", f"--rw={rw_write}"] + (["--end_fsync=1"] if pattern.fsync else [])
    argv += ["--name=read", "--stonewall", f"--rw={rw_read}"]
    return argv


def fio_metadata_command(fio: str, pattern: MetadataPattern, tasks: int, directory: Path, json_out: Path) -> list[str]:
    """fio's equivalent of mdtest on files: create, then stat, then remove every file."""
    name_format = "d$jobnum/f.$filenum" if pattern.unique_dir else "f.$jobnum.$filenum"
    return [fio, "--output-format=json", f"--output={json_out}", f"--directory={directory}", f"--numjobs={tasks}",
            "--group_reporting", f"--nrfiles={pattern.files_per_task}", "--filesize=4k", "--bs=4k",
            "--openfiles=1", f"--filename_format={name_format}",
            "--name=create", "--ioengine=filecreate", "--rw=write", "--create_on_open=1", "--fallocate=none",
            "--name=stat", "--stonewall", "--ioengine=filestat", "--rw=read",
            "--name=remove", "--stonewall", "--ioengine=filedelete", "--rw=read"]


def fio_replay_command(fio: str, files: int, file_bytes: int, transfer: int, directory: Path, json_out: Path,
                       read: bool = False, cold: bool = False) -> list[str]:
    """One task writes ``files`` files one after the other (fsync at close, as the steps land
    files); with ``read``, then reads them back, from the page cache as a step reads what an earlier
    step just wrote, or with ``cold`` from storage (fio drops the files' cached pages first), as the
    step's reads were (see replay_specs)."""
    argv = [fio, "--output-format=json", f"--output={json_out}", f"--directory={directory}", "--ioengine=psync",
            f"--invalidate={int(cold)}",
            f"--bs={transfer}", f"--nrfiles={files}", f"--filesize={file_bytes}", f"--size={files * file_bytes}",
            "--file_service_type=sequential", "--openfiles=1", "--fallocate=none", "--filename_format=replay.$filenum",
            "--name=write", "--rw=write", "--create_on_open=1", "--fsync_on_close=1"]
    return argv + (["--name=read", "--stonewall", "--rw=read"] if read else [])


def ior_replay_command(ior: str, files: int, file_bytes: int, transfer: int, test_file: Path, summary_file: Path,
                       launcher: str, read: bool = False) -> list[str]:
    """IOR's replay: one task, one file per repetition (-m), fsync after writing; -r to read back."""
    return [*launcher_argv(launcher, 1), ior, "-a", "POSIX", "-w", *(["-r"] if read else []), "-t", ior_size(transfer),
            "-b", ior_size(file_bytes), "-e", "-m", "-i", str(files), "-o", str(test_file),
            "-O", "summaryFormat=JSON", "-O", f"summaryFile={summary_file}"]


# --------------------------------------------------------------------------- running


def _parse(parser: Callable, path: Path, tool: str, run: Run, **kwargs) -> list[dict]:
    try:
        rows = parser(path, **kwargs)
    except BenchmarkOutputError as err:
        raise tool_failure(tool, run, str(err), output=path) from None
    if run.returncode != 0:
        raise tool_failure(tool, run, output=path)
    return rows


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


class TierSite:
    """A tier resolved where the job runs: its benchmark folder and probed filesystem type."""

    def __init__(self, tier: Tier, study: str, label: str):
        self.tier = tier
        self.base = tier.resolve(study)
        check_writable(tier.name, self.base)
        self.fs_type = filesystem_type(self.base)
        self.root = self.base / study / "bench" / label
        self.root.parent.mkdir(parents=True, exist_ok=True)
        try:  # Lustre striping for new files, where the tiers module can set it
            from ..storage.tiers import apply_striping

            done = apply_striping(tier, self.root.parent)
            if done:
                log.info("tier %s: %s", tier.name, done)
        except ImportError:
            pass

    def require_space(self, nbytes: int, what: str) -> None:
        free = free_bytes(self.base)
        if nbytes > 0.9 * free:
            raise BenchmarkError(
                f"tier '{self.tier.name}' ({self.base}): {what} needs {nbytes / MiB:.1f} MiB but only "
                f"{free / MiB:.1f} MiB are free; lower the sizes in benchmarks or free space")

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _context(settings: PointSettings, site: TierSite, pattern: str | None = None) -> dict:
    return {"study": settings.study, "benchmark": settings.benchmark, "pattern": pattern or settings.pattern,
            "tier": settings.tier.name, "tier_kind": settings.tier.kind, "fs_type": site.fs_type,
            "host": socket.gethostname()}


def _finish(rows: list[dict], context: dict, t_start: float, overrides: dict | None = None) -> list[dict]:
    out = []
    for row in rows:
        row = {**row, **(overrides or {})}
        full = {**context, **row}
        full["cache_risk"] = (row["operation"] in READ_OPERATIONS and not row.get("direct_io")
                              and not row.get("cold_cache"))
        full["t_start"] = round(t_start, 3)
        out.append({key: full.get(key) for key in COLUMNS})
    return out


def summarize(rows: list[dict]) -> list[dict]:
    """Max, min and mean over repetitions of the rep rows (as IOR's summary) per job x operation."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["aggregate"] == "rep":
            groups.setdefault((row["pattern"], row["api"], row["job"], row["operation"], row["tasks"]), []).append(row)
    out = []
    for reps in groups.values():
        def values(key):
            return [r[key] for r in reps if r[key] is not None]

        for agg, pick in (("max", max), ("min", min), ("mean", lambda v: sum(v) / len(v))):
            summary = {**reps[0], "aggregate": agg, "repetition": None, "source": reps[0]["source"]}
            for key in ("bw_MiB_per_s", "ops_per_s"):
                vals = values(key)
                summary[key] = pick(vals) if vals else None
            for key in ("latency_s", "seconds", "bytes"):
                vals = values(key)
                mean = sum(vals) / len(vals) if vals else None
                summary[key] = (int(round(mean)) if key == "bytes" and mean is not None else mean) if agg == "mean" else None
            starts = [r["t_start"] for r in reps if r.get("t_start") is not None]
            summary["t_start"] = min(starts) if starts else None
            out.append(summary)
    return out


def _log_rows(label: str, rows: list[dict]) -> None:
    for row in rows:
        if row["aggregate"] == "rep":
            rate = (f"{row['bw_MiB_per_s']:.1f} MiB/s" if row["bw_MiB_per_s"] is not None
                    else f"{row['ops_per_s']:.0f} ops/s" if row["ops_per_s"] is not None else "-")
            log.info("%s rep %s: %s %s", label, row["repetition"], row["operation"], rate)


def run_io(settings: PointSettings, raw_dir: Path) -> list[dict]:
    pattern, tasks, reps = settings.io_pattern(), settings.tasks, settings.repetitions
    tool = choose_tool(settings.tool, "io", settings.paths)
    if tool.name == "fio" and pattern.api not in FIO_ENGINES:
        raise BenchmarkError(
            f"config key 'benchmarks.patterns.{pattern.name}.api': {pattern.api} needs IOR, which was not found; "
            f"fio stands for {', '.join(FIO_ENGINES)} only (set benchmarks.ior_path)")
    site = TierSite(settings.tier, settings.study, f"io-{pattern.name}-n{tasks}")
    site.require_space(pattern.bytes_per_task * tasks, f"pattern {pattern.name} with {tasks} tasks")
    label = f"[{settings.tier.name} io {pattern.name} n{tasks} {tool.name}]"
    name = f"{pattern.name}.n{tasks}"
    log.info("%s %d MiB per task, transfer %d bytes, %s, %d repetitions", label, pattern.bytes_per_task // MiB,
             pattern.transfer_size_bytes, "file per process" if pattern.file_per_proc else "one shared file", reps)
    t_start = time.time()
    try:
        if tool.name == "ior":
            summary = raw_dir / f"{name}.json"
            _fresh(site.root)
            argv = ior_command(tool.path, pattern, tasks, reps, site.root / "testfile", summary, settings.launcher)
            run = run_tool(argv, raw_dir, name)
            rows = _parse(benchparse.parse_ior_json, summary, "IOR", run, stdout_path=run.stdout)
            rows = [{**r, "tasks": tasks} for r in rows]
        else:
            version, rows = fio_version(tool.path), []
            for rep in range(reps):
                rep_name = f"{name}.rep{rep}"
                _fresh(site.root)
                argv = fio_io_command(tool.path, pattern, tasks, site.root, raw_dir / f"{rep_name}.json")
                run = run_tool(argv, raw_dir, rep_name)
                parsed = _parse(benchparse.parse_fio_json, raw_dir / f"{rep_name}.json", "fio", run)
                rows += [{**r, "aggregate": "rep", "repetition": rep, "repetitions": reps, "tasks": tasks,
                          "tool_version": r["tool_version"] or version,
                          # the pattern's parameters, so rows compare across tools (fio cannot reorder)
                          "file_per_proc": pattern.file_per_proc, "block_size_bytes": pattern.block_size_bytes,
                          "segments": pattern.segments, "reorder": "none", "fsync": pattern.fsync,
                          "stonewall_s": pattern.stonewall_s} for r in parsed]
    finally:
        site.cleanup()
    rows = _finish(rows, _context(settings, site), t_start)
    _log_rows(label, rows)
    return rows if tool.name == "ior" else rows + summarize(rows)


def run_metadata(settings: PointSettings, raw_dir: Path) -> list[dict]:
    pattern, tasks, reps = settings.metadata_pattern(), settings.tasks, settings.repetitions
    tool = choose_tool(settings.tool, "metadata", settings.paths)
    site = TierSite(settings.tier, settings.study, f"md-{pattern.name}-n{tasks}")
    site.require_space(pattern.files_per_task * tasks * max(pattern.file_size_bytes, 4096), f"metadata {pattern.name}")
    label = f"[{settings.tier.name} metadata {pattern.name} n{tasks} {tool.name}]"
    log.info("%s %d files per task, %d bytes each, %s", label, pattern.files_per_task, pattern.file_size_bytes,
             "a folder per task" if pattern.unique_dir else "one shared folder")
    if tool.name == "fio" and pattern.file_size_bytes:
        log.info("%s fio's filecreate writes no data: file_size applies to mdtest only", label)
    name, rows, t_start = f"{pattern.name}.n{tasks}", [], time.time()
    version = fio_version(tool.path) if tool.name == "fio" else None
    try:
        for rep in range(reps):
            rep_name = f"{name}.rep{rep}"
            _fresh(site.root)
            if tool.name == "mdtest":
                run = run_tool(mdtest_command(tool.path, pattern, tasks, site.root / "mdtest", settings.launcher),
                               raw_dir, rep_name)
                parsed = _parse(benchparse.parse_mdtest_text, run.stdout, "mdtest", run)
                parsed = [r for r in parsed if r["aggregate"] == "mean"]  # -i 1: max = min = mean
            else:
                argv = fio_metadata_command(tool.path, pattern, tasks, site.root, raw_dir / f"{rep_name}.json")
                run = run_tool(argv, raw_dir, rep_name)
                parsed = _parse(benchparse.parse_fio_json, raw_dir / f"{rep_name}.json", "fio", run)
                parsed = [{**r, "tool_version": r["tool_version"] or version} for r in parsed]
            rows += [{**r, "aggregate": "rep", "repetition": rep, "repetitions": reps, "tasks": tasks,
                      "file_per_proc": pattern.unique_dir, "block_size_bytes": pattern.file_size_bytes,
                      "segments": pattern.files_per_task} for r in parsed]
    finally:
        site.cleanup()
    rows = _finish(rows, _context(settings, site), t_start)
    _log_rows(label, rows)
    return rows + summarize(rows)


def run_fieldio_point(settings: PointSettings, raw_dir: Path) -> list[dict]:
    from .fieldio import run_fieldio

    spec, tasks = settings.fieldio_spec(), settings.tasks
    site = TierSite(settings.tier, settings.study, f"fieldio-n{tasks}")
    site.require_space(spec.fields_per_task * spec.field_size_bytes * tasks * 2, "field I/O")
    label = f"[{settings.tier.name} fieldio n{tasks}]"
    t_start = time.time()
    try:
        rows = run_fieldio(site.root, spec, tasks, settings.repetitions, settings.launcher, raw_dir,
                           f"fieldio.n{tasks}", label)
    finally:
        site.cleanup()
    rows = [_finish([r], _context(settings, site, pattern=r["job"]), t_start)[0] for r in rows]
    return rows + summarize(rows)


def replay_specs(events, tier: str, spec: ReplaySpec) -> list[dict]:
    """Per surrogate step and operation on a tier: the files of one job, their mean size and transfer size.

    ``events`` are the study's records (io_events); only the run phase's reads and writes count.
    The transfer size is the surrogates' own (bytes over storage calls, from the records' ``transfers``),
    rounded down to a multiple of 8 bytes (IOR's rule), unless the spec fixes one. A read plan is
    ``cold`` when under half of the step's bytes were in the page cache as its reads began (the
    records' ``cached_fraction``): its replay then reads from storage too.
    """
    run = events[(events["tier"] == tier) & (events["phase"] == "run") & events["op"].isin(["read", "write"])
                 & (events["step"] != "coldstart") & (events["bytes"] > 0)]
    out = []
    for (step, op), group in run.groupby(["step", "op"], sort=True):
        per_job = group.groupby(["arm", "cycle"])["bytes"].agg(["size", "sum"])
        files = int(round(float(per_job["size"].median())))
        file_bytes = int(group["bytes"].sum() // len(group))
        transfer = spec.transfer_size_bytes
        if not transfer:
            calls = int(group["transfers"].sum()) if "transfers" in group else 0
            transfer = int(group["bytes"].sum() // calls) if calls > 0 else MiB
        transfer = max(8, min(transfer, file_bytes) // 8 * 8)
        file_bytes = max(transfer, file_bytes - file_bytes % transfer)
        cached = _cached_share(group) if op == "read" else None
        out.append({"step": step, "op": op, "files": max(1, min(files, spec.max_files)), "files_per_job": files,
                    "file_bytes": file_bytes, "transfer_bytes": transfer, "cached_fraction": cached,
                    "cold": cached is not None and cached < 0.5})
    return out


def _cached_share(reads) -> float | None:
    """Share of these reads' bytes that the page cache held as they began; None if not measured."""
    if "cached_fraction" not in reads:
        return None
    known = reads[reads["cached_fraction"].notna()]
    total = known["bytes"].sum()
    return float((known["cached_fraction"] * known["bytes"]).sum() / total) if total > 0 else None


def run_replay(settings: PointSettings, raw_dir: Path, events_path: Path) -> list[dict]:
    """Replay each step's writes and reads on the tier with IOR or fio: one task, the files of one
    of the step's jobs (count, mean size), fsync per file; a step's reads read such files back."""
    import pandas as pd

    spec, reps = settings.replay_spec(), settings.repetitions
    events = pd.read_parquet(events_path)
    events = events[[c for c in ("arm", "cycle", "step", "phase", "op", "tier", "bytes", "transfers",
                                          "cached_fraction") if c in events]]
    plans = replay_specs(events, settings.tier.name, spec)
    tool = choose_tool(settings.tool, "replay", settings.paths)
    site = TierSite(settings.tier, settings.study, "replay")
    label = f"[{settings.tier.name} replay {tool.name}]"
    if not plans:
        log.info("%s no step ran on this tier: nothing to replay", label)
        return []
    version = fio_version(tool.path) if tool.name == "fio" else None
    rows: list[dict] = []
    t_start = time.time()
    try:
        for plan in plans:
            # the step's files (count and mean size) are written (and for a read plan read back);
            # the step's own operation is kept
            step, op = plan["step"], plan["op"]
            site.require_space(plan["files"] * plan["file_bytes"], f"replay of {step}")
            log.info("%s %s %s: %d files of %.2f MiB (the step's jobs %s %d), transfer %d bytes", label, step, op,
                     plan["files"], plan["file_bytes"] / MiB, op, plan["files_per_job"], plan["transfer_bytes"])
            if plan["cold"]:
                log.info("%s %s read: %.0f%% of the step's bytes were cached as it read them: the replay reads from "
                         "storage%s", label, step, 100 * plan["cached_fraction"],
                         "" if tool.name == "fio" else " where it can (IOR cannot drop its files' pages: it reads warm)")
            name = f"replay-{step}-{op}"
            step_rows: list[dict] = []
            if tool.name == "ior":
                _fresh(site.root)
                summary = raw_dir / f"{name}.json"
                argv = ior_replay_command(tool.path, plan["files"], plan["file_bytes"], plan["transfer_bytes"],
                                          site.root / "replay", summary, settings.launcher, read=op == "read")
                run = run_tool(argv, raw_dir, name)
                parsed = _parse(benchparse.parse_ior_json, summary, "IOR", run, stdout_path=run.stdout)
                step_rows = _replay_totals(parsed, plan, reps)
            else:
                for rep in range(reps):
                    _fresh(site.root)
                    rep_name = f"{name}.rep{rep}"
                    argv = fio_replay_command(tool.path, plan["files"], plan["file_bytes"], plan["transfer_bytes"],
                                              site.root, raw_dir / f"{rep_name}.json", read=op == "read",
                                              cold=plan["cold"])
                    run = run_tool(argv, raw_dir, rep_name)
                    parsed = _parse(benchparse.parse_fio_json, raw_dir / f"{rep_name}.json", "fio", run)
                    step_rows += [{**r, "aggregate": "rep", "repetition": rep, "repetitions": reps,
                                   "tool_version": r["tool_version"] or version, "segments": plan["files"],
                                   "block_size_bytes": plan["file_bytes"], "fsync": True} for r in parsed]
            step_rows = [{**r, "cold_cache": plan["cold"] and tool.name == "fio"} for r in step_rows
                         if r["operation"] == op]
            rows += _finish(step_rows, _context(settings, site, pattern=step), t_start)
    finally:
        site.cleanup()
    _log_rows(label, rows)
    return rows + summarize(rows)


def _replay_totals(parsed: list[dict], plan: dict, reps: int) -> list[dict]:
    """IOR's -m replay gives a repetition per file: one rep row per operation, bytes over seconds."""
    out = []
    per_file = [r for r in parsed if r["aggregate"] == "rep"]
    for op in ("write", "read"):
        rows = [r for r in per_file if r["operation"] == op]
        if not rows:
            continue
        nbytes = sum(r["bytes"] or 0 for r in rows)
        seconds = sum(r["seconds"] or 0 for r in rows)
        latency = [r["latency_s"] for r in rows if r["latency_s"] is not None]
        out.append({**rows[0], "aggregate": "rep", "repetition": 0, "repetitions": 1, "segments": plan["files"],
                    "bw_MiB_per_s": nbytes / MiB / seconds if seconds else None,
                    "ops_per_s": nbytes / plan["transfer_bytes"] / seconds if seconds else None,
                    "latency_s": sum(latency) / len(latency) if latency else None, "seconds": seconds,
                    "bytes": nbytes})
    return out


def run_point(settings: PointSettings, raw_dir: Path, events_path: Path | None = None) -> list[dict]:
    """Run one benchmark point; raw outputs land in ``raw_dir``; return its rows."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "settings.json").write_text(json.dumps(asdict(settings), indent=2, sort_keys=True) + "\n")
    if settings.benchmark == "io":
        return run_io(settings, raw_dir)
    if settings.benchmark == "metadata":
        return run_metadata(settings, raw_dir)
    if settings.benchmark == "fieldio":
        return run_fieldio_point(settings, raw_dir)
    if settings.benchmark == "replay":
        if events_path is None:
            raise BenchmarkError("a replay needs the study's io_events table (--events)")
        return run_replay(settings, raw_dir, events_path)
    raise ValueError(f"unknown benchmark {settings.benchmark!r}; expected one of: {', '.join(BENCHMARKS)}")


def write_rows(rows: list[dict], path: Path, columns: tuple = COLUMNS) -> None:
    """Rows to CSV (atomically); None becomes an empty cell."""
    with landing(path) as tmp:
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                writer.writerow({k: ("" if v is None else v) for k, v in row.items()})


__all__ = [
    "BenchmarkPlan", "IOPattern", "MetadataPattern", "PointSettings",
    "choose_tool", "fio_io_command", "fio_metadata_command", "ior_command", "mdtest_command", "parse_size",
    "run_point", "summarize", "write_rows",
]
