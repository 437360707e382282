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

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pandas as pd
import pytest
import yaml

from conftest import REPO, cannot_run_here, snakemake
from cycleio import fsutil
from cycleio.storage import checksums, staging
from cycleio.storage.checksums import checksum_file
from cycleio.storage.copyengine import syncfs_makes_durable
from cycleio.storage.staging import copy_and_verify
from cycleio.storage.stagingtypes import StagingError, StagingOptions
from cycleio.storage.tiers import filesystem_type

pytestmark = [pytest.mark.e2e, pytest.mark.tool]
GLUSTER_CI = REPO / "ci" / "gluster"


def unavailable(reason: str):
    cannot_run_here(f"the GlusterFS test cannot run: {reason}")


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
    monkeypatch.setattr(checksums, "BLOCK_BYTES", 2**20)  # a 3-block file, copied with its blocks in parallel
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
        assert copied.checksum == checksum_file(src) and verified.bytes == copied.bytes
    assert not [p for p in dest.rglob("*") if fsutil.is_temporary(p.name)]


def test_a_study_sweeps_two_persistent_tiers_one_of_them_glusterfs(gluster, tmp_path):
    workdir = tmp_path / "study"
    workdir.mkdir()
    shm = Path("/dev/shm") / f"cycleio-test-gluster-{os.getpid()}"
    overrides = {
        "cycles": {"end": "2026123112"},  # the half cycle: fcst and post stage out to each persistent tier
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
        snakemake(REPO, workdir, targets=["results/smoke/tables/step_summary.csv"])  # the jobs and their tables, no figure
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


# ------------------------------------------------------------------------------------------------ brick faults


@contextlib.contextmanager
def volume(name: str, bricks: int, redundancy: int | None = None):
    """A GlusterFS volume of its own (mount point, brick folders, volume name), taken down after."""
    vol = f"cycleio{name}{os.getpid()}"
    root = Path(f"/srv/cycleio-test-{name}-{os.getpid()}")
    mount = Path(f"/mnt/cycleio-test-{name}-{os.getpid()}")
    env = {**os.environ, "VOL": vol, "BRICK_ROOT": str(root), "REDUNDANCY": str(redundancy or "")}
    try:
        up = subprocess.run(["bash", GLUSTER_CI / "up.sh", mount, str(bricks)], capture_output=True, text=True,
                            env=env, timeout=180)
        assert up.returncode == 0, up.stderr
        yield mount, [root / vol / f"b{i}" for i in range(1, bricks + 1)], vol
    finally:
        subprocess.run(["bash", GLUSTER_CI / "down.sh", mount], capture_output=True, env=env, timeout=180)
        shutil.rmtree(mount, ignore_errors=True)


def brick_pid(vol: str, brick: Path) -> int:
    status = subprocess.run(["gluster", "--mode=script", "volume", "status", vol, "--xml"], capture_output=True,
                            text=True, check=True, timeout=60).stdout
    for node in ElementTree.fromstring(status).iter("node"):
        if node.findtext("path") == str(brick):
            return int(node.findtext("pid"))
    raise AssertionError(f"no brick {brick} in the status of {vol}:\n{status}")


def dead(pid: int) -> bool:
    """Gone, or a zombie (a killed daemon stays one for a while here)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True


def kill_brick(vol: str, brick: Path) -> int:
    pid = brick_pid(vol, brick)
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        if dead(pid):
            break
        time.sleep(0.05)
    return pid


def restart_brick(vol: str, brick: Path, killed: int, folder: Path) -> None:
    """Start the volume's dead brick; return when the mount reaches every brick again (creating a file
    on each brick: 24 names, hashed over two bricks, all miss one with a chance of one in eight million).

    glusterd starts a brick whose PID still answers a signal (a zombie not yet reaped) as running: so
    again until a new brick process runs.
    """
    deadline = time.monotonic() + 60
    while True:
        subprocess.run(["gluster", "--mode=script", "volume", "start", vol, "force"], check=True, capture_output=True,
                       timeout=120)
        pid = brick_pid(vol, brick)
        if pid > 0 and pid != killed and not dead(pid):
            break
        assert time.monotonic() < deadline, f"glusterd did not restart {brick} in 60 s"
        time.sleep(1)
    probes = [folder / f"probe{i}" for i in range(24)]
    while True:
        try:
            for probe in probes:
                probe.write_bytes(b"x")
            break
        except OSError as err:
            assert time.monotonic() < deadline, f"the mount did not reach the restarted brick in 60 s: {err}"
            time.sleep(0.5)
    for probe in probes:
        probe.unlink()


def stage_out_files(tmp_path: Path, dest: Path) -> list[tuple[Path, Path]]:
    source = tmp_path / "scratch"
    source.mkdir()
    pairs = []
    for i in range(24):
        (source / f"gdas.t00z.atmf{i:03d}.nc").write_bytes(os.urandom(256 * 1024 + i))
        pairs.append((source / f"gdas.t00z.atmf{i:03d}.nc", dest / f"gdas.t00z.atmf{i:03d}.nc"))
    return pairs


def kill_at_fsync(monkeypatch, call: int, vol: str, brick: Path) -> list[int]:
    """Kill the brick, for real, as the stage-out makes its ``call``-th copy durable; the list gets its PID."""
    calls, killed, real_fsync = [], [], os.fsync

    def fsync(fd):
        calls.append(fd)
        if len(calls) == call:
            killed.append(kill_brick(vol, brick))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return killed


def temporaries(bricks: list[Path]) -> list[Path]:
    return [p for brick in bricks for p in brick.rglob("*") if ".glusterfs" not in p.parts and fsutil.is_temporary(p.name)]


def test_a_brick_killed_during_stage_out_fails_it_cleanly_and_the_rerun_lands_everything(gluster, tmp_path,
                                                                                          monkeypatch):
    """Distributed: the files hashed to the killed brick cannot be written. The stage-out fails naming a
    file and the error, no file gets its final name, and once the brick is back a new process (as
    Snakemake's rerun) removes what the failed one could not reach then and lands and verifies every file."""
    with volume("dist", 2) as (mount, bricks, vol):
        dest = mount / "smoke" / "gdas.20261231" / "00"
        pairs = stage_out_files(tmp_path, dest)
        killed = kill_at_fsync(monkeypatch, 6, vol, bricks[1])
        with pytest.raises((OSError, StagingError)) as failed:
            copy_and_verify(pairs, StagingOptions(streams=4))
        assert killed, "the stage-out ended before the brick was killed"
        assert str(dest) in str(failed.value) and "Errno 107" in str(failed.value)  # ENOTCONN, named with the file
        monkeypatch.undo()
        sources = {target.name: source for source, target in pairs}
        for landed in dest.iterdir():  # a final name only on a whole, verified copy (renamed before the failure)
            assert fsutil.is_temporary(landed.name) or landed.read_bytes() == sources[landed.name].read_bytes()
        assert not temporaries(bricks[:1])  # the live brick: every temporary removed

        restart_brick(vol, bricks[1], killed[0], dest)
        rerun = subprocess.run(
            [sys.executable, "-c", "import json, sys; from cycleio.storage.staging import copy_and_verify; "
             "copy_and_verify([tuple(p) for p in json.load(sys.stdin)])"],
            input=json.dumps([[str(s), str(d)] for s, d in pairs]), capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
        for source, target in pairs:
            assert target.read_bytes() == source.read_bytes()
        # what the mount lists: the rerun removed every temporary; on the brick that was killed, a temporary
        # created as it died can stay on disk unlisted by the mount (CI, 2026-11-26: 14 of them, still unlisted 60 s
        # after the restart), so no rerun sees it
        assert not [p for p in dest.iterdir() if fsutil.is_temporary(p.name)]
        assert not temporaries(bricks[:1])
        assert all(p.name.endswith(f".tmp-{os.getpid()}") for p in temporaries(bricks[1:]))  # the failed copy's only


def test_a_dispersed_volume_stages_out_through_a_killed_brick(gluster, tmp_path, monkeypatch):
    """Dispersed, 3 bricks with redundancy 1: one brick killed during the stage-out costs nothing."""
    with volume("disp", 3, redundancy=1) as (mount, bricks, vol):
        dest = mount / "smoke" / "gdas.20261231" / "00"
        pairs = stage_out_files(tmp_path, dest)
        killed = kill_at_fsync(monkeypatch, 6, vol, bricks[1])
        results, land = copy_and_verify(pairs, StagingOptions(streams=4))
        monkeypatch.undo()
        assert land.files == len(pairs) and all(verified.bytes == copied.bytes for copied, verified in results)
        assert killed and dead(killed[0])  # the brick stayed dead all along
        for source, target in pairs:
            assert target.read_bytes() == source.read_bytes()
        assert not [p for p in dest.iterdir() if fsutil.is_temporary(p.name)]
