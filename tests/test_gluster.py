"""Staging onto a real network filesystem: a GlusterFS volume FUSE-mounted on localhost.

The module installs GlusterFS from Debian packages and brings a 2-brick distributed volume up with
ci/gluster/install.sh and up.sh (root and /dev/fuse needed), and takes it down with down.sh. On FUSE
a syncfs may return success without reaching the daemon, so the engine fsyncs every copy in its own
stream there; and a study can sweep two persistent tiers, here the ext4 "lustre" folder and the
GlusterFS volume.

Without root, FUSE or the packages the module skips with the reason, except in CI (CI=true), where it
fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import IN_CI, REPO
from cycleio.storage import fsutil
from cycleio.storage import staging
from cycleio.storage.fsutil import file_checksum
from cycleio.storage.staging import StagingOptions, copy_and_verify, syncfs_makes_durable
from cycleio.storage.tiers import filesystem_type
from test_workflow import snakemake

pytestmark = [pytest.mark.e2e, pytest.mark.tool]
GLUSTER_CI = REPO / "ci" / "gluster"


def unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"CI=true and the GlusterFS test cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def gluster():
    """The mount point of a GlusterFS volume private to this test run."""
    if os.geteuid() != 0:
        unavailable("mounting GlusterFS needs root")
    if not Path("/dev/fuse").exists():
        unavailable("no /dev/fuse")
    install = subprocess.run(["bash", GLUSTER_CI / "install.sh"], capture_output=True, text=True, timeout=600)
    if install.returncode != 0:
        unavailable(f"installing GlusterFS failed: {install.stderr.strip()[-500:]}")
    mount = Path(f"/mnt/cycleio-test-gluster-{os.getpid()}")
    env = {**os.environ, "VOL": f"cycleiotest{os.getpid()}", "BRICK_ROOT": f"/srv/cycleio-test-gluster-{os.getpid()}"}
    up = subprocess.run(["bash", GLUSTER_CI / "up.sh", mount, "2"], capture_output=True, text=True, env=env,
                        timeout=180)
    try:
        if up.returncode != 0:
            unavailable(f"bringing a GlusterFS volume up failed: {up.stderr.strip()[-500:]}")
        yield mount
    finally:
        subprocess.run(["bash", GLUSTER_CI / "down.sh", mount], capture_output=True, env=env, timeout=180)
        shutil.rmtree(mount, ignore_errors=True)


def test_staging_onto_glusterfs_fsyncs_every_copy_and_verifies_it(gluster, tmp_path, monkeypatch):
    monkeypatch.setattr(fsutil, "BLOCK_BYTES", 2**20)  # a 3-block file, copied with its blocks in parallel
    monkeypatch.setattr(staging, "BLOCK_BYTES", 2**20)
    source = tmp_path / "src"
    source.mkdir()
    contents = {"gdas.t00z.atmf006.nc": os.urandom(3 * 2**20 + 5),
                **{f"obs/gdas.t00z.dump{i:02d}.bufr_d": os.urandom(4096 + i) for i in range(30)}}
    for name, data in contents.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(data)
    dest = gluster / "staged"
    assert filesystem_type(gluster) == "fuse.glusterfs"
    dest.mkdir()
    assert not syncfs_makes_durable(dest)
    fsynced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd))[1])

    pairs = [(source / name, dest / name) for name in contents]
    results, land = copy_and_verify(pairs, StagingOptions(streams=4))

    assert len(fsynced) >= len(pairs)  # each copy fsynced by its stream, not left to a syncfs
    assert land.files == len(pairs)
    for (src, dst), (copied, verified) in zip(pairs, results):
        assert dst.read_bytes() == src.read_bytes()
        assert copied.checksum == file_checksum(src) and verified.bytes == copied.bytes
    assert not [p for p in dest.rglob("*") if fsutil.is_temporary(p.name)]


def test_a_study_sweeps_two_persistent_tiers_one_of_them_glusterfs(gluster, tmp_path):
    workdir = tmp_path / "study"
    workdir.mkdir()
    shm = Path("/dev/shm") / f"cycleio-test-gluster-{os.getpid()}"
    overrides = {
        "cycles": {"end": "2026123118"},  # the half cycle and one full cycle
        "tiers": {
            "gluster": {"kind": "posix", "path": str(gluster / "persistent"), "persistent": True, "shared": True},
            "shm": {"kind": "memory", "path": str(shm)},
        },
        "persistent_tier": ["lustre", "gluster"],
        "scratch_tiers": ["lustre", "gluster", "shm"],
        "benchmarks": {"enabled": False},
    }
    (workdir / "tiers.yaml").write_text(yaml.safe_dump(overrides))
    try:
        snakemake(REPO, workdir)
    finally:
        shutil.rmtree(shm, ignore_errors=True)

    tables = workdir / "results" / "smoke" / "tables"
    summary = pd.read_csv(tables / "step_summary.csv", dtype={"cycle": str})
    assert set(summary["arm"]) == {"lustre", "lustre_shm", "gluster", "gluster_shm"}
    assert summary.groupby("arm").size().nunique() == 1  # the same steps in every arm
    tiers = pd.read_csv(tables / "tiers.csv").set_index(["arm", "role"])
    assert tiers.loc[("gluster_shm", "persistent"), "fs_type"] == "fuse.glusterfs"
    assert tiers.loc[("lustre_shm", "persistent"), "fs_type"] != "fuse.glusterfs"
    staged = pd.read_csv(tables / "staging.csv")
    out = staged[(staged["arm"] == "gluster_shm") & (staged["phase"] == "stage_out")]
    assert len(out) and set(out["dest_fs_type"]) == {"fuse.glusterfs"} and (out["bytes"] > 0).all()
    # the outputs are on the volume, under the study and arm, with final names only
    landed = [p for p in (gluster / "persistent" / "smoke" / "gluster_shm").rglob("*") if p.is_file()]
    assert landed and not [p for p in landed if fsutil.is_temporary(p.name)]
