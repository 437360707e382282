"""Benchmarks across client nodes (config benchmarks.nodes, cycleio.benchmarks.multinode): the plan and its
errors, the Slurm resources, the command lines, the merge of real per-node fio outputs (real fio 3.33 runs
in tests/data/fio), a point over three "nodes" that a stand-in srun runs on this machine with the real
fio, and one real run over the three nodes of the localhost Slurm (``ci/slurm/start.sh --nodes 3``)."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from conftest import REPO, require_tool, with_changes
from cycleio.benchmarks import multinode
from cycleio.benchmarks import tierbench as tb
from cycleio.benchmarks.common import BenchmarkError
from cycleio.benchmarks.specs import IOPattern, MetadataPattern, parse_shape, shape_name, shape_of
from cycleio.benchmarks.tools import fio, ior, mdtest
from cycleio.config.settings import ConfigError, validate_config
from cycleio.config.tierspec import Tier
from cycleio.report.benchtables import benchmark_table, load_points
from cycleio.report.scaling import capacity_plan, fit_lines, fit_table

SAMPLES = Path(__file__).parent / "data" / "fio"
MIB = 2**20


# ------------------------------------------------------------------------- shapes, plan, errors, resources


@pytest.mark.parametrize("shape, nodes, tasks, name", [(4, 1, 4, "n4"), ("4", 1, 4, "n4"), ("n4", 1, 4, "n4"),
                                                      ("N3.n2", 3, 2, "N3.n2"), ("N1.n2", 1, 2, "n2")])
def test_a_points_shape_is_its_nodes_and_tasks_per_node(shape, nodes, tasks, name):
    assert parse_shape(shape) == (nodes, tasks)
    assert shape_name(shape) == name
    assert shape_name(shape_of(nodes, tasks)) == name


@pytest.mark.parametrize("shape", ["x3", "N3", "N0.n2", "n0", "N3.n2.csv"])
def test_a_shape_that_is_none_is_refused(shape):
    with pytest.raises(ValueError, match="N<nodes>.n<tasks per node>"):
        parse_shape(shape)


def test_the_default_plan_runs_on_one_node_with_its_file_names(default_config):
    plan = tb.BenchmarkPlan.from_config(validate_config(default_config))
    assert {parse_shape(shape)[0] for _, _, _, shape in plan.points} == {1}
    assert all(isinstance(shape, int) for _, _, _, shape in plan.points)
    files = plan.point_files(lambda *parts: "/".join(parts))
    assert "bench/lustre/io/easy.n4.csv" in files and not any(".N" in f for f in files)
    assert plan.settings("io", "lustre", "easy", 4).nodes == 1


def test_nodes_sweep_every_pattern_and_tasks_count_per_node(default_config):
    config = with_changes(default_config, benchmarks__nodes=[1, 3], benchmarks__tool="fio",
                          benchmarks__tasks=[1, 2], benchmarks__tiers=["lustre", "node_local"],
                          benchmarks__metadata_patterns=["easy", "hard"], benchmarks__fieldio__enabled=True)
    plan = tb.BenchmarkPlan.from_config(validate_config(config))
    io = plan.point_list("io")
    assert ("lustre", "easy", 2) in io and ("lustre", "easy", "N3.n2") in io and ("node_local", "hard", "N3.n1") in io
    assert len(io) == 2 * 2 * 2 * 2  # tiers x patterns x nodes x tasks
    point = plan.settings("io", "lustre", "easy", "N3.n2")
    assert (point.nodes, point.tasks, point.tasks_per_node) == (3, 6, 2)
    assert tb.PointSettings.from_json(plan.point_json("io", "lustre", "easy", "N3.n2")) == point
    files = plan.point_files(lambda *parts: "/".join(parts))
    assert "bench/lustre/io/easy.N3.n2.csv" in files and "bench/lustre/metadata/hard.N3.n2.csv" in files
    assert plan.describe("N3.n2") == "3 nodes x 2 tasks" and plan.describe("n1") == "1 task"
    assert all(parse_shape(shape)[0] == 1 for _, _, shape in plan.point_list("fieldio"))  # field I/O: one node
    assert "config key 'benchmarks.nodes': points over 3 nodes run as Slurm jobs" in plan.local_run_problem()
    assert tb.BenchmarkPlan.from_config(validate_config(default_config)).local_run_problem() is None


def test_a_pattern_sets_its_own_nodes(default_config):
    config = with_changes(default_config, benchmarks__nodes=[1, 2], benchmarks__tool="fio",
                          benchmarks__tiers=["lustre"], benchmarks__tasks=[1],
                          benchmarks__patterns__hard__nodes=[1])
    plan = tb.BenchmarkPlan.from_config(validate_config(config))
    assert [shape for _, pattern, shape in plan.point_list("io") if pattern == "hard"] == [1]
    assert [shape for _, pattern, shape in plan.point_list("io") if pattern == "easy"] == [1, "N2.n1"]


@pytest.mark.parametrize("key, value, expected", [
    ("benchmarks__nodes", [], "benchmarks.nodes"),
    ("benchmarks__nodes", [0], "benchmarks.nodes"),
    ("benchmarks__nodes", [2, 2], "benchmarks.nodes"),
    ("benchmarks__patterns__easy__nodes", [], "benchmarks.patterns.easy.nodes"),
])
def test_bad_node_counts_are_refused_naming_the_key(default_config, key, value, expected):
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.")):
        tb.BenchmarkPlan.from_config(validate_config(with_changes(default_config, **{key: value})))


@pytest.fixture
def stand_in_ior(tmp_path) -> dict[str, str]:
    """Executables named ior and mdtest (the plan only finds them; nothing runs them here)."""
    paths = {}
    for name in ("ior", "mdtest"):
        path = tmp_path / name
        path.write_text("#!/bin/sh\nexit 1\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
        paths[name] = str(path)
    return paths


@pytest.mark.parametrize("what, changes, key", [
    ("IOR's shared file", {"benchmarks__io_patterns": ["hard"], "benchmarks__metadata_patterns": []},
     "benchmarks.patterns.hard.nodes"),
    ("mdtest", {"benchmarks__io_patterns": ["easy"], "benchmarks__metadata_patterns": ["easy"]},
     "benchmarks.metadata.easy.nodes"),
])
def test_ior_and_mdtest_across_nodes_of_a_tier_not_shared_are_refused(default_config, stand_in_ior, what,
                                                                       changes, key):
    config = with_changes(default_config, benchmarks__nodes=[1, 2], benchmarks__tool="ior",
                          benchmarks__ior_path=stand_in_ior["ior"], benchmarks__mdtest_path=stand_in_ior["mdtest"],
                          benchmarks__tiers=["lustre", "node_local"], benchmarks__replay__enabled=False, **changes)
    with pytest.raises(ConfigError) as err:
        tb.BenchmarkPlan.from_config(validate_config(config))
    message = str(err.value)
    assert f"config key '{key}'" in message and "tier 'node_local'" in message and "not shared" in message
    assert "benchmarks.tool to fio" in message
    # on the tier shared across nodes, and IOR's file per process on any tier, they run
    config = with_changes(config, benchmarks__tiers=["lustre"])
    assert tb.BenchmarkPlan.from_config(validate_config(config)).points
    config = with_changes(config, benchmarks__tiers=["node_local"], benchmarks__io_patterns=["easy"],
                          benchmarks__metadata_patterns=[])
    assert tb.BenchmarkPlan.from_config(validate_config(config)).points


LUSTRE = Tier(name="lustre", kind="lustre", path="/l", shared=True)
LOCAL = Tier(name="node_local", kind="node_local", path="/tmp/x", shared=False)


@pytest.mark.parametrize("tier, nodes, per_node, expected", [
    (LUSTRE, 1, 1, {"nodes": 1, "tasks": 1, "tasks_per_node": None, "mpi": None}),
    (LUSTRE, 1, 4, {"nodes": None, "tasks": 4, "tasks_per_node": None, "mpi": "srun"}),
    (LOCAL, 1, 4, {"nodes": 1, "tasks": 4, "tasks_per_node": None, "mpi": "srun"}),
    (LOCAL, 3, 1, {"nodes": 3, "tasks": 3, "tasks_per_node": None, "mpi": "srun"}),
    (LUSTRE, 3, 2, {"nodes": 3, "tasks": None, "tasks_per_node": 2, "mpi": "srun"}),
])
def test_a_point_over_n_nodes_asks_slurm_for_n_nodes_and_its_tasks_on_each(tier, nodes, per_node, expected):
    assert tb.point_resources(tier, nodes, per_node) == {**expected, "slurm_extra": ""}


def test_the_rules_resources_follow_the_shape_wildcard(default_config):
    config = with_changes(default_config, benchmarks__nodes=[1, 3], benchmarks__tool="fio")
    resources = tb.BenchmarkPlan.from_config(validate_config(config)).rule_resources()
    many = SimpleNamespace(tier="shm", shape="N3.n2")
    assert {key: value(many) for key, value in resources.items()} == {
        "nodes": 3, "tasks": None, "tasks_per_node": 2, "mpi": "srun", "slurm_extra": ""}
    fieldio = SimpleNamespace(tier="shm", ntasks="2")  # the field-I/O rule's wildcard
    assert resources["nodes"](fieldio) == 1 and resources["tasks"](fieldio) == 2


# ------------------------------------------------------------------------- command lines


def test_ior_across_nodes_reorders_reads_one_node_over_on_a_shared_tier():
    pattern = IOPattern(name="easy", transfer_size_bytes=MIB, block_size_bytes=4 * MIB, reorder="constant")
    argv = ior.command("ior", pattern, 6, 2, Path("/l/testfile"), Path("/r/s.json"), "srun -n {ntasks}")
    assert argv[:3] == ["srun", "-n", "6"]
    line = shlex.join(argv)
    assert " -C -Q 1 " in line  # IOR 4: one node over, whether the ranks are placed in blocks or round-robin


def test_mdtest_across_nodes_starts_every_rank_and_shifts_its_reads_by_a_node():
    argv = mdtest.command("mdtest", MetadataPattern(name="easy", files_per_task=10), 6, Path("/l/md"),
                          "srun -n {ntasks}")
    assert argv[:3] == ["srun", "-n", "6"] and argv[argv.index("-N") + 1] == "1"


def test_one_fio_per_node_in_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{stand_in_srun(tmp_path)}:{os.environ['PATH']}")
    work, raw = Path("/scratch/io-easy-N3-n2"), Path("/results/raw")
    commands = [fio.io_command("fio", IOPattern(name="easy"), 2, multinode.node_folder(work, node),
                               raw / f"easy.rep0.node{node}.json") for node in range(3)]
    argv = multinode.across_nodes(commands, raw, "easy.rep0", 2, [multinode.node_folder(work, n) for n in range(3)])
    srun, sh = argv[:argv.index("sh")], argv[argv.index("sh"):]
    assert Path(srun[0]).name == "srun"
    assert srun[1:] == ["--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--cpus-per-task=2", "--kill-on-bad-exit=1"]
    assert sh[:2] == ["sh", "-c"]
    script = sh[2]
    assert script.startswith('case "$SLURM_NODEID" in')
    for node in range(3):
        folder = f"/scratch/io-easy-N3-n2/node{node}"
        assert (f"  {node}) uname -n > /results/raw/easy.rep0.node{node}.host && rm -rf {folder} && "
                f"mkdir -p {folder} && exec {shlex.join(commands[node])} ;;") in script.splitlines()
        assert "--numjobs=2" in commands[node] and f"--directory={folder}" in commands[node]


def test_the_per_node_script_runs_the_nodes_own_command(tmp_path):
    commands = [["sh", "-c", f"echo {node} > {tmp_path}/ran.{node}"] for node in range(3)]
    folders = [tmp_path / f"work/node{node}" for node in range(3)]
    script = multinode.per_node_script(commands, tmp_path, "run", folders)
    done = subprocess.run(["sh", "-c", script], env={**os.environ, "SLURM_NODEID": "1"}, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("ran.*")) == ["ran.1"] and folders[1].is_dir()
    assert not folders[0].exists()
    assert multinode.hosts(tmp_path, "run", 3)[1] == os.uname().nodename
    lost = subprocess.run(["sh", "-c", script], env={**os.environ, "SLURM_NODEID": "5"}, capture_output=True, text=True)
    assert lost.returncode == 2 and "no command for node 5 of 3" in lost.stderr


def test_a_point_over_nodes_needs_a_slurm_job_of_as_many_nodes():
    multinode.check_allocation(1, {})
    with pytest.raises(BenchmarkError, match="in no Slurm job.*benchmarks.nodes to \\[1\\]"):
        multinode.check_allocation(3, {})
    with pytest.raises(BenchmarkError, match="Slurm job 7, which has 2 node"):
        multinode.check_allocation(3, {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2"})
    multinode.check_allocation(3, {"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "3"})


# ------------------------------------------------------------------------- merging real per-node outputs


def parsed(name: str) -> list[dict]:
    return fio.parse(SAMPLES / name)


def test_real_fio_outputs_of_three_nodes_merge_into_one_point():
    """Three nodes' 2-job sequential writes of 1 GiB per job (real fio 3.33 runs: shm, disk with end_fsync,
    disk direct): all their bytes over the slowest node's seconds."""
    nodes = [parsed(f"fio-seqwrite-1m-{kind}-2job-{tier}.json")
             for kind, tier in (("buffered", "shm"), ("buffered-endfsync", "disk"), ("direct", "disk"))]
    assert [rows[0]["seconds"] for rows in nodes] == [0.288, 1.567, 1.192]
    (merged,) = multinode.merge_nodes(nodes)
    assert (merged["operation"], merged["aggregate"], merged["tasks"], merged["nodes"]) == ("write", "group", 6, 3)
    assert merged["bytes"] == 3 * 2 * 2**30 and merged["seconds"] == 1.567
    assert merged["bw_MiB_per_s"] == pytest.approx(6 * 1024 / 1.567)
    ios = sum(rows[0]["ops_per_s"] * rows[0]["seconds"] for rows in nodes)
    assert merged["ops_per_s"] == pytest.approx(ios / 1.567)
    weights = [rows[0]["ops_per_s"] * rows[0]["seconds"] for rows in nodes]
    mean_latency = sum(rows[0]["latency_s"] * w for rows, w in zip(nodes, weights)) / sum(weights)
    assert merged["latency_s"] == pytest.approx(mean_latency)
    # below the fastest node alone times three: the slowest node sets the point's time
    assert merged["bw_MiB_per_s"] < 3 * nodes[0][0]["bw_MiB_per_s"]


