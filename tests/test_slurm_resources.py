"""Slurm resources derived from an arm's settings, and the sbatch line the executor plugin builds from them."""

from __future__ import annotations

import importlib
import os
from types import SimpleNamespace

import pytest

from cycleio.config.settings import ArmSettings
from cycleio.workflow.study import load_study
from cycleio.storage.bbrequest import FORBIDDEN_SLURM_EXTRA
from cycleio.workflow.slurm import (
    RESOURCE_KEYS,
    job_bytes,
    job_nodes,
    job_threads,
    may_span_nodes,
    mem_mb,
    rule_resources,
    rule_threads,
    runtime_minutes,
    shared_file_problem,
    slurm_resources,
)

LUA = "#BB_LUA pool=localpool capacity=10"
DATAWARP = "#DW jobdw type=scratch access_mode=striped capacity=200GiB"
TIERS = {
    "lustre": {"kind": "lustre", "path": "results/tiers/lustre"},
    "node_local": {"kind": "node_local", "path": "${TMPDIR:-/tmp}/x/${SLURM_JOB_ID:-local}", "persistent": False,
                   "shared": False},
    "shm": {"kind": "memory", "path": "/dev/shm/x", "persistent": False, "shared": False},
    "bb": {"kind": "burst_buffer", "path": "$BB_STAGE_DIR", "persistent": False, "burst_buffer": LUA},
    "dw": {"kind": "burst_buffer", "path": "$DW_JOB_STRIPED", "persistent": False, "burst_buffer": DATAWARP},
}
FULL_CYCLE = "2026010106"


def arms(resolution: str = "C12", levels: int = 8, **extra) -> dict[str, ArmSettings]:
    config = {"study": "t", "resolution": resolution, "levels": levels, "tiers": TIERS,
              "cycles": {"start": "2026010100", "end": FULL_CYCLE},
              "scratch_tiers": ["lustre", "node_local", "shm", "bb", "dw"], **extra}
    return load_study(config)[1].arms


def test_every_step_gets_every_resource_with_valid_values():
    for arm in arms().values():
        for step in ("coldstart", "dump", "prep", "anal", "fcst", "post"):
            res = slurm_resources(arm, step, FULL_CYCLE)
            assert set(res) == set(RESOURCE_KEYS)
            staged = step not in ("coldstart", "dump") and arm.staged  # one CPU per copy stream (4 by default)
            assert res["cpus_per_task"] * res["tasks"] == (4 if staged else res["tasks"])
            assert isinstance(res["runtime"], int) and res["runtime"] >= 10
            assert isinstance(res["mem_mb"], int) and 1000 <= res["mem_mb"] / res["tasks"] <= 4000
            if step == "fcst":  # the forecast is an MPI program: 2 compute ranks by default
                assert res["tasks"] == 2 and res["mpi"] == "srun"
            else:  # one task: the plugin runs it through `srun -n1` itself
                assert res["tasks"] == 1 and res["mpi"] is None and res["nodes"] == 1


def test_runtime_grows_with_resolution_levels_and_bytes():
    small, large = arms("C48", 127)["lustre"], arms("C768", 127)["lustre"]
    assert runtime_minutes(large, "fcst", FULL_CYCLE) > 10 * runtime_minutes(small, "fcst", FULL_CYCLE)
    assert runtime_minutes(large, "fcst", FULL_CYCLE) > runtime_minutes(large, "prep", FULL_CYCLE)
    assert runtime_minutes(arms("C384", 127)["lustre"], "fcst", FULL_CYCLE) > runtime_minutes(
        arms("C384", 64)["lustre"], "fcst", FULL_CYCLE)
    # the estimate counts every file of the step's inventory, uncompressed
    reads, writes = job_bytes(large, "fcst", FULL_CYCLE)
    assert writes > 100 * 2**30 and reads > 10 * 2**30


