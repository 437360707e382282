"""runner.nodes: a staged job over several nodes stages on each, with stand-ins for srun and scontrol.

The stand-in ``srun`` runs its command once per node, one after the other, each with the node's name
(SLURMD_NODENAME) and its own TMPDIR, as each node of a cluster has its own /tmp: the scratch tier's path follows
TMPDIR, so every "node" has its own scratch. The forecast's ranks run where the job runs (the first node), as the
serial strategy puts every file on rank 0's node. tests/test_slurm_multinode.py runs the same on three real nodes.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import tmpfs

from cycleio.config.forecast import ForecastSettings
from cycleio.config.settings import ArmSettings
from cycleio.config.tierspec import Tier
from cycleio.runner.job import run_step
from cycleio.runner.nodes import Allocation, allocation_env, per_node_allocation
from cycleio.storage.stagingtypes import StagingError

NODES = ("n1", "n2", "n3")
FAKE_SRUN = """#!/bin/sh
# stand-in for srun --nodes=N ... CMD: CMD once per node, each with its name and its own TMPDIR
nodes=1
while [ $# -gt 0 ]; do
  case "$1" in --nodes=*) nodes=${1#--nodes=} ;; --*) ;; *) break ;; esac
  shift
done
status=0
for i in $(seq 1 "$nodes"); do
  mkdir -p "$FAKE_NODES/n$i"
  SLURMD_NODENAME=n$i TMPDIR="$FAKE_NODES/n$i" "$@" || status=$?
done
exit $status
"""
FAKE_SCONTROL = """#!/bin/sh
case "$2" in
  job) echo "JobId=77 JobName=x NumNodes=3 NumCPUs=3 NumTasks=3 NtasksPerN(B:S:C)=1:0:*:* NodeList=n[1-3]" ;;
  *) echo n1 n2 n3 ;;
esac
"""


@pytest.fixture
def three_nodes(tmp_path, monkeypatch):
    """This process as the batch script on n1 of a three-node Slurm job; the nodes' TMPDIRs below ``nodes/``."""
    bin_dir, nodes = tmp_path / "bin", tmp_path / "nodes"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (nodes / "n1").mkdir(parents=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).resolve().parents[1] / "scripts"),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_NODES", str(nodes))
    for key, value in {"SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "3", "SLURM_JOB_NODELIST": "n[1-3]",
                       "SLURMD_NODENAME": "n1", "TMPDIR": str(nodes / "n1")}.items():
        monkeypatch.setenv(key, value)
    return nodes


def arm(tmp_path, **changes) -> ArmSettings:
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    local = Tier("node_local", "node_local", "${TMPDIR}/scratch/${SLURM_JOB_ID}", persistent=False, shared=False)
    tiny = ForecastSettings(obs_scale=(12 / 768) ** 2, pgrb2_fields=6, sflux_fields=3, product_grids=("1p00",),
                            restart_hours=(6,))
    settings = ArmSettings(study="t", arm="node_local", start="2026010100", seed=7, resolution="C12", levels=4,
                           persistent=lustre, scratch=local, forecast=tiny, write_component={"ranks": 1})
    return replace(settings, **changes)


def test_the_allocation_is_read_from_slurms_variables(three_nodes, tmp_path):
    assert Allocation.of_job() == Allocation("77", NODES, "n1")
    assert Allocation.of_job({"SLURM_JOB_ID": "5", "SLURM_JOB_NUM_NODES": "1"}) is None
    assert Allocation.of_job({}) is None
    shared = arm(tmp_path, scratch=Tier("lustre2", "lustre", str(tmp_path / "l2"), persistent=False, shared=True))
    assert per_node_allocation(shared) is None  # every node sees a shared tier: staged as on one node
    assert per_node_allocation(arm(tmp_path)) == Allocation("77", NODES, "n1")