def test_real_fio_metadata_outputs_merge_as_operations_without_bandwidth():
    nodes = [parsed("fio-filecreate-2000-2job-disk.json"), parsed("fio-filecreate-2000-1job-disk.json")]
    (merged,) = multinode.merge_nodes(nodes)
    assert (merged["operation"], merged["tasks"], merged["nodes"], merged["bw_MiB_per_s"]) == ("create", 3, 2, None)
    seconds = max(rows[0]["seconds"] for rows in nodes)
    assert merged["ops_per_s"] == pytest.approx(sum(r[0]["ops_per_s"] * r[0]["seconds"] for r in nodes) / seconds)


def test_nodes_that_did_different_things_are_not_merged():
    with pytest.raises(BenchmarkError, match="fio's write of job 'seqjob' ran on 1 of 2 nodes"):
        multinode.merge_nodes([parsed("fio-seqwrite-1m-direct-1job-disk.json"),
                               parsed("fio-seqread-1m-direct-1job-disk.json")])


# ------------------------------------------------------------------------- three nodes on this machine


def stand_in_srun(folder: Path) -> Path:
    """A folder holding ``srun``, a stand-in that runs its command once per node at once (``--nodes=N``), each
    with SLURM_NODEID set, here on this machine: the nodes share everything, as nodes on a shared tier do."""
    bin_dir = folder / "stand-in-bin"
    bin_dir.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text(f"""#!{sys.executable}
import os, subprocess, sys
args = sys.argv[1:]
nodes = 1
while args and args[0].startswith("--"):
    if args[0].startswith("--nodes="):
        nodes = int(args[0].split("=", 1)[1])
    args.pop(0)
with open(os.path.join({str(bin_dir)!r}, "calls"), "a") as calls:
    calls.write(repr(sys.argv[1:]) + "\\n")
runs = [subprocess.Popen(args, env={{**os.environ, "SLURM_NODEID": str(node)}}) for node in range(nodes)]
sys.exit(max(run.wait() for run in runs))
""")
    srun.chmod(0o755)
    return bin_dir