def test_a_paired_replay_lengthens_its_jobs_limit():
    paired, unpaired = arms("C384", 127)["lustre"], arms("C384", 127, benchmarks={"replay": {"cycles": 0}})["lustre"]
    assert FULL_CYCLE in paired.paired_cycles and not unpaired.paired_cycles
    assert runtime_minutes(paired, "fcst", FULL_CYCLE) > runtime_minutes(unpaired, "fcst", FULL_CYCLE)
    assert runtime_minutes(paired, "dump", FULL_CYCLE) == runtime_minutes(unpaired, "dump", FULL_CYCLE)


def test_staging_and_compute_stand_in_lengthen_the_limit():
    study = arms("C384", 127)
    staged, baseline = study["node_local"], study["lustre"]
    assert runtime_minutes(staged, "fcst", FULL_CYCLE) > runtime_minutes(baseline, "fcst", FULL_CYCLE)
    computing = arms("C12", 8, forecast={"compute_seconds_per_hour": 600.0})["lustre"]
    # 9 forecast hours x 10 minutes, with the 1.5 margin
    assert runtime_minutes(computing, "fcst", FULL_CYCLE) >= 90 * 1.5
    assert runtime_minutes(computing, "post", FULL_CYCLE) == 10


def test_memory_follows_the_history_plane_and_a_retry_gets_more():
    assert mem_mb(arms("C12")["lustre"], "post") == 1000
    assert mem_mb(arms("C1152", 127)["lustre"], "post") > mem_mb(arms("C768", 127)["lustre"], "post") > 1000
    arm = arms()["shm"]
    first = slurm_resources(arm, "fcst", FULL_CYCLE, attempt=1)
    retry = slurm_resources(arm, "fcst", FULL_CYCLE, attempt=2)
    assert retry["runtime"] == 2 * first["runtime"] and retry["mem_mb"] == 2 * first["mem_mb"]
    assert first["mem_mb"] == 2 * mem_mb(arm, "post")  # two forecast ranks


def test_a_whole_cycle_job_adds_up_its_steps():
    arm = arms()["node_local"]
    steps = [job_bytes(arm, step, FULL_CYCLE) for step in ("prep", "anal", "fcst", "post")]
    assert job_bytes(arm, "cycle", FULL_CYCLE) == tuple(map(sum, zip(*steps)))
    half = [job_bytes(arm, step, "2026010100") for step in ("fcst", "post")]
    assert job_bytes(arm, "cycle", "2026010100") == tuple(map(sum, zip(*half)))


def test_burst_buffer_scratch_carries_the_request_and_nothing_else_does():
    study = arms()
    assert slurm_resources(study["bb"], "fcst", FULL_CYCLE)["slurm_extra"] == f"--bb '{LUA}'"
    assert slurm_resources(study["dw"], "post", FULL_CYCLE)["slurm_extra"] == f"--bb '{DATAWARP}'"
    assert slurm_resources(study["dw"], "cycle", FULL_CYCLE)["slurm_extra"] == f"--bb '{DATAWARP}'"
    # the cold start and the observation dumps write only the persistent tier: no burst buffer
    assert slurm_resources(study["bb"], "coldstart")["slurm_extra"] == ""
    assert slurm_resources(study["bb"], "dump", FULL_CYCLE)["slurm_extra"] == ""
    for name in ("lustre", "node_local", "shm"):
        assert slurm_resources(study[name], "fcst", FULL_CYCLE)["slurm_extra"] == ""


def test_forecast_ranks_become_tasks_launched_through_srun():
    layout = {"ranks": 4, "write_groups": 2, "write_tasks_per_group": 2}
    quilt = arms(write_strategies=["quilt"], write_component=layout)
    res = slurm_resources(quilt["node_local"], "fcst", FULL_CYCLE)
    assert res["tasks"] == 4 + 2 * 2 and res["mpi"] == "srun"
    assert res["nodes"] == 1  # node-local scratch: every rank must see the node the job stages on
    assert res["mem_mb"] == 8 * slurm_resources(quilt["node_local"], "prep", FULL_CYCLE)["mem_mb"]
    serial = arms(write_component=layout)  # serial strategy: no writer ranks
    assert slurm_resources(serial["lustre"], "fcst", FULL_CYCLE)["tasks"] == 4
    assert slurm_resources(serial["lustre"], "fcst", FULL_CYCLE)["nodes"] is None  # shared: Slurm places ranks
    for step in ("prep", "anal", "post"):
        assert slurm_resources(quilt["node_local"], step, FULL_CYCLE)["tasks"] == 1
    assert slurm_resources(quilt["node_local"], "cycle", FULL_CYCLE)["tasks"] == 8
    one = arms(write_component={"ranks": 1})["shm"]
    assert slurm_resources(one, "fcst", FULL_CYCLE)["tasks"] == 1
    assert slurm_resources(one, "fcst", FULL_CYCLE)["mpi"] is None  # the plugin refuses mpi with 1 task