def test_the_nodes_the_executors_job_step_hides_are_asked_of_slurm(three_nodes):
    """The Snakemake Slurm executor runs a job's command without SLURM_* but the job id: scontrol tells its nodes."""
    assert allocation_env() == {}  # set already
    stripped = {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "n1"}
    found = allocation_env(stripped)
    assert found == {"SLURM_JOB_NUM_NODES": "3", "SLURM_NNODES": "3", "SLURM_JOB_NODELIST": "n[1-3]",
                     "SLURM_NODELIST": "n[1-3]", "SLURM_NTASKS_PER_NODE": "1"}
    assert Allocation.of_job({**stripped, **found}) == Allocation("77", NODES, "n1")
    assert allocation_env({}) == {}


@pytest.mark.job  # the job's stage-node processes on each node: seconds each, in make test
def test_a_job_over_three_nodes_stages_on_each_and_leaves_nothing(three_nodes, tmp_path, lay_cold_start):
    settings = arm(tmp_path)
    lay_cold_start(settings)
    records_path = tmp_path / "out" / "fcst.records.jsonl"
    records_path.parent.mkdir()
    manifest = run_step(settings, "2026010100", "fcst", records_path, tmp_path / "out" / "fcst.manifest.json")
    records = [json.loads(line) for line in records_path.read_text().splitlines()]
    copies = [r for r in records if r["op"] == "copy"]
    inputs = manifest["inputs"]
    # the inputs went to n1 alone, whose process (the job's) reads them; the ranks only write. Only n1, where the
    # ranks ran, held outputs
    assert {r["file"] for r in copies if r["phase"] == "stage_in"} == set(inputs)
    assert {r["host"] for r in copies if r["phase"] == "stage_in"} == {"n1"}
    assert {r["host"] for r in copies if r["phase"] == "stage_out"} == {"n1"}
    assert {r["host"] for r in records if r["phase"] == "verify"} == {"n1"}
    assert {r["host"] for r in records if r["phase"] == "cleanup" and r["op"] == "remove"} == set(NODES)
    assert manifest["provenance"]["nodes"] == list(NODES)
    assert manifest["outputs"] and {entry["node"] for entry in manifest["outputs"]} == {"n1"}
    root = tmp_path / "lustre" / "t" / "node_local"
    for entry in manifest["outputs"]:
        assert (root / entry["path"]).stat().st_size == entry["bytes"]
    # nothing left on the other nodes' scratch (n1's own folder is its job_scratch's, at the command's end)
    for node in NODES[1:]:
        assert not list((three_nodes / node).rglob("*.nc")), node
        assert not (three_nodes / node / "scratch" / "77").exists(), node
    assert not list((three_nodes / "n1").rglob("*.nc"))
    assert not list(records_path.parent.glob("*.nodes"))  # the plans and results are gone


def faulted_arm(tmp_path, lay_cold_start, faults: dict):
    """An arm with ``faults``, its cold start laid out, and the folder its job's records and manifest go to."""
    settings = arm(tmp_path, faults=faults)
    lay_cold_start(settings)
    out = tmp_path / "out"
    out.mkdir()
    return settings, out


@pytest.mark.job  # the job's stage-node processes on each node: seconds each, in make test
def test_a_corrupt_copy_on_one_node_fails_the_job_naming_the_node_and_file(three_nodes, tmp_path, lay_cold_start):
    faults = {"corrupt_staged_file": [{"cycle": "2026010100", "step": "fcst", "attempt": 1, "phase": "stage_out"}]}
    settings, out = faulted_arm(tmp_path, lay_cold_start, faults)
    with pytest.raises(StagingError, match=r"stage_out failed on node n1: .*checksum") as err:
        run_step(settings, "2026010100", "fcst", out / "fcst.records.jsonl", out / "fcst.manifest.json")
    assert ".nc" in str(err.value)
    for node in NODES:  # the failed attempt's scratch is gone on every node
        assert not list((three_nodes / node).rglob("*.nc")), node
    # the plain rerun (attempt 2, which the fault does not aim at) lands every output
    manifest = run_step(settings, "2026010100", "fcst", out / "fcst.records.jsonl", out / "fcst.manifest.json",
                        attempt=2)
    assert manifest["outputs"] and all(entry["node"] == "n1" for entry in manifest["outputs"])


