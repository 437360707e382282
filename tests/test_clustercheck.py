"""The cluster check `make study PROFILE=...` runs before any job (workflow.clustercheck), on recorded
``scontrol``/``sinfo`` output of the localhost Slurm (tests/data/slurm): each refusal one line naming the
profile key or config key to set. tests/test_slurm.py runs the same check against the live cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from cycleio.workflow import clustercheck
from cycleio.workflow.clustercheck import (PARTITION_PLACEHOLDER, Profile, check_cluster, parse_nodes, parse_pools,
                                           parse_records, requested_pool)
from cycleio.workflow.study import load_study

from conftest import with_changes

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "tests" / "data" / "slurm"
SLURM_PROGRAMS = {"sinfo", "sbatch", "scontrol", "srun", "sacctmgr"}


class FakeSlurm:
    """Answers Slurm's commands from recorded output; ``calls`` keeps what was asked."""

    def __init__(self, nodes: str | None = None, burst: str | None = None, mpi_default: str = "pmi2",
                 sinfo_fails: str = "", accounting: bool = False):
        self.nodes = nodes if nodes is not None else (RECORDED / "sinfo-nodes.txt").read_text()
        self.burst = burst if burst is not None else (RECORDED / "scontrol-show-burst.txt").read_text()
        self.mpi_default, self.sinfo_fails, self.accounting = mpi_default, sinfo_fails, accounting
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str]:
        self.calls.append(argv)
        if argv[:3] == ["sinfo", "-h", "-o"]:
            return (1, self.sinfo_fails) if self.sinfo_fails else (0, "debug*\n")
        if argv[:2] == ["sinfo", "-h"]:
            return 0, self.nodes
        if argv[:3] == ["scontrol", "show", "partition"]:
            return 0, (RECORDED / "scontrol-show-partition.txt").read_text()
        if argv[:3] == ["scontrol", "show", "burst"]:
            return 0, self.burst
        if argv[:3] == ["scontrol", "show", "config"]:
            return 0, f"MpiDefault              = {self.mpi_default}\n"
        if argv[0] == "sacctmgr":
            if not self.accounting:
                return 1, "You are not running a supported accounting_storage plugin\n"
            return 0, "normal|\nproj1|\n"
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture(autouse=True)
def slurm_on_path(monkeypatch):
    """Slurm's clients found, whatever this machine has installed."""
    which = shutil.which
    monkeypatch.setattr(clustercheck.shutil, "which",
                        lambda name, *a, **k: f"/usr/bin/{name}" if name in SLURM_PROGRAMS else which(name, *a, **k))
    monkeypatch.delenv("SLURM_CONF", raising=False)


def profile(tmp_path: Path, defaults: dict | list | None = None, rules: dict | None = None,
            executor: str = "slurm") -> Profile:
    folder = tmp_path / "mysite"
    folder.mkdir(exist_ok=True)
    data = {"executor": executor, "default-resources": defaults if defaults is not None else {"slurm_partition": "debug"}}
    if rules:
        data["set-resources"] = rules
    (folder / "config.yaml").write_text(yaml.safe_dump(data))
    return Profile.read(folder)


def smoke(default_config, **changes):
    smoke_study = yaml.safe_load((REPO / "config" / "studies" / "smoke.yaml").read_text())
    config = with_changes(default_config, **smoke_study)
    return load_study(with_changes(config, **changes) if changes else config)


def check(tmp_path, default_config, slurm=None, defaults=None, rules=None, env=None, **changes) -> list[str]:
    filled, study = smoke(default_config, **changes)
    return check_cluster(profile(tmp_path, defaults, rules), filled, study, slurm or FakeSlurm(), env=env or {})


def test_recorded_output_parses():
    partitions = parse_records((RECORDED / "scontrol-show-partition.txt").read_text())
    assert [p["PartitionName"] for p in partitions] == ["debug"] and partitions[0]["Default"] == "YES"
    node, = parse_nodes((RECORDED / "sinfo-nodes.txt").read_text())
    assert node.cpus >= 1 and node.mem_mb > 1000
    assert parse_pools((RECORDED / "scontrol-show-burst.txt").read_text()) == {"localpool"}
    assert requested_pool("#BB_LUA pool=localpool capacity=10") == "localpool"
    assert requested_pool("#DW jobdw type=scratch access_mode=striped capacity=1GiB") is None


def test_the_localhost_cluster_runs_the_smoke_study(tmp_path, default_config):
    assert check(tmp_path, default_config) == []