def test_a_jobs_nodes_are_one_on_scratch_no_other_node_sees():
    layout = {"ranks": 4, "write_groups": 2, "write_tasks_per_group": 2}
    quilt = arms(write_strategies=["quilt"], write_component=layout)
    assert job_nodes(quilt["node_local"], "fcst", FULL_CYCLE) == job_nodes(quilt["shm"], "fcst", FULL_CYCLE) == 1
    assert job_nodes(quilt["lustre"], "fcst", FULL_CYCLE) is None  # Slurm places the ranks
    assert job_nodes(quilt["lustre"], "post", FULL_CYCLE) == 1  # one task
    assert [may_span_nodes(n, t) for n, t in ((1, 8), (None, 8), (2, 8), (None, 1), (3, 1))] == [
        False, True, True, False, False]


@pytest.mark.parametrize("strategy", ["parallel", "quilt_parallel"])
def test_a_shared_file_strategy_spanning_nodes_on_scratch_no_other_node_sees_is_a_problem(strategy):
    """Named: the arm, the strategy, the tier, where the node count comes from; only for the forecast's job,
    only when its ranks may span nodes, only on a staged tier that is not shared."""
    study = arms(write_strategies=[strategy], write_component={"ranks": 4, "write_groups": 1,
                                                               "write_tasks_per_group": 2})
    shm = study["shm"]
    ntasks = slurm_resources(shm, "fcst", FULL_CYCLE)["tasks"]
    assert shared_file_problem("shm", shm, "fcst", job_nodes(shm, "fcst", FULL_CYCLE), FULL_CYCLE) is None
    problem = shared_file_problem("shm", shm, "fcst", 2, FULL_CYCLE, "profiles/x/config.yaml set-resources: "
                                  "cycle_step: nodes")
    assert problem == (
        f"arm shm: write strategy '{strategy}' writes each file from many ranks at once, and the fcst job's {ntasks} "
        "ranks may run on 2 nodes (profiles/x/config.yaml set-resources: cycle_step: nodes), but its scratch tier "
        "'shm' is not shared across nodes (tiers.shm.shared: false): each node would hold only its ranks' parts of "
        "a file. Use a strategy that writes whole files (serial, quilt; config key write_strategies) or a "
        "scratch tier shared across nodes (config key scratch_tiers), or set profiles/x/config.yaml set-resources: "
        "cycle_step: nodes to 1")
    assert "as many nodes as Slurm chooses" in shared_file_problem("node_local", study["node_local"], "cycle", None,
                                                                   FULL_CYCLE)
    assert shared_file_problem("shm", shm, "post", 2, FULL_CYCLE) is None  # no forecast in it
    assert shared_file_problem("lustre", study["lustre"], "fcst", None, FULL_CYCLE) is None  # shared tier
    assert shared_file_problem("bb", study["bb"], "fcst", 2, FULL_CYCLE) is None  # a burst buffer is shared
    for whole_files in ("serial", "quilt"):
        other = arms(write_strategies=[whole_files], write_component={"ranks": 4})["shm"]
        assert shared_file_problem("shm", other, "fcst", 2, FULL_CYCLE) is None


