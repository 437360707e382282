"""A replay job of the cycle as a step of its own kind (surrogates/darshanjob.py through runner.job.run_step): its inputs laid
out once, staged in, replayed under MPI, staged out and verified, recorded, its manifest last."""

from __future__ import annotations

import json

import pytest
from conftest import require_tool

from cycleio.config.tierspec import Tier
from cycleio.config.settings import ArmSettings
from cycleio.records import cycle_records
from cycleio.storage.checksums import checksum_file
from cycleio.runner.job import run_step
from cycleio.runner.persistentjobs import run_darshan_inputs
from cycleio.surrogates.darshanjob import ReplayJobError

CYCLE = "2026010106"
JOB = {"log": "example:ior_hdf5_example.darshan", "after": "first", "ranks": 2, "scale": 0.1, "timing": "io",
       "layer": "posix"}


@pytest.fixture
def mpiexec():  # conftest marks the tests using it ``mpi``: they start MPI ranks (make test, not make test-fast)
    return require_tool("mpiexec", "the mpich wheel (pip install mpich) provides it")


def arm(tmp_path, scratch: str) -> ArmSettings:
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    tiers = {"lustre": lustre, "shm": Tier("shm", "memory", str(tmp_path / "shm"), persistent=False, shared=False)}
    return ArmSettings(study="t", arm=scratch, start="2026010100", seed=7, resolution="C12", levels=4,
                       persistent=lustre, scratch=tiers[scratch], darshan={"only": True, "jobs": {"ior": dict(JOB)}})


def read_records(path):
    import pandas as pd

    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])


@pytest.mark.tool
@pytest.mark.parametrize("scratch", ["shm", "lustre"])
def test_a_replay_job_stages_in_replays_stages_out_and_verifies(tmp_path, scratch, mpiexec):
    settings = arm(tmp_path, scratch)
    laid = run_darshan_inputs(settings, tmp_path / "i.jsonl", tmp_path / "i.json")
    root = tmp_path / "lustre" / "t" / scratch
    assert [o["path"] for o in laid["outputs"]] == ["darshan/ior/00000-test123.h5"]
    assert (root / "darshan/ior/00000-test123.h5").stat().st_size == 419634
    manifest = run_step(settings, CYCLE, "darshan_ior", tmp_path / "r.jsonl", tmp_path / "m.json")
    assert json.loads((tmp_path / "m.json").read_text()) == manifest
    assert manifest["inputs"] == ["darshan/ior/00000-test123.h5"]
    [output] = manifest["outputs"]
    assert output["path"] == "gdas.20260101/06/darshan/ior/00000-test123.h5" and output["bytes"] == 419635
    assert checksum_file(root / output["path"]) == output["xxh3_64"]
    darshan = manifest["provenance"]["darshan"]
    assert darshan["ranks"] == 2 and darshan["scale"] == 0.1 and darshan["sources"] == {"dxt": 1}
    assert darshan["logged_slowest_rank"]["io_s"] > 0 and darshan["replay"]["io_s"] > 0
    assert darshan["fidelity"] == {
        "read": {"logged_bytes": 4202504, "logged_ops": 36, "expected_bytes": 420250, "replayed_bytes": 420250,
                 "replayed_ops": 36},
        "write": {"logged_bytes": 4195800, "logged_ops": 23, "expected_bytes": 419580, "replayed_bytes": 419580,
                  "replayed_ops": 23}}
    records = read_records(tmp_path / "r.jsonl")
    run = records[(records["phase"] == "run") & (records["tool"] == "darshan-replay") & (records["op"] != "launch")]
    assert run[run["op"] == "read"]["bytes"].sum() == 420250 and run[run["op"] == "write"]["bytes"].sum() == 419580
    assert run[run["op"] == "read"]["transfers"].sum() == 36 and run[run["op"] == "write"]["transfers"].sum() == 23
    assert sorted(set(run["rank"])) == [0, 1] and set(run["nranks"]) == {2}
    # the whole replay (launcher, the ranks' start-up) spans every rank's calls
    [launch] = records[records["op"] == "launch"].itertuples()
    assert launch.t_start <= run["t_start"].min() and run["t_start"].max() <= launch.t_start + launch.seconds
    phases = set(cycle_records(records)["phase"])
    if scratch == "shm":  # staged: copied in, back out, the job's folder removed
        assert phases == {"stage_in", "run", "stage_out", "verify", "cleanup"}
        assert not list((tmp_path / "shm").rglob(".job.*"))
    else:  # the baseline: replayed in the cycle's folder on the persistent tier, outputs verified in place
        assert phases == {"stage_in", "run", "verify", "cleanup"}
        assert sorted(p.name for p in (root / "gdas.20260101/06/darshan/ior").iterdir()) == ["00000-test123.h5"]
    # the kernel's count of the run: the ranks' start-up and the replayer's own files left out
    kernel = records[(records["phase"] == "run") & (records["op"] == "kernel_write")]
    assert 419580 <= kernel["bytes"].sum() < 419580 + 64 * 1024


@pytest.mark.tool
def test_a_replay_job_through_mpiio(tmp_path, mpiexec):
    """layer mpiio: the log's MPI-IO calls through MPI-IO (the wheel's ROMIO), as the command replays them."""
    settings = arm(tmp_path, "shm")
    settings.darshan["jobs"]["ior"]["layer"] = "mpiio"
    run_darshan_inputs(settings, tmp_path / "i.jsonl", tmp_path / "i.json")
    manifest = run_step(settings, CYCLE, "darshan_ior", tmp_path / "r.jsonl", tmp_path / "m.json")
    fidelity = manifest["provenance"]["darshan"]["fidelity"]
    assert manifest["provenance"]["darshan"]["layer"] == "mpiio"
    assert [(fidelity[d]["replayed_ops"], fidelity[d]["logged_ops"]) for d in ("read", "write")] == [(36, 36), (23, 23)]