@pytest.mark.job  # the job's stage-node processes on each node: seconds each, in make test
@pytest.mark.parametrize("leave, phase", [(0, "stage_in"), ("inputs", "run")])
def test_a_full_scratch_on_one_node_fails_the_job_naming_the_node_and_file(three_nodes, tmp_path, lay_cold_start,
                                                                          leave, phase):
    """faults.fill_tier with a node: n1's scratch (a real 32 MiB tmpfs) filled as its stage-in begins. With nothing
    left, its stage-in's first copy meets ENOSPC; with room for the inputs only, its rank's first write does. Either
    way the job fails naming n1 and the file, every node's folder goes, and the plain rerun lands every output."""
    with tmpfs(three_nodes / "n1", "32m"):
        settings = arm(tmp_path)
        lay_cold_start(settings)
        root = tmp_path / "lustre" / "t" / "node_local"
        if leave == "inputs":  # the inputs fit, and 64 KiB besides (the job folder's own files)
            inputs = [p for p in root.rglob("*") if p.is_file()]
            leave = sum(p.stat().st_size + 4096 for p in inputs) + 64 * 1024
        fault = {"cycle": "2026010100", "step": "fcst", "attempt": 1, "leave": leave, "node": "n1"}
        settings = replace(settings, faults={"fill_tier": [fault]})
        out = tmp_path / "out"
        out.mkdir()
        with pytest.raises(Exception) as err:
            run_step(settings, "2026010100", "fcst", out / "fcst.records.jsonl", out / "fcst.manifest.json")
        message = str(err.value)
        assert "No space left on device" in message, message
        if phase == "stage_in":
            assert re.search(r"stage_in failed on node n1: .*\.nc", message), message
        else:
            assert re.search(r"rank 0 of 1 failed: .*\.nc.* \(on node n1\)", message), message
        for node in NODES:  # the filler and the failed attempt's scratch are gone on every node
            assert not list((three_nodes / node).rglob("*.nc")), node
            assert not list((three_nodes / node).rglob(".cycleio-fill.*")), node
        assert not (out / "fcst.manifest.json").exists()
        manifest = run_step(settings, "2026010100", "fcst", out / "fcst.records.jsonl", out / "fcst.manifest.json",
                            attempt=2)
        assert manifest["outputs"] and all(entry["node"] == "n1" for entry in manifest["outputs"])
        for entry in manifest["outputs"]:
            assert (root / entry["path"]).stat().st_size == entry["bytes"]


@pytest.mark.job  # the job's stage-node processes on each node: seconds each, in make test
def test_a_stage_out_that_fails_on_a_node_names_it_and_the_file(three_nodes, tmp_path, lay_cold_start):
    faults = {"fail_stage_out": [{"cycle": "2026010100", "step": "fcst", "attempt": 1, "after_files": 1}]}
    settings, out = faulted_arm(tmp_path, lay_cold_start, faults)
    with pytest.raises(StagingError, match=r"stage_out failed on node n1: .*the copy of .*\.nc fails after 1 of"):
        run_step(settings, "2026010100", "fcst", out / "fcst.records.jsonl", out / "fcst.manifest.json")
    assert not (out / "fcst.manifest.json").exists()
    for node in NODES:
        assert not list((three_nodes / node).rglob("*.nc")), node


@pytest.mark.job  # the job's stage-node processes on each node: seconds each, in make test
def test_a_stage_in_that_fails_on_the_reading_node_names_it_and_leaves_nothing(three_nodes, tmp_path,
                                                                               lay_cold_start):
    faults = {"corrupt_staged_file": [{"cycle": "2026010100", "step": "fcst", "attempt": 1, "phase": "stage_in"}]}
    settings, out = faulted_arm(tmp_path, lay_cold_start, faults)
    with pytest.raises(StagingError, match=r"stage_in failed on node n1: .*checksum"):
        run_step(settings, "2026010100", "fcst", out / "fcst.records.jsonl", out / "fcst.manifest.json")
    for node in NODES:
        assert not list((three_nodes / node).rglob("*.nc")), node
    for node in NODES[1:]:
        assert not (three_nodes / node / "scratch" / "77").exists(), node