@pytest.mark.parametrize("at_end, when", [(False, "after each output hour"), (True, "at the end of the forecast")])
def test_per_rank_across_nodes_is_refused_whenever_its_pieces_are_combined(at_end, when):
    """per_rank combines each file from every rank's pieces (the later steps read whole files), after each hour or at
    the end: across nodes the combining rank would miss the other nodes' pieces either way."""
    per_rank = arms(write_strategies=["per_rank"], write_component={"ranks": 4, "combine_per_rank": at_end})["shm"]
    problem = shared_file_problem("shm", per_rank, "fcst", 2, FULL_CYCLE, "job_layout.fcst.nodes")
    assert problem.startswith("arm shm: write strategy 'per_rank' combines each file from the pieces every rank "
                              f"wrote ({when}, config key write_component.combine_per_rank: {str(at_end).lower()};")
    assert ("the rank combining a file would not see the other nodes' pieces" in problem
            and "scratch tier 'shm' is not shared across nodes (tiers.shm.shared: false)" in problem
            and "or set job_layout.fcst.nodes to 1" in problem), problem
    assert shared_file_problem("shm", per_rank, "fcst", 1, FULL_CYCLE) is None  # one node holds every piece


def test_rule_resources_are_functions_of_the_wildcards():
    study = arms()
    funcs = rule_resources(study)
    assert set(funcs) == set(RESOURCE_KEYS)
    wildcards = SimpleNamespace(arm="bb", cycle=FULL_CYCLE, step="anal")
    expected = slurm_resources(study["bb"], "anal", FULL_CYCLE, attempt=2)
    assert {key: f(wildcards, 2) for key, f in funcs.items()} == expected
    cold = rule_resources(study, step="coldstart")
    assert cold["runtime"](SimpleNamespace(arm="bb"), 1) == slurm_resources(study["bb"], "coldstart")["runtime"]


def test_staged_jobs_get_a_cpu_per_copy_stream_as_threads_and_cpus_per_task():
    study = arms(staging={"streams": 6})
    for name in ("node_local", "shm", "bb"):
        for step in ("prep", "anal", "post"):
            assert job_threads(study[name], step) == 6
            assert slurm_resources(study[name], step, FULL_CYCLE)["cpus_per_task"] == 6
        for step in ("fcst", "cycle"):  # 2 ranks, which copy nothing: 3 CPUs each
            resources = slurm_resources(study[name], step, FULL_CYCLE)
            assert job_threads(study[name], step) == 6 and (resources["tasks"], resources["cpus_per_task"]) == (2, 3)
        for step in ("coldstart", "dump"):  # they write the persistent tier only
            assert job_threads(study[name], step) == 1
            assert slurm_resources(study[name], step, FULL_CYCLE)["cpus_per_task"] == 1
    # the baseline copies nothing
    assert job_threads(study["lustre"], "post") == 1
    assert slurm_resources(study["lustre"], "post", FULL_CYCLE)["cpus_per_task"] == 1
    assert slurm_resources(arms(staging={"streams": 5})["shm"], "fcst", FULL_CYCLE)["cpus_per_task"] == 3
    threads = rule_threads(study)
    assert threads(SimpleNamespace(arm="shm", cycle=FULL_CYCLE, step="anal")) == 6
    assert threads(SimpleNamespace(arm="lustre", cycle=FULL_CYCLE, step="anal")) == 1
    assert rule_threads(study, step="coldstart")(SimpleNamespace(arm="shm")) == 1