@pytest.fixture
def three_stand_in_nodes(tmp_path, monkeypatch):
    require_tool("fio", "the points over nodes run fio (Debian: apt-get install fio)")
    bin_dir = stand_in_srun(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "3")
    return bin_dir


def point(tmp_path, benchmark: str, spec, shared: bool, nodes: int = 3, per_node: int = 2):
    from dataclasses import asdict

    tier = Tier(name="local", kind="posix" if shared else "node_local", path=str(tmp_path / "tier"), shared=shared)
    return tb.PointSettings(study="t", benchmark=benchmark, tier=tier, pattern=spec.name, spec=asdict(spec),
                            tasks=nodes * per_node, repetitions=2, tool="fio", nodes=nodes)


@pytest.mark.integration
@pytest.mark.parametrize("stonewall_s", [0.0, 0.2])
def test_an_io_point_over_three_nodes_runs_one_fio_per_node_and_merges_them(tmp_path, three_stand_in_nodes,
                                                                            stonewall_s):
    spec = IOPattern(name="easy", transfer_size_bytes=256 * 1024, block_size_bytes=MIB, segments=2,
                     stonewall_s=stonewall_s, fsync=False)
    raw = tmp_path / "raw"
    rows = tb.run_point(point(tmp_path, "io", spec, shared=False), raw)
    reps = [r for r in rows if r["aggregate"] == "rep"]
    assert sorted({(r["operation"], r["repetition"]) for r in reps}) == [("read", 0), ("read", 1), ("write", 0),
                                                                          ("write", 1)]
    for row in rows:
        assert (row["nodes"], row["tasks"], row["tool"]) == (3, 6, "fio")
        assert row["host"] == ",".join([os.uname().nodename] * 3)
    if stonewall_s == 0:
        assert {r["bytes"] for r in reps} == {3 * 2 * 2 * MIB}  # every node's two jobs, 2 MiB each
        outputs = sorted(p.name for p in raw.glob("easy.N3.n2.rep0.node*.json"))
    else:
        outputs = sorted(p.name for p in raw.glob("easy.N3.n2.rep0.write.node*.json"))
        assert len(list(raw.glob("easy.N3.n2.rep0.read.node*.json"))) == 3
    assert len(outputs) == 3
    assert {r["aggregate"] for r in rows} == {"rep", "max", "min", "mean"}
    # the folder on every node is gone, and srun removed it on each
    assert not (tmp_path / "tier" / "t" / "bench").exists() or not any((tmp_path / "tier" / "t" / "bench").iterdir())
    calls = (three_stand_in_nodes / "calls").read_text().splitlines()
    assert any(".made" in call for call in calls)  # made and removed on every node