def test_the_shipped_profile_refuses_its_partition_placeholder(tmp_path, default_config):
    shipped = Profile.read(REPO / "profiles" / "slurm")
    assert shipped.defaults["slurm_partition"] == PARTITION_PLACEHOLDER
    filled, study = smoke(default_config)
    problems = check_cluster(shipped, filled, study, FakeSlurm(), env={})
    assert len(problems) == 1 and "\n" not in problems[0]
    assert "profiles/slurm/config.yaml default-resources: slurm_partition is the placeholder SITE_PARTITION" in problems[0]
    assert problems[0].endswith("partitions: debug")


def test_an_unknown_partition_is_refused_naming_the_profile_key(tmp_path, default_config):
    problems = check(tmp_path, default_config, defaults=["slurm_partition='compute'", "mem_mb=500"])
    assert problems == [f"{tmp_path}/mysite/config.yaml default-resources: slurm_partition is 'compute', which this "
                        "cluster does not know; set it to one of: debug"]
    problems = check(tmp_path, default_config, rules={"cycle_step": {"slurm_partition": "long"}})
    assert len(problems) == 1 and "set-resources: cycle_step: slurm_partition is 'long'" in problems[0]


def test_no_partition_set_takes_the_clusters_default(tmp_path, default_config):
    assert check(tmp_path, default_config, defaults={"mem_mb": 500}) == []


def test_slurm_not_reachable_is_one_line_before_anything_is_asked(tmp_path, default_config):
    slurm = FakeSlurm()
    problems = check(tmp_path, default_config, slurm=slurm, env={"SLURM_CONF": str(tmp_path / "none.conf")})
    assert problems == [f"Slurm is not reachable: SLURM_CONF={tmp_path / 'none.conf'} names no file; unset it, or set "
                        "it to the cluster's slurm.conf (or run on the cluster's login node)"]
    assert slurm.calls == []  # sinfo would retry for a minute
    slurm = FakeSlurm(sinfo_fails="sinfo: error: Unable to contact slurm controller (connect failure)\n")
    problems = check(tmp_path, default_config, slurm=slurm)
    assert len(problems) == 1 and "sinfo failed (sinfo: error: Unable to contact slurm controller" in problems[0]


def test_a_job_larger_than_a_node_is_refused(tmp_path, default_config):
    small = FakeSlurm(nodes="vm|1|21694\n")
    problems = check(tmp_path, default_config, slurm=small)
    assert len(problems) == 1, problems
    assert "fcst asks for 2 tasks x " in problems[0]
    assert "CPUs on one node, but a node of partition 'debug' has at most 1 CPUs" in problems[0]
    assert "write_component.ranks" in problems[0]
    tight = FakeSlurm(nodes="vm|4|600\n")
    problems = check(tmp_path, default_config, slurm=tight, defaults={"slurm_partition": "debug", "mem_mb": 500})
    assert len(problems) == 1 and "but a node of partition 'debug' has at most 600 MB" in problems[0]
    # the profile's own memory for a rule is checked too
    problems = check(tmp_path, default_config, rules={"cycle_step": {"mem_mb": 10**8}})
    assert len(problems) == 1 and "set-resources: cycle_step: mem_mb to at most" in problems[0]


def test_account_and_qos_are_checked_where_set(tmp_path, default_config):
    problems = check(tmp_path, default_config, defaults={"slurm_partition": "debug", "slurm_account": "proj1"})
    assert len(problems) == 1 and "slurm_account is 'proj1', but this cluster keeps no accounts" in problems[0]
    accounting = FakeSlurm(accounting=True)
    assert check(tmp_path, default_config, slurm=accounting,
                 defaults={"slurm_partition": "debug", "slurm_account": "proj1", "qos": "normal"}) == []
    problems = check(tmp_path, default_config, slurm=FakeSlurm(accounting=True),
                     defaults={"slurm_partition": "debug", "qos": "high"})
    assert problems == [f"{tmp_path}/mysite/config.yaml default-resources: qos is 'high', which this cluster does not "
                        "know; set it to one of: normal, proj1 (sacctmgr show qos)"]


def test_burst_buffer_pools_the_study_asks_for_must_exist(tmp_path, default_config):
    tiers = {**default_config["tiers"], "bb": {"kind": "burst_buffer", "path": "$BB_STAGE_DIR", "persistent": False,
                                               "shared": True, "burst_buffer": "#BB_LUA pool=fastpool capacity=10"}}
    problems = check(tmp_path, default_config, tiers=tiers, scratch_tiers=["bb"])
    assert problems == ["config key tiers.bb.burst_buffer asks for pool 'fastpool', which this cluster does not have; "
                        "set pool= to one of: localpool"]
    problems = check(tmp_path, default_config, slurm=FakeSlurm(burst=""), tiers=tiers, scratch_tiers=["bb"])
    assert len(problems) == 1 and "asks for a burst buffer, but this cluster has none" in problems[0]
    tiers["bb"]["burst_buffer"] = "#BB_LUA pool=localpool capacity=10"
    assert check(tmp_path, default_config, tiers=tiers, scratch_tiers=["bb"]) == []