def test_a_replay_job_without_its_inputs_says_which_job_lays_them_out(tmp_path):
    with pytest.raises(ReplayJobError, match=r"missing input on the persistent tier: .*darshan/ior/00000-test123.h5; "
                                             r"job darshan_inputs lays them out"):
        run_step(arm(tmp_path, "shm"), CYCLE, "darshan_ior", tmp_path / "r.jsonl", tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.tool
def test_in_a_paired_cycle_the_replay_job_is_paired_with_fio_for_its_efficiency(tmp_path, mpiexec):
    from cycleio.benchmarks.paired import PairedReplay

    require_tool("fio", "the paired replay runs fio")
    settings = arm(tmp_path, "lustre")  # shm's writes are not replayed where the machine hands memory back
    run_darshan_inputs(settings, tmp_path / "i.jsonl", tmp_path / "i.json")
    paired = PairedReplay(repetitions=2, max_files=10, min_bytes=0, min_seconds=0)
    run_step(settings, CYCLE, "darshan_ior", tmp_path / "r.jsonl", tmp_path / "m.json", replay=paired)
    records = read_records(tmp_path / "r.jsonl")
    replayed = records[(records["phase"] == "replay") & records["op"].isin(["read", "write"])]
    assert sorted(set(replayed["op"])) == ["read", "write"] and set(replayed["repetition"]) == {0, 1}
    # the run's bytes in its transfer sizes, by fio (in whole transfers of each size class: within a tenth here)
    assert all(0.9 * 419580 <= b <= 419580 for b in replayed[replayed["op"] == "write"]["bytes"])
    # the efficiency table pairs the job's run with them, as it pairs every step's
    from cycleio.report.benchtables import paired_jobs

    pairs = paired_jobs(records)
    assert set(pairs["step"]) == {"darshan_ior"} and sorted(set(pairs["op"])) == ["read", "write"]
    assert len(pairs) == 4 and pairs["replay_bytes"].notna().all()
    assert set(pairs.loc[pairs["op"] == "write", "step_bytes"]) == {419580}


def test_a_failed_replay_keeps_its_attempts_records_and_leaves_no_manifest(tmp_path):
    settings = arm(tmp_path, "shm")
    settings.launcher = "false -n {ntasks}"  # a launcher that starts nothing and fails
    run_darshan_inputs(settings, tmp_path / "i.jsonl", tmp_path / "i.json")
    with pytest.raises(RuntimeError, match=r"the replay on .* failed \(launcher exit code 1\)"):
        run_step(settings, CYCLE, "darshan_ior", tmp_path / "r.jsonl", tmp_path / "m.json",
                 failed_attempts=tmp_path / "failed")
    assert not (tmp_path / "m.json").exists() and not list((tmp_path / "shm").rglob(".job.*"))
    [kept] = (tmp_path / "failed").glob("attempt1.*.records.jsonl")
    records = read_records(kept)
    assert "copy" in set(records["op"]) and records.iloc[-1]["op"] == "failed"


def test_each_ranks_records_lie_end_to_end_from_its_start_with_its_metadata_and_gaps(tmp_path):
    from types import SimpleNamespace

    from cycleio.records import RecordLog
    from cycleio.storage.tiers import TierSite
    from cycleio.surrogates.darshanjob import add_replay_records

    files = [SimpleNamespace(index=0, path="00000-a"), SimpleNamespace(index=1, path="00001-b")]
    plan = SimpleNamespace(files=files, nranks=2)
    ranks = [{"rank": r, "t_start": 100.0 + r, "read_ops": [2, 0], "read_bytes": [10, 0], "read_s": [0.5, 0.0],
              "write_ops": [0, 3], "write_bytes": [0, 30], "write_s": [0.0, 0.25], "meta_ops": 4, "meta_s": 0.125,
              "gap_s": 1.0 * r} for r in range(2)]
    records = RecordLog(study="t", arm="shm", cycle=CYCLE, step="darshan_x")
    site = TierSite(Tier("shm", "memory", str(tmp_path / "shm"), persistent=False, shared=False), "t", "shm")
    add_replay_records(records, SimpleNamespace(ranks=ranks), plan, site, "darshan_x", cache_cold=False)
    got = [(r.rank, r.op, r.file, r.bytes, r.transfers, r.t_start, r.seconds, r.nranks) for r in records.records]
    assert got == [(0, "read", "00000-a", 10, 2, 100.0, 0.5, 2), (0, "write", "00001-b", 30, 3, 100.5, 0.25, 2),
                   (0, "meta", "", 0, 4, 100.75, 0.125, 2),
                   (1, "read", "00000-a", 10, 2, 101.0, 0.5, 2), (1, "write", "00001-b", 30, 3, 101.5, 0.25, 2),
                   (1, "meta", "", 0, 4, 101.75, 0.125, 2), (1, "compute", "", 0, 0, 101.875, 1.0, 2)]
    assert {r.tool for r in records.records} == {"darshan-replay"} and {r.phase for r in records.records} == {"run"}
    assert not any(r.cache_risk for r in records.records)  # on a memory tier the page cache is the tier
