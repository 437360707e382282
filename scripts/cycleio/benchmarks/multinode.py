"""Benchmark points over several client nodes (config benchmarks.nodes), inside the Slurm job of N nodes the
bench rule asks for (tierbench.point_resources).

IOR and mdtest are MPI programs: the launcher starts their N x M ranks across the job's nodes. fio is not: one
fio per node (``srun --ntasks-per-node=1``) runs the node's M jobs, each node in its own folder
(``node<k>`` of the point's folder, k = SLURM_NODEID) and with its own JSON output, merged here into one point
(:func:`merge_nodes`). A tier that is not shared across nodes (``shared: false``: node-local disk, memory) has
a folder of the same name on every node: it is made and removed on every node (:func:`on_every_node`), and
each node writes and reads only its own files there.

Reads reordered across nodes: IOR's ``-C -Q 1`` has each task read what the task one node over wrote (IOR 4
shifts by the ranks of a node when they are placed in blocks, by one rank when round-robin: one node either
way); mdtest's ``-N 1`` shifts its stat and read phases the same way. fio has no such option (its jobs read
their own files): it drops the pages of its files before reading instead, where the pattern reorders. On a tier
that is not shared IOR cannot reorder either (the other node's files are not there), and reads its own.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Callable

from ..process import run_command
from .common import BenchmarkError, parse_run, run_tool, time_limit, tool_failure, which
from .points import context, fresh
from .rows import MiB
from .specs import PointSettings
from .tools import fio

NODE_ID = "SLURM_NODEID"  # the node's index in the job, 0 to N-1, in every task srun starts


def node_folder(work: Path, node: int) -> Path:
    return work / f"node{node}"


def check_allocation(nodes: int, environ: dict | None = None) -> None:
    """A point over ``nodes`` > 1 nodes runs inside a Slurm job of at least as many nodes, or fails saying so."""
    if nodes <= 1:
        return
    environ = os.environ if environ is None else environ
    if not environ.get("SLURM_JOB_ID"):
        raise BenchmarkError(
            f"a benchmark point over {nodes} nodes (config key benchmarks.nodes) runs inside a Slurm job of {nodes} "
            "nodes, which the bench rule asks for on the Slurm executor (profiles/slurm); this process is in no Slurm "
            "job (SLURM_JOB_ID is not set): run the study with a Slurm profile, or set benchmarks.nodes to [1]")
    have = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES")
    if have and int(have) < nodes:
        raise BenchmarkError(f"a benchmark point over {nodes} nodes (config key benchmarks.nodes) runs in Slurm job "
                             f"{environ['SLURM_JOB_ID']}, which has {have} node(s); a profile's set-resources may "
                             "have given the bench rule fewer nodes than the point needs")


def srun_per_node(nodes: int, cpus_per_node: int) -> list[str]:
    """srun's words for one task on each of ``nodes`` nodes, holding the CPUs of the node's tasks."""
    srun = which("srun")
    if not srun:
        raise BenchmarkError(f"a benchmark point over {nodes} nodes starts one tool per node with srun, which is not "
                             "on PATH in this Slurm job")
    return [srun, f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            f"--cpus-per-task={max(1, cpus_per_node)}", "--kill-on-bad-exit=1"]


def host_file(raw_dir: Path, name: str, node: int) -> Path:
    return raw_dir / f"{name}.node{node}.host"


def per_node_script(commands: list[list[str]], raw_dir: Path, name: str, folders: list[Path] | None = None) -> str:
    """A shell script that node k of the job (``$SLURM_NODEID``) runs: write its host name beside the raw outputs,
    empty and make its folder ``folders[k]``, then ``commands[k]`` in place of the shell."""
    cases = []
    for node, argv in enumerate(commands):
        steps = [f"uname -n > {shlex.quote(str(host_file(raw_dir, name, node)))}"]
        if folders:
            folder = shlex.quote(str(folders[node]))
            steps += [f"rm -rf {folder}", f"mkdir -p {folder}"]
        cases.append(f"  {node}) {' && '.join(steps)} && exec {shlex.join(argv)} ;;")
    return "\n".join([f'case "${NODE_ID}" in', *cases,
                      f'  *) echo "cycleio: no command for node ${NODE_ID} of {len(commands)}" >&2; exit 2 ;;',
                      "esac"])


def across_nodes(commands: list[list[str]], raw_dir: Path, name: str, cpus_per_node: int,
                 folders: list[Path] | None = None) -> list[str]:
    """The argv that runs ``commands[k]`` on node k of the job, all at once (see :func:`per_node_script`)."""
    script = per_node_script(commands, raw_dir, name, folders)
    return [*srun_per_node(len(commands), cpus_per_node), "sh", "-c", script]


def on_every_node(nodes: int, command: list[str]) -> list[str]:
    """The argv that runs ``command`` once on each node (make or remove a folder of a tier each node has its own of)."""
    return [*srun_per_node(nodes, 1), *command]


def hosts(raw_dir: Path, name: str, nodes: int) -> list[str]:
    """The host names the nodes of a run wrote (:func:`per_node_script`), in node order; ``?`` for one missing."""
    names = []
    for node in range(nodes):
        path = host_file(raw_dir, name, node)
        names.append(path.read_text().strip() if path.is_file() else "?")
    return names


def merge_nodes(per_node: list[list[dict]]) -> list[dict]:
    """The rows of one run on each node (fio, a row per job and operation, each the group of that node's jobs) as
    one point's rows: per job and operation, the bytes and I/Os of every node over the longest node's seconds
    (all nodes start together under srun, so the point lasts as long as its slowest node), the latency the mean
    over every I/O, ``tasks`` the jobs of all nodes and ``nodes`` how many there were. A node without a row
    another has fails: its run did not do what the others did."""
    groups: dict[tuple, list[dict]] = {}
    for rows in per_node:
        for row in rows:
            groups.setdefault((row["job"], row["operation"]), []).append(row)
    merged = []
    for (job, operation), rows in groups.items():
        if len(rows) != len(per_node):
            raise BenchmarkError(f"fio's {operation} of job {job!r} ran on {len(rows)} of {len(per_node)} nodes: "
                                 "its outputs cannot be merged into one point")
        seconds = max(row["seconds"] or 0.0 for row in rows)
        known = [row["bytes"] for row in rows if row["bytes"] is not None]
        nbytes = sum(known) if known else None
        ios = [(row["ops_per_s"] or 0.0) * (row["seconds"] or 0.0) for row in rows]
        latencies = [(row["latency_s"], n) for row, n in zip(rows, ios) if row["latency_s"] is not None and n > 0]
        weight = sum(n for _, n in latencies)
        bandwidth = (nbytes / MiB / seconds if nbytes is not None and seconds
                     and rows[0]["bw_MiB_per_s"] is not None else None)
        merged.append({**rows[0], "aggregate": "group", "tasks": sum(row["tasks"] or 1 for row in rows),
                       "nodes": len(rows), "bytes": nbytes, "seconds": seconds or None, "bw_MiB_per_s": bandwidth,
                       "ops_per_s": sum(ios) / seconds if seconds else None,
                       "latency_s": sum(lat * n for lat, n in latencies) / weight if weight else None})
    return merged


class PointNodes:
    """Where one point runs: on one node, or over ``count`` nodes of the Slurm job (:mod:`.multinode`). ``own``:
    each node has a folder of its own on the tier (not shared across nodes), made and removed on every node."""

    def __init__(self, settings: PointSettings, work: Path, raw_dir: Path, name: str):
        self.count, self.per_node, self.work, self.raw_dir, self.name = (settings.nodes, settings.tasks_per_node,
                                                                         work, raw_dir, name)
        self.own = self.count > 1 and not settings.tier.shared
        self.hosts: list[str] = []
        check_allocation(self.count)

    def tasks_on_a_folder(self, tasks: int) -> int:
        """The tasks that share one folder: every task, or the node's where each node has its own."""
        return self.per_node if self.own else tasks

    def _made(self) -> str:
        """The file in which each node notes the highest folder of the point's path it made (shell words)."""
        return f'{shlex.quote(str(self.raw_dir / self.name))}.node"${NODE_ID}".made'

    def prepare(self) -> None:
        """The point's fresh folder: on the tier, and on every node where each has its own (each node notes the
        highest folder it made, so that :meth:`clean` leaves nothing of the point there); the nodes' names."""
        fresh(self.work)
        if self.count > 1:
            work = shlex.quote(str(self.work))
            made = (f'top=; d={work}; while [ ! -e "$d" ]; do top="$d"; d=$(dirname "$d"); done; '
                    f'mkdir -p {work} && echo "$top" > {self._made()}')
            script = "uname -n" + (f" && {made}" if self.own else "")
            argv = on_every_node(self.count, ["sh", "-c", script])
            run = run_tool("srun", argv, self.raw_dir, f"{self.name}.nodes", time_limit())
            if run.returncode != 0:
                raise tool_failure("srun", run)
            self.hosts = sorted(run.stdout.read_text().split())

    def clean(self) -> None:
        """Remove the point's folder, on every node where each has its own, with the folders above it a node made."""
        shutil.rmtree(self.work, ignore_errors=True)
        if self.own:
            script = (f'top=$(cat {self._made()} 2>/dev/null); rm -rf {shlex.quote(str(self.work))}; '
                      'if [ -n "$top" ]; then rm -rf "$top"; fi')
            run_command(on_every_node(self.count, ["sh", "-c", script]), timeout=time_limit(),
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def context(self, settings: PointSettings, site) -> dict:
        point = context(settings, site)
        return {**point, "host": ",".join(self.hosts)} if self.hosts else point

    def folders(self) -> list[Path]:
        """Each node's folder of the point, in node order."""
        return [node_folder(self.work, node) for node in range(self.count)]

    def _launch(self, tool, commands: Callable[[int, Path], list[str]], run_name: str, limit: float,
                fresh_folders: bool):
        folders = self.folders()
        argv = across_nodes([commands(node, folder) for node, folder in enumerate(folders)], self.raw_dir, run_name,
                            self.per_node, folders if fresh_folders else None)
        return run_tool(tool.label, argv, self.raw_dir, run_name, limit)

    def run(self, tool, commands: Callable[[int, Path], list[str]], run_name: str, limit: float) -> None:
        """Node k's argv ``commands(k, folder)`` on every node at once, in its own folder as it is; fails with the
        tool's words if a node's command failed."""
        run = self._launch(tool, commands, run_name, limit, fresh_folders=False)
        if run.returncode != 0:
            raise tool_failure(tool.label, run)

    def fio(self, tool, commands: Callable[[int, Path], list[str]], run_name: str, limit: float,
            fresh_folders: bool = True) -> tuple[list[list[dict]], list[Path]]:
        """fio on every node at once, node k's argv ``commands(k, folder)`` in its own folder (emptied first unless
        ``fresh_folders`` is false: a read phase reads what the write phase left); each node's rows and output."""
        outputs = [self.raw_dir / f"{run_name}.node{node}.json" for node in range(self.count)]
        run = self._launch(tool, commands, run_name, limit, fresh_folders)
        return [parse_run(fio.parse, path, tool.label, run) for path in outputs], outputs