def test_the_mpi_launcher_must_be_usable(tmp_path, default_config):
    problems = check(tmp_path, default_config, launcher="no-such-mpirun -n {ntasks}")
    assert problems == ["config key launcher starts 'no-such-mpirun', which is not found here; install it, or set "
                        "launcher to a launcher the jobs can run, e.g. 'srun -n {ntasks}'"]
    problems = check(tmp_path, default_config, slurm=FakeSlurm(mpi_default="none"), launcher="srun -n {ntasks}")
    assert len(problems) == 1 and "MpiDefault is none" in problems[0] and "srun --mpi=pmi2" in problems[0]
    assert check(tmp_path, default_config, slurm=FakeSlurm(mpi_default="none"),
                 launcher="srun --mpi=pmi2 -n {ntasks}") == []


def test_a_local_profile_has_no_cluster_to_check(tmp_path, default_config):
    filled, study = smoke(default_config)
    slurm = FakeSlurm()
    assert check_cluster(profile(tmp_path, executor="local"), filled, study, slurm, env={}) == []
    assert slurm.calls == []


def test_a_profile_folder_without_config_is_refused(tmp_path):
    with pytest.raises(clustercheck.ClusterError, match="PROFILE=.*config.yaml cannot be read"):
        Profile.read(tmp_path / "nosuch")


def test_a_shared_file_strategy_across_nodes_on_node_local_scratch_is_refused(tmp_path, default_config):
    """Today a job on scratch no other node sees runs on one node (workflow.slurm), so only a profile's nodes
    makes its forecast span nodes: refused for parallel and quilt_parallel there, naming arm, strategy and tier."""
    def shared_file(problems):
        return [p for p in problems if "writes each file from many ranks" in p]

    assert shared_file(check(tmp_path, default_config, write_strategies=["parallel"])) == []
    spread = {"cycle_step": {"nodes": 3}}
    problems = shared_file(check(tmp_path, default_config, rules=spread, write_strategies=["parallel"]))
    key = f"{tmp_path}/mysite/config.yaml set-resources: cycle_step: nodes"
    assert [p.split(":")[0] for p in problems] == ["arm node_local", "arm shm"]  # not lustre: shared
    assert problems[0].startswith("arm node_local: write strategy 'parallel' writes each file from many ranks at once, "
                                  f"and the fcst job's 2 ranks may run on 3 nodes ({key}), but its scratch tier "
                                  "'node_local' is not shared across nodes (tiers.node_local.shared: false)")
    assert problems[0].endswith(f"or set {key} to 1") and "\n" not in problems[0]
    assert shared_file(check(tmp_path, default_config, rules=spread, write_strategies=["per_rank"])) == []
    assert shared_file(check(tmp_path, default_config, rules={"cycle_step": {"nodes": 1}},
                             write_strategies=["quilt_parallel"])) == []
    # default-resources do not reach a rule that sets nodes itself (1 on node-local scratch)
    assert shared_file(check(tmp_path, default_config, defaults={"slurm_partition": "debug", "nodes": 2},
                             write_strategies=["parallel"])) == []


def test_a_job_spread_over_nodes_is_checked_per_node(tmp_path, default_config):
    """docs/cluster.md's three 2-CPU nodes: the default 2-rank forecast with 2 copy streams does not fit one
    node, but spread one rank per node it does; more nodes than the partition has are refused."""
    three = FakeSlurm(nodes="n1|2|4000\nn2|2|4000\nn3|2|4000\n")
    problems = check(tmp_path, default_config, slurm=three, write_component={"ranks": 2})
    assert any("fcst asks for 2 tasks x 2 CPUs on one node" in p and "job_layout" in p for p in problems), problems
    streams = {"staging": {"streams": 2}, "write_component": {"ranks": 2}}
    assert check(tmp_path, default_config, slurm=three, **streams, job_layout={"fcst": {"nodes": 2}}) == []
    wide = {"staging": {"streams": 2}, "write_component": {"ranks": 6}, "job_layout": {"fcst": {"nodes": 2}}}
    problems = check(tmp_path, default_config, slurm=three, **wide)
    assert len(problems) == 1 and "asks for 3 tasks x 1 CPUs on each of its 2 nodes" in problems[0], problems
    four = {"write_component": {"ranks": 4}, "staging": {"streams": 1}, "job_layout": {"fcst": {"nodes": 4}}}
    problems = check(tmp_path, default_config, slurm=three, **four)
    assert len(problems) == 1 and "asks for 4 nodes, but partition 'debug' has 3" in problems[0], problems