class FakeJob:
    """Enough of a Snakemake job for the plugin's sbatch builder."""

    def __init__(self, resources: dict, threads: int = 1):
        self.resources = SimpleNamespace(**{k: v for k, v in resources.items() if v is not None})
        self.resources.get = lambda key, default=None: getattr(self.resources, key, default)
        self.threads = threads


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """The executor plugin's sbatch builder and validation. Importing the plugin runs `scontrol show
    config`, which waits seconds where Slurm is installed but not running: a stub answers instead."""
    stub = tmp_path_factory.mktemp("bin") / "scontrol"
    stub.write_text("#!/bin/sh\necho 'MaxArraySize = 1001'\n")
    stub.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{stub.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        # the plugin is a pinned dependency: a module of it gone (renamed in a new version) fails, never skips
        submit = importlib.import_module("snakemake_executor_plugin_slurm.submit_string")
        validation = importlib.import_module("snakemake_executor_plugin_slurm.validation")
    return SimpleNamespace(submit=submit, validation=validation)


def test_the_executor_plugin_accepts_them_and_puts_them_on_the_sbatch_line(plugin):
    submit, validation = plugin.submit, plugin.validation
    params = {"run_uuid": "u", "slurm_logfile": "l.log", "comment_str": "rule_cycle_step", "account": "",
              "partition": "-p debug", "workdir": "/w"}
    study = arms()
    bb = FakeJob(slurm_resources(study["bb"], "post", FULL_CYCLE))
    validation.validate_slurm_extra(bb)
    line = submit.get_submit_command(bb, params)
    for option in ("-t 10", "--mem 1000", "--nodes=1", "--ntasks=1", "--cpus-per-task=4", f"--bb '{LUA}'"):
        assert option in line, (option, line)
    quilt = arms(write_strategies=["quilt"], write_component={"ranks": 2, "write_groups": 1})["lustre"]
    mpi = FakeJob(slurm_resources(quilt, "fcst", FULL_CYCLE))
    line = submit.get_submit_command(mpi, params)
    assert "--ntasks=3" in line and "--nodes" not in line and "--mem 3000" in line
    local = FakeJob(slurm_resources(study["node_local"], "fcst", FULL_CYCLE))
    line = submit.get_submit_command(local, params)
    assert "--ntasks=2" in line and "--nodes=1" in line and "--mem 2000" in line


def test_the_refused_slurm_extra_options_are_the_plugins(plugin):
    assert FORBIDDEN_SLURM_EXTRA == plugin.validation.get_forbidden_slurm_options()


def test_the_archive_job_is_one_task_on_one_node_and_its_limit_follows_its_tarballs():
    archive = {"enabled": True}
    tiers = {**TIERS, "archive": {"kind": "archive", "path": "results/tiers/archive"}}
    small = arms("C48", 127, archive=archive, tiers=tiers)["node_local"]
    large = arms("C768", 127, archive=archive, tiers=tiers)["node_local"]
    res = slurm_resources(large, "arch", FULL_CYCLE)
    # no scratch (it reads the persistent tier and writes the archive tier): no burst buffer, one CPU
    assert res["tasks"] == res["nodes"] == res["cpus_per_task"] == 1 and res["mpi"] is None
    assert res["slurm_extra"] == "" and job_threads(large, "arch") == 1
    assert res["mem_mb"] == mem_mb(large, "post")  # 8 MiB transfers: the base memory of one rank
    # C768: 281.5 GiB of tarballs per full cycle (docs/archive.md), read, written and read back
    reads, writes = job_bytes(large, "arch", FULL_CYCLE)
    assert reads == writes and 280 * 2**30 < writes < 283 * 2**30
    assert res["runtime"] > 5 * runtime_minutes(small, "arch", FULL_CYCLE)  # C768 moves 177 times C48's bytes
    assert runtime_minutes(large, "arch", FULL_CYCLE) > runtime_minutes(large, "arch", "2026010100")  # no restarta
    retry = slurm_resources(large, "arch", FULL_CYCLE, attempt=2)
    assert retry["runtime"] == 2 * res["runtime"]
    # off: the rule has no jobs, and the estimate is the job's start-up only
    assert job_bytes(arms("C768", 127)["node_local"], "arch", FULL_CYCLE) == (0, 0)


def test_the_archive_job_of_a_burst_buffer_arm_asks_slurm_for_one_cpu_and_no_burst_buffer(plugin):
    tiers = {**TIERS, "archive": {"kind": "archive", "path": "results/tiers/archive"}}
    arm = arms(archive={"enabled": True}, tiers=tiers)["bb"]
    params = {"run_uuid": "u", "slurm_logfile": "l.log", "comment_str": "rule_archive_cycle", "account": "",
              "partition": "-p debug", "workdir": "/w"}
    job = FakeJob(slurm_resources(arm, "arch", FULL_CYCLE))
    plugin.validation.validate_slurm_extra(job)
    line = plugin.submit.get_submit_command(job, params)
    for option in ("-t 10", "--mem 1000", "--nodes=1", "--ntasks=1", "--cpus-per-task=1"):
        assert option in line, (option, line)
    assert "--bb" not in line


def test_job_layout_spreads_a_jobs_ranks_over_nodes_with_memory_and_cpus_per_node(plugin):
    spread = arms(write_component={"ranks": 3}, job_layout={"fcst": {"nodes": 3}})
    for name in ("node_local", "lustre"):  # on any tier
        res = slurm_resources(spread[name], "fcst", FULL_CYCLE)
        assert (res["nodes"], res["tasks"], res["slurm_extra"]) == (3, 3, "--ntasks-per-node=1"), (name, res)
        # --mem is per node: one rank's memory; the copy streams are each node's
        assert res["mem_mb"] == mem_mb(arms(write_component={"ranks": 1})["lustre"], "fcst", FULL_CYCLE)
    assert slurm_resources(spread["node_local"], "fcst", FULL_CYCLE)["cpus_per_task"] == 4
    plugin.validation.validate_slurm_extra(FakeJob(slurm_resources(spread["shm"], "fcst", FULL_CYCLE)))
    line = plugin.submit.get_submit_command(FakeJob(slurm_resources(spread["shm"], "fcst", FULL_CYCLE)), {
        "run_uuid": "u", "slurm_logfile": "l.log", "comment_str": "c", "account": "", "partition": "-p debug",
        "workdir": "/w"})
    assert "--nodes=3" in line and "--ntasks=3" in line and "--ntasks-per-node=1" in line, line
    # tasks per node given: the nodes follow; the other steps keep one node
    per_node = arms(write_component={"ranks": 4}, job_layout={"fcst": {"tasks_per_node": 2}})["shm"]
    assert job_nodes(per_node, "fcst", FULL_CYCLE) == 2 and job_nodes(per_node, "post", FULL_CYCLE) == 1
    assert slurm_resources(per_node, "fcst", FULL_CYCLE)["cpus_per_task"] == 2
    # a granularity-cycle job takes fcst's layout
    cycle = arms(write_component={"ranks": 2}, job_layout={"fcst": {"nodes": 2}}, scratch_tiers=["lustre"],
                 staging={"granularity": ["cycle"]})
    assert job_nodes(next(iter(cycle.values())), "cycle", FULL_CYCLE) == 2


def test_the_default_layout_is_todays():
    for arm in arms().values():
        for step in ("prep", "anal", "fcst", "post"):
            res = slurm_resources(arm, step, FULL_CYCLE)
            assert "--ntasks-per-node" not in res["slurm_extra"]
            assert res["nodes"] == (None if step == "fcst" and arm.scratch.shared else 1), (arm.arm, step)


@pytest.mark.parametrize("layout, message", [
    ({"fcst": {"nodes": 3}}, "job_layout.fcst.nodes=3 asks for 3 nodes, but the fcst job has 2 tasks"),
    ({"fcst": {"nodes": 1, "tasks_per_node": 1}}, "gives 1 nodes x 1 tasks, fewer than the fcst job's 2 tasks"),
    ({"fcst": {"nodes": 2, "tasks_per_node": 2}}, "leaves a node without tasks"),
    ({"post": {"nodes": 2}}, "job_layout.post.nodes=2 asks for 2 nodes, but the post job has 1 tasks"),
])
def test_a_layout_that_cannot_hold_its_tasks_is_refused_naming_the_key(layout, message):
    with pytest.raises(Exception) as err:
        arms(job_layout=layout)
    assert type(err.value).__name__ == "ConfigError" and message in str(err.value), str(err.value)


def test_a_layout_over_nodes_is_refused_where_no_node_would_hold_whole_files():
    with pytest.raises(Exception) as err:
        arms(write_strategies=["per_rank"], job_layout={"fcst": {"nodes": 2}})
    assert "job_layout.fcst.nodes" in str(err.value) and "per_rank" in str(err.value)
    arms(write_strategies=["per_rank"], job_layout={"fcst": {"nodes": 2}}, scratch_tiers=["lustre"])  # shared: fine
    with pytest.raises(Exception) as err:
        arms(job_layout={"fcst": {"nodes": 2}}, scratch_tiers=["node_local"], staging={"granularity": ["cycle"]})
    assert "granularity-cycle job runs post after the forecast on its first node" in str(err.value)