@pytest.mark.integration
def test_a_node_crowded_out_of_the_write_phase_fills_up_to_the_busiest_job_of_every_node(tmp_path,
                                                                                          three_stand_in_nodes,
                                                                                          monkeypatch):
    """IOR's wear-out spans every rank: where node 1's jobs wrote (as told here) nothing in the time, they alone
    write on, untimed, to the busiest job's bytes, and its read phase then reads as much as the others'."""
    real = tb.fio.written_per_job

    def node1_wrote_nothing(path):
        written = real(path)
        return [0] * len(written) if ".write.node1." in Path(path).name else written

    monkeypatch.setattr(tb.fio, "written_per_job", node1_wrote_nothing)
    spec = IOPattern(name="easy", transfer_size_bytes=256 * 1024, block_size_bytes=MIB, segments=2,
                     stonewall_s=0.2, fsync=False)
    raw = tmp_path / "raw"
    tb.run_point(point(tmp_path, "io", spec, shared=False), raw)
    assert sorted(p.name for p in raw.glob("easy.N3.n2.rep0.fill.node*.json")) == ["easy.N3.n2.rep0.fill.node1.json"]
    sizes = {node: {job["job options"].get("size") for job in
                    json.loads((raw / f"easy.N3.n2.rep0.read.node{node}.json").read_text())["jobs"]}
             for node in range(3)}
    busiest = max(real(raw / f"easy.N3.n2.rep0.write.node{node}.json")[job] for node in (0, 2) for job in (0, 1))
    assert sizes[1] == {str(busiest // spec.transfer_size_bytes * spec.transfer_size_bytes)}, sizes


@pytest.mark.integration
def test_a_metadata_point_over_three_nodes_runs_one_fio_per_node(tmp_path, three_stand_in_nodes):
    spec = MetadataPattern(name="easy", files_per_task=20)
    rows = tb.run_point(point(tmp_path, "metadata", spec, shared=True, per_node=1), tmp_path / "raw")
    ops = {r["operation"] for r in rows if r["aggregate"] == "rep"}
    assert ops == {"create", "stat", "remove"}
    assert all((r["nodes"], r["tasks"]) == (3, 3) for r in rows)
    calls = (three_stand_in_nodes / "calls").read_text()
    assert ".made" not in calls  # a shared tier: its folder is removed once, here


@pytest.mark.parametrize("shared, reorders", [(True, True), (False, False)])
def test_ior_over_three_nodes_runs_every_rank_in_one_job(tmp_path, three_stand_in_nodes, shared, reorders):
    """IOR over 3 nodes x 2 tasks: one launcher of 6 ranks; reads one node over on a shared tier, each task its own
    where each node has its own folder (made and removed on every node). The stand-in ior gives a real IOR 4.0.0
    summary (1 rank), whose rows take the point's tasks and nodes."""
    recorded = Path(__file__).parent / "data" / "ior" / "posix-fpp-1rank-disk.json"
    ior_path = tmp_path / "ior"
    ior_path.write_text(f"""#!{sys.executable}
import shutil, sys
summary = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("summaryFile="))
shutil.copy({str(recorded)!r}, summary)
open({str(tmp_path / "ior.argv")!r}, "w").write(repr(sys.argv))
""")
    ior_path.chmod(0o755)
    spec = IOPattern(name="easy", transfer_size_bytes=MIB, block_size_bytes=4 * MIB, reorder="constant")
    settings = point(tmp_path, "io", spec, shared=shared)
    settings.tool, settings.paths, settings.launcher = "ior", {"ior": str(ior_path)}, "env TASKS={ntasks}"
    rows = tb.run_point(settings, tmp_path / "raw")
    meta = json.loads((tmp_path / "raw" / "easy.N3.n2.meta.json").read_text())
    assert meta["argv"][:2] == ["env", "TASKS=6"]
    assert (" -C -Q 1 " in meta["command_line"]) == reorders
    assert {(r["nodes"], r["tasks"]) for r in rows} == {(3, 6)}
    calls = (three_stand_in_nodes / "calls").read_text()
    assert (".made" in calls) == (not shared)


def test_rows_over_nodes_go_through_the_tables_the_fits_and_the_plan():
    """One-node and three-node points of one pattern: a fit per node count, a line comparing their plateaus,
    and a capacity plan that counts the three client nodes."""
    rows = []
    for nodes in (1, 3):
        for per_node in (1, 2, 4):
            frame = pd.DataFrame({"tier": "lustre", "tier_kind": "lustre", "benchmark": "io", "pattern": "easy",
                                  "operation": ["write", "write", "write"], "aggregate": ["rep", "rep", "mean"],
                                  "repetition": [0, 1, None], "tasks": nodes * per_node, "nodes": nodes,
                                  "bw_MiB_per_s": [100.0 * min(per_node, 2) * nodes] * 3, "bytes": 2**30,
                                  "seconds": 5.0, "api": "POSIX", "source": "x", "job": "write"})
            rows.append(frame)
    bench = benchmark_table(pd.concat(rows, ignore_index=True))
    fits = fit_table(bench)
    assert list(fits["nodes_measured"]) == [1, 3]
    assert list(fits["plateau_MiB_per_s"]) == pytest.approx([200, 600])
    assert any(line.startswith("lustre easy write across client nodes: 1 node 200 MiB/s, 3 nodes 600 MiB/s; x3.00")
               for line in fit_lines(fits))
    inventory = pd.DataFrame({"arm": "a", "cycle": "2026010100", "step": "fcst", "file": "f", "expected_bytes": [6 * 2**30]})
    plan = capacity_plan(inventory, fits, resolution="C768", interval_hours=6, io_budget_fraction=0.01)
    cycle = plan[plan["step"] == "cycle"].iloc[0]
    # 6 GiB in 216 s: 28.4 MiB/s, 200 MiB/s per client node measured over three
    assert (cycle["units_measured"], cycle["unit"], cycle["units_needed"]) == (3, "client nodes", 1)


# ------------------------------------------------------------------------- three real Slurm nodes

from test_slurm_multinode import NODES, nodes, ok  # noqa: E402,F401  (the three-node cluster fixture)


@pytest.mark.e2e
@pytest.mark.tool
def test_a_tiny_fio_point_over_the_three_nodes_of_a_localhost_slurm(nodes):  # noqa: F811
    """A point of 3 nodes x 1 fio job on a node-local tier (each node's own /tmp) through ``cycleio bench``
    inside ``salloc -N3``: one row set with nodes = 3 and the three host names, nothing left on any node."""
    require_tool("fio", "the point runs fio (Debian: apt-get install fio)")
    shared = Path("/var/tmp") / f"cycleio-bench-multinode-{uuid.uuid4().hex}"  # seen by every node
    shared.mkdir()
    scratch = f"/tmp/cycleio-bench-multinode-{uuid.uuid4().hex}"  # each node's own
    try:
        tier = Tier(name="node_local", kind="node_local", path=scratch, shared=False)
        spec = IOPattern(name="tiny", transfer_size_bytes=64 * 1024, block_size_bytes=MIB, fsync=False)
        from dataclasses import asdict

        settings = tb.PointSettings(study="mn", benchmark="io", tier=tier, pattern="tiny", spec=asdict(spec), tasks=3,
                                    repetitions=1, tool="fio", nodes=3)
        out = shared / "tiny.N3.n1.csv"
        env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
        done = subprocess.run(["salloc", "-N3", "--ntasks-per-node=1", sys.executable, "-m", "cycleio", "bench",
                               "--settings", settings.to_json(), "--out", str(out), "--raw", str(shared / "raw")],
                              capture_output=True, text=True, timeout=120, cwd="/", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = pd.read_csv(out)
        assert set(rows["nodes"]) == {3} and set(rows["tasks"]) == {3}
        assert set(rows["host"]) == {",".join(NODES)}
        written = rows[(rows["operation"] == "write") & (rows["aggregate"] == "rep")]
        assert list(written["bytes"]) == [3 * MIB]
        hosts = sorted((shared / "raw").glob("tiny.N3.n1.rep0.node*.host"))
        assert sorted(p.read_text().strip() for p in hosts) == NODES
        left = ok("srun", "-N3", "--ntasks-per-node=1", "sh", "-c",
                  f"test -e {scratch} && echo $(hostname) left || echo $(hostname) clean")
        assert sorted(left.splitlines()) == [f"{node} clean" for node in NODES]
    finally:
        subprocess.run(["rm", "-rf", str(shared), scratch])
