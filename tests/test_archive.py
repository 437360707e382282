"""The cycle's archive job: the tarballs' members against global-workflow's lists, the tarball's index and read-back,
the archive's limits (refusals and the split), the htar command line, and the faults (a killed job, a member that
changes while archived, a full archive tier)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import REPO, markdown_rows, tmpfs, with_changes

from cycleio.config.forecast import ForecastSettings
from cycleio.config.keys import ConfigError
from cycleio.config.settings import ArmSettings
from cycleio.config.tierspec import Tier
from cycleio.storage import archive as arc
from cycleio.storage.checksums import checksum_file
from cycleio.surrogates.archive_lists import tarball_members
from cycleio.runner.persistentjobs import run_archive
from cycleio.workflow.dependencies import CycledJobs, Job
from cycleio.workflow.study import load_study

START, FULL = "2026010100", "2026010106"


def names(specs) -> list[str]:
    return [spec.path.rsplit("/", 1)[-1] for spec in specs]


# ------------------------------------------------------------------------------------------------ the lists


def test_a_full_cycle_s_tarballs_hold_what_global_workflow_s_lists_name_of_cycleio_s_files():
    tarballs = tarball_members(FULL, START, ForecastSettings())
    gdas, restarta, restartb = (names(tarballs[n]) for n in ("gdas", "gdas_restarta", "gdas_restartb"))
    for hour in ("000", "003", "006", "009"):
        for name in (f"atmf{hour}.nc", f"sfcf{hour}.nc", f"atm.logf{hour}.txt", f"pgrb2.0p25.f{hour}",
                     f"pgrb2.0p25.f{hour}.idx", f"pgrb2.1p00.f{hour}", f"pgrb2.1p00.f{hour}.idx",
                     f"sfluxgrbf{hour}.grib2"):
            assert f"gdas.t06z.{name}" in gdas, name
    assert {f"gdas.t06z.{n}" for n in ("gsistat", "cnvstat", "oznstat", "radstat")} <= set(gdas)
    assert not [n for n in gdas if "master.grb2" in n]  # post's master file is in no list
    assert len(gdas) == 4 * 8 + 4
    assert sorted(restarta) == sorted(
        [f"gdas.t06z.{n}" for n in ("atminc.nc", "atmi003.nc", "atmi009.nc", "abias", "abias_pc", "abias_air",
                                    "abias_int", "radstat", "cnvstat", "dtfanl.nc", "prepbufr",
                                    "prepbufr.acft_profiles", "nsstbufr")]
        + [f"20260101.060000.sfcanl_data.tile{t}.nc" for t in range(1, 7)])
    # the surface analysis and the three restart sets (+3, +6, +9 h): 6 kinds x 6 tiles, coupler.res, fv_core.res.nc
    assert len(restartb) == 6 + 3 * 38
    for valid in ("20260101.090000", "20260101.120000", "20260101.150000"):
        assert f"{valid}.coupler.res" in restartb and f"{valid}.fv_core.res.tile6.nc" in restartb


def test_the_half_cycle_has_no_restarta_and_hourly_history_is_archived_every_3_hours():
    hourly = ForecastSettings(history_interval_hours=1)
    half = tarball_members(START, START, hourly)
    assert set(half) == {"gdas", "gdas_restartb"}  # no analysis in the half cycle
    gdas = names(half["gdas"])
    assert "gdas.t00z.atmf003.nc" in gdas and "gdas.t00z.atmf001.nc" not in gdas
    assert not [n for n in gdas if "gsistat" in n]
    with pytest.raises(ValueError, match="unknown tarball 'gfs'"):
        tarball_members(START, START, hourly, ["gfs"])


# ------------------------------------------------------------------------------------------------ tarball, index, read-back


def lay_members(root: Path, sizes: dict[str, int]) -> list[tuple[str, Path]]:
    members = []
    for index, (name, size) in enumerate(sizes.items()):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size) if size < 2**20 else bytes([index % 251]) * size)
        members.append((name, path))
    return members


SIZES = {"gdas.20260101/06/a.nc": 70_001, "gdas.20260101/06/empty": 0,
         "gdas.20260101/06/" + "long_name_" * 12 + ".nc": 1536, "gdas.20260101/06/b": 3 * 2**20 + 7}


def test_a_tarball_lands_with_an_index_of_names_sizes_offsets_and_checksums_and_reads_back(tmp_path):
    members = lay_members(tmp_path / "src", SIZES)
    final = tmp_path / "arch" / "gdas.tar"
    index = arc.write_tarball(final, members)
    assert final.stat().st_size == index.bytes == arc.tar_bytes(list(SIZES.items()))  # the planner's estimate is exact
    assert not [p for p in final.parent.iterdir() if p.name != "gdas.tar"]  # no temporary left
    with tarfile.open(final) as tar:
        listed = [(i.name, i.size, i.offset_data) for i in tar]
    assert listed == [(m.name, m.bytes, m.offset) for m in index.members]
    for member, (_, path) in zip(index.members, members):
        assert member.xxh3_64 == checksum_file(path)  # the project's checksum, made as the member streamed past
    arc.write_index(final, index)
    again = arc.TarballIndex.read(arc.index_path(final))
    assert [m.offset for m in again.members] == [m.offset for m in index.members]
    checked = arc.verify_tarball(final, again, {m.name: (m.bytes, m.xxh3_64) for m in index.members})
    assert checked.bytes == sum(SIZES.values())
    # a flipped byte in a member's data is found and named
    victim = index.members[0]
    with open(final, "r+b") as handle:
        handle.seek(victim.offset + 5)
        byte = handle.read(1)
        handle.seek(victim.offset + 5)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(arc.ArchiveError, match=r"gdas.tar: member gdas.20260101/06/a.nc reads back with checksum"):
        arc.verify_tarball(final, again)


def test_read_back_fails_a_member_that_differs_from_what_its_step_landed(tmp_path):
    members = lay_members(tmp_path / "src", {"x/a": 1000})
    final = tmp_path / "gdas.tar"
    index = arc.write_tarball(final, members)
    with pytest.raises(arc.MemberChanged, match=r"gdas.tar: member x/a is 1000 bytes .* but its step wrote 999 bytes"):
        arc.verify_tarball(final, index, {"x/a": (999, "0" * 16)})


# ------------------------------------------------------------------------------------------------ limits


def test_a_member_over_the_limit_is_refused_naming_tarball_and_member():
    limits = arc.ArchiveLimits(max_member_bytes=1000, max_tarball_bytes=10**9)
    with pytest.raises(arc.ArchiveLimitError,
                       match=r"gdas_restartb.tar of cycle 2026010106: member r/big is 2.0 KiB, over archive.max_member_bytes"):
        arc.plan_tarball("gdas_restartb", [("r/small", 10), ("r/big", 2000)], limits, "2026010106")


def test_a_tarball_over_the_limit_is_refused_or_split_into_numbered_parts_under_it():
    members = [(f"m{i}", 4000) for i in range(10)]
    limit = arc.tar_bytes(members[:4]) + 100
    with pytest.raises(arc.ArchiveLimitError, match=r"gdas.tar: about .* with 10 members .* set archive.split: true"):
        arc.plan_tarball("gdas", members, arc.ArchiveLimits(10**6, limit))
    parts = arc.plan_tarball("gdas", members, arc.ArchiveLimits(10**6, limit, split=True))
    assert [name for name, _ in parts] == ["gdas.part01.tar", "gdas.part02.tar", "gdas.part03.tar"]
    assert [m for _, chosen in parts for m in chosen] == members  # every member once, in order
    assert all(arc.tar_bytes(chosen) <= limit for _, chosen in parts)
    assert arc.plan_tarball("gdas", members, arc.ArchiveLimits(10**6, 10**6)) == [("gdas.tar", members)]


ARCHIVE_TIER = {"kind": "archive", "path": "results/tiers/archive"}


def archive_config(default_config, **changes):
    config = with_changes(default_config, archive__enabled=True, scratch_tiers=["lustre", "node_local"],
                          benchmarks__enabled=False)
    config["tiers"]["archive"] = dict(ARCHIVE_TIER)
    return with_changes(config, **changes)


def test_a_study_over_the_archive_s_limits_is_refused_before_any_job_naming_tarball_and_member(default_config):
    config = archive_config(default_config, archive__max_member_bytes="100m")
    with pytest.raises(ConfigError, match=r"gdas.tar of cycle 2026010100: member gdas.20260101/00/model/atmos/history/"
                                          r"gdas.t00z.atmf\d{3}.nc is .*, over archive.max_member_bytes"):
        load_study(config)
    with pytest.raises(ConfigError, match=r"gdas_restartb.tar of cycle 2026010100: about .* set archive.split: true"):
        load_study(archive_config(default_config, archive__max_tarball_bytes="700m"))
    _, study = load_study(archive_config(default_config, archive__max_tarball_bytes="700m", archive__split=True))
    assert study.arms["lustre"].archive["max_tarball_bytes"] == 700 * 2**20


@pytest.mark.parametrize("changes, message", [
    ({"archive__tier": "tape"}, "config key 'archive.tier': 'tape' is not a tier"),
    ({"scratch_tiers": ["lustre", "archive"]}, "config key 'archive.tier': tier 'archive' is also a persistent or scratch"),
    ({"archive__tier": "shm"}, "config key 'archive.tier': tier 'shm' has kind memory; the archive's tier needs kind: archive"),
    ({"archive__command": "htar -cvf x"}, "config key 'archive.command': 'htar -cvf x' must name {tarball} and {list}"),
    ({"archive__max_member_bytes": "lots"}, "config key 'archive.max_member_bytes': 'lots' is not a size"),
    ({"archive__tarballs": ["gfs"]}, "config key 'archive.tarballs[0]': 'gfs' is not allowed"),
])
def test_bad_archive_config_gets_one_line_naming_the_key(default_config, changes, message):
    with pytest.raises(ConfigError) as refused:
        load_study(archive_config(default_config, **changes))
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_the_archive_job_runs_after_the_cycle_s_steps_and_before_its_cleanup():
    jobs = CycledJobs("s", ("2026010100", "2026010106", "2026010112"), {"a": __import__(
        "cycleio.workflow.dependencies", fromlist=["ArmJobs"]).ArmJobs()}, keep=1, archive=True)
    assert Job("a", "2026010106", "arch") in jobs.archives() and len(jobs.archives()) == 3
    assert jobs.archive_dependencies("a", "2026010106") == [Job("a", "2026010106", s) for s in ("prep", "anal", "fcst", "post")]
    assert Job("a", "2026010100", "arch") in jobs.cleanup_dependencies("a", "2026010100")
    assert Job("a", "2026010100", "arch") in jobs.measured_jobs()
    assert CycledJobs("s", ("2026010100",), {"a": jobs.arms["a"]}).archives() == []


# ------------------------------------------------------------------------------------------------ htar's command line


def test_the_htar_command_line_is_built_from_the_template():
    argv = arc.command_argv("htar -cvf {tarball} -L {list}", "/hpss/a b/2026010106/gdas.tar", "/tmp/list")
    assert argv == ["htar", "-cvf", "/hpss/a b/2026010106/gdas.tar", "-L", "/tmp/list"]
    with pytest.raises(ValueError, match=r"must name \{tarball\} and \{list\}"):
        arc.command_argv("htar -cvf {tarball}", "t", "l")
    assert arc.command_found("htar-that-is-not-here -cvf {tarball} -L {list}") is None


def test_a_command_writes_the_tarball_through_a_stand_in_for_htar(tmp_path):
    """A stand-in for htar (htar is in no registry): GNU tar takes the same list of member paths."""
    members = lay_members(tmp_path / "rotdir", {"g/a": 5000, "g/b": 10})
    final = tmp_path / "arch" / "gdas.tar"
    index = arc.run_archive_command("tar -cf {tarball} -T {list}", final, members, tmp_path / "rotdir", timeout=60)
    assert index.tool == "tar" and [m.name for m in index.members] == ["g/a", "g/b"]
    assert [m.xxh3_64 for m in index.members] == [checksum_file(p) for _, p in members]
    arc.verify_tarball(final, index)
    assert sorted(p.name for p in final.parent.iterdir()) == ["gdas.tar"]  # no list, no temporary left
    with pytest.raises(arc.ArchiveError, match=r"gdas.tar: .* exited with 2"):
        arc.run_archive_command("tar -cf {tarball} -T {list}", final, [("g/missing", Path("x"))], tmp_path / "rotdir", 60)
    assert sorted(p.name for p in final.parent.iterdir()) == ["gdas.tar"]
    garbage = final.with_name("gdas_restarta.tar")  # a command that exits 0 having written no tarball
    with pytest.raises(arc.ArchiveError, match=r"gdas_restarta.tar: sh wrote 8 bytes that do not read as a tarball"):
        arc.run_archive_command("sh -c 'echo garbage > \"$0\"' {tarball} {list}", garbage, members, tmp_path / "rotdir", 60)
    assert sorted(p.name for p in final.parent.iterdir()) == ["gdas.tar"]


# ------------------------------------------------------------------------------------------------ faults


@pytest.mark.parametrize("change, seen", [("grow", "is 1000100 bytes"), ("shrink", "is 500 bytes"),
                                          ("rewrite", "is 1000000 bytes")])
def test_a_member_that_changes_while_archived_fails_that_tarball_and_leaves_nothing(tmp_path, monkeypatch, change, seen):
    members = lay_members(tmp_path / "src", {"x/first": 100, "x/moving": 1_000_000, "x/last": 100})
    moving = members[1][1]
    read = arc._MemberReader.read

    def meanwhile_a_writer(self, size=-1):
        if self.count == 0 and self.handle.name == str(moving):
            with open(moving, "r+b") as other:
                if change == "grow":
                    other.seek(0, os.SEEK_END)
                    other.write(b"x" * 100)
                elif change == "shrink":
                    other.truncate(500)
                else:  # new bytes, the same size; its mtime a second later (a coarse clock could hide the rewrite)
                    other.write(b"y" * 1_000_000)
            stamp = os.stat(moving).st_mtime_ns + 10**9
            os.utime(moving, ns=(stamp, stamp))
        return read(self, size)

    monkeypatch.setattr(arc._MemberReader, "read", meanwhile_a_writer)
    final = tmp_path / "arch" / "gdas.tar"
    with pytest.raises(arc.MemberChanged, match=rf"gdas.tar: member x/moving changed while archived \(it was 1000000 bytes, "
                                                rf".*it {seen}\)"):
        arc.write_tarball(final, members)
    assert list(final.parent.iterdir()) == []  # neither the tarball nor its temporary


def test_a_full_archive_tier_gives_the_os_error_and_the_tarball_s_name(tmp_path):
    members = lay_members(tmp_path / "src", {"x/a": 3 * 2**20})
    with tmpfs(tmp_path / "archive", "2m") as tier:
        with pytest.raises(OSError) as full:
            arc.write_tarball(tier / "2026010106" / "gdas_restartb.tar", members)
        assert full.value.errno == errno.ENOSPC and Path(full.value.filename).name == "gdas_restartb.tar"
        assert "No space left on device" in str(full.value)
        assert list((tier / "2026010106").iterdir()) == []


def arm_with_archive(tmp_path: Path, **archive) -> ArmSettings:
    tier = lambda name, kind: Tier(name=name, kind=kind, path=str(tmp_path / name))  # noqa: E731
    return ArmSettings(study="t", arm="lustre", start=START, seed=1, resolution="C12", levels=8,
                       persistent=tier("lustre", "lustre"), forecast=ForecastSettings(restart_hours=(6,)),
                       archive={"tier": vars(tier("archive", "archive")), "tarballs": ["gdas", "gdas_restarta", "gdas_restartb"],
                                "command": "", "timeout_s": 60.0, "split": False, "max_member_bytes": 2**30,
                                "max_tarball_bytes": 2**40, **archive})


def lay_cycle(settings: ArmSettings, cycle: str, big: int = 0) -> None:
    """The cycle's members on the persistent tier, small seeded bytes (one large member with ``big``)."""
    root = Path(settings.persistent.path) / settings.study / settings.arm
    for specs in tarball_members(cycle, settings.start, settings.forecast).values():
        for spec in specs:
            path = root / spec.path
            path.parent.mkdir(parents=True, exist_ok=True)
            size = big if big and spec.path.endswith("atmf000.nc") else 1000
            path.write_bytes(bytes([len(spec.path) % 251]) * size)


def test_the_arch_job_writes_indexed_verified_tarballs_and_records_phase_archive(tmp_path):
    import json

    settings = arm_with_archive(tmp_path)
    lay_cycle(settings, FULL)
    manifest = run_archive(settings, FULL, tmp_path / "arch.records.jsonl", tmp_path / "arch.manifest.json")
    folder = tmp_path / "archive" / "t" / "lustre" / FULL
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{t}.tar{suffix}" for t in ("gdas", "gdas_restarta", "gdas_restartb") for suffix in ("", ".index.json"))
    assert [t["members"] for t in manifest["tarballs"]] == [36, 19, 44]
    records = [json.loads(line) for line in (tmp_path / "arch.records.jsonl").read_text().splitlines()]
    assert {r["phase"] for r in records} == {"archive"}
    reads = [r for r in records if r["op"] == "read"]
    assert len(reads) == 36 + 19 + 44 and {r["tier"] for r in reads} == {"lustre"}
    writes = [r for r in records if r["op"] == "write"]
    assert {r["tier"] for r in writes} == {"archive"} and {r["tier_kind"] for r in writes} == {"archive"}
    assert sum(r["bytes"] for r in writes) == sum(t["bytes"] for t in manifest["tarballs"])


def test_the_arch_job_runs_a_configured_command_where_found_and_tarfile_where_not(tmp_path, caplog):
    """GNU tar stands in for htar (in no registry), here only: the job's command path end to end."""
    import json

    stand_in = arm_with_archive(tmp_path / "a", command="tar -cf {tarball} -T {list}", tarballs=["gdas"])
    lay_cycle(stand_in, FULL)
    manifest = run_archive(stand_in, FULL, tmp_path / "a.jsonl", tmp_path / "a.json")
    assert [(t["tarball"], t["tool"], t["members"]) for t in manifest["tarballs"]] == [("gdas.tar", "tar", 36)]
    folder = tmp_path / "a" / "archive" / "t" / "lustre" / FULL
    arc.verify_tarball(folder / "gdas.tar", arc.TarballIndex.read(folder / "gdas.tar.index.json"))
    ops = [json.loads(line)["op"] for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert ops == ["write", "sync", "checksum"]  # the command reads its members itself: one write, timed whole

    missing = arm_with_archive(tmp_path / "b", command="htar-not-here -cvf {tarball} -L {list}", tarballs=["gdas"])
    lay_cycle(missing, FULL)
    with caplog.at_level("WARNING", logger="cycleio"):
        manifest = run_archive(missing, FULL, tmp_path / "b.jsonl", tmp_path / "b.json")
    assert [t["tool"] for t in manifest["tarballs"]] == ["tarfile"]
    assert "its program is not found here; writing the tarballs with Python's tarfile instead" in caplog.text


def test_a_member_changed_since_its_step_landed_it_fails_the_command_s_tarball_and_leaves_nothing(tmp_path):
    """A command (htar, GNU tar here) cannot see a member change as it reads it: the read-back against the checksum
    the member's step recorded does, and the tarball is not kept under its final name."""
    import json

    settings = arm_with_archive(tmp_path, command="tar -cf {tarball} -T {list}", tarballs=["gdas"])
    lay_cycle(settings, FULL)
    root = Path(settings.persistent.path) / "t" / "lustre"
    specs = tarball_members(FULL, settings.start, settings.forecast, ["gdas"])["gdas"]
    outputs = [{"path": spec.path, "bytes": 1000, "xxh3_64": checksum_file(root / spec.path)} for spec in specs]
    manifest = tmp_path / "fcst.manifest.json"
    manifest.write_text(json.dumps({"outputs": outputs}))
    changed = root / specs[3].path
    changed.write_bytes(b"z" * 1000)  # rewritten after its step landed it, before the archive read it
    with pytest.raises(arc.MemberChanged, match=rf"gdas.tar: member {specs[3].path} is 1000 bytes with checksum "
                                                r".* but its step wrote 1000 bytes .*: it changed after its step"):
        run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json", manifests=[manifest])
    assert list((tmp_path / "archive" / "t" / "lustre" / FULL).iterdir()) == []  # no tarball, index or temporary
    assert not (tmp_path / "m.json").exists()


def test_the_arch_job_plans_with_the_members_actual_sizes_splitting_or_refusing_by_name(tmp_path):
    big = 3 * 2**20  # atmf000.nc, larger than the study's estimate planned for: the job plans again
    split = arm_with_archive(tmp_path / "a", tarballs=["gdas"], split=True, max_tarball_bytes=2 * 2**20)
    lay_cycle(split, FULL, big=big)
    with pytest.raises(arc.ArchiveLimitError, match=r"gdas.tar of cycle 2026010106: member .*atmf000.nc alone makes "
                                                    r"a part of 3.0 MiB, over archive.max_tarball_bytes"):
        run_archive(split, FULL, tmp_path / "a.jsonl", tmp_path / "a.json")
    limit = big + 32 * 1024  # the big member and a few small ones per part
    fits = arm_with_archive(tmp_path / "b", tarballs=["gdas"], split=True, max_tarball_bytes=limit)
    lay_cycle(fits, FULL, big=big)
    manifest = run_archive(fits, FULL, tmp_path / "b.jsonl", tmp_path / "b.json")
    parts = [t["tarball"] for t in manifest["tarballs"]]
    assert len(parts) > 1 and parts == [f"gdas.part{n:02d}.tar" for n in range(1, len(parts) + 1)]
    assert sum(t["members"] for t in manifest["tarballs"]) == 36 and all(t["bytes"] <= limit for t in manifest["tarballs"])
    whole = arm_with_archive(tmp_path / "c", tarballs=["gdas"], max_tarball_bytes=2 * 2**20)
    lay_cycle(whole, FULL, big=big)
    with pytest.raises(arc.ArchiveLimitError, match=r"gdas.tar of cycle 2026010106: about .* with 36 members "
                                                    r"\(largest .*atmf000.nc\), over archive.max_tarball_bytes"):
        run_archive(whole, FULL, tmp_path / "c.jsonl", tmp_path / "c.json")
    assert not (tmp_path / "c" / "archive" / "t" / "lustre" / FULL).exists() or not any(
        (tmp_path / "c" / "archive" / "t" / "lustre" / FULL).iterdir())


@pytest.mark.integration
def test_a_killed_arch_job_leaves_no_tarball_under_a_final_name_and_its_rerun_lands_it(tmp_path):
    settings = arm_with_archive(tmp_path, tarballs=["gdas"])
    lay_cycle(settings, FULL, big=256 * 2**20)
    folder = tmp_path / "archive" / "t" / "lustre" / FULL
    argv = [sys.executable, "-m", "cycleio", "archive", "--arm-settings", settings.job_json("arch"), "--cycle", FULL,
            "--records", str(tmp_path / "r.jsonl"), "--manifest", str(tmp_path / "m.json")]
    env = {**os.environ, "PYTHONPATH": str(REPO / "scripts")}
    job = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:  # kill it mid-tarball: once its temporary holds part of the big member
            temporaries = list(folder.glob(".gdas.tar.tmp-*")) if folder.exists() else []
            if temporaries and temporaries[0].stat().st_size > 16 * 2**20:
                break
            time.sleep(0.005)
        os.kill(job.pid, signal.SIGKILL)
    finally:
        job.wait()
    assert job.returncode == -signal.SIGKILL
    assert not (folder / "gdas.tar").exists() and not (folder / "gdas.tar.index.json").exists()
    assert list(folder.glob(".gdas.tar.tmp-*"))  # what the kill left, under a temporary name only
    run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json", attempt=2)
    assert sorted(p.name for p in folder.iterdir()) == ["gdas.tar", "gdas.tar.index.json"]
    arc.verify_tarball(folder / "gdas.tar", arc.TarballIndex.read(folder / "gdas.tar.index.json"))


# ------------------------------------------------------------------------------------------------ does it keep up


def test_the_keep_up_table_says_per_arm_whether_each_archive_finished_before_the_next_began():
    import pandas as pd

    from cycleio.report.answers import keep_up_markdown
    from cycleio.report.archive import arm_keep_up, keep_up_table

    rows = [("a", "2026010100", 100.0, 10.0), ("a", "2026010106", 105.0, 10.0), ("a", "2026010112", 130.0, 5.0),
            ("b", "2026010100", 100.0, 1.0), ("b", "2026010106", 110.0, 1.0)]
    summary = pd.DataFrame([{"study": "s", "arm": arm, "cycle": cycle, "step": "arch", "t_start": t, "wall_s": w,
                             "bytes_archived": 10 * 2**20} for arm, cycle, t, w in rows]
                           + [{"study": "s", "arm": "a", "cycle": "2026010106", "step": "fcst", "t_start": 0.0,
                               "wall_s": 1.0, "bytes_archived": 0}])
    table = keep_up_table(summary)
    assert table["finished_before_next"].tolist() == [False, True, pd.NA, True, pd.NA]
    late = arm_keep_up(table, "a")
    assert late["archive_cycle_s"] == "10.00 10.00 5.00" and late["archive_keeps_up"].startswith("no: 2026010100 had not finished")
    assert late["archive_MiB_per_s"] == pytest.approx(30 / 25)
    assert arm_keep_up(table, "b")["archive_keeps_up"] == "yes: each of 1 finished before the next cycle's began"
    lines = keep_up_markdown(pd.DataFrame([{"arm": "a", **late}]))
    [row] = markdown_rows("\n".join(lines))[2:]  # after the header and its rule
    assert row[:4] == ("a", "10.00 10.00 5.00", "10.0", "1.2") and row[4].startswith("no: 2026010100")
    assert keep_up_table(summary[summary["step"] == "fcst"]).empty


def test_the_capacity_plan_adds_the_archive_s_bytes_per_cycle_and_the_bandwidth_to_keep_up(default_config):
    import pandas as pd

    from cycleio.report.scaling import archive_bytes, capacity_plan, plan_lines
    from cycleio.workflow.catalog import inventory_rows

    _, study = load_study(archive_config(default_config, resolution="C768"))
    arm = study.arms["lustre"]
    inventory = pd.DataFrame(inventory_rows(arm, study.cycles[:2]))
    expected = sum(size for members in __import__("cycleio.surrogates.archive_lists", fromlist=["x"]).expected_members(
        study.cycles[1], arm).values() for _, size in members)
    assert archive_bytes(inventory) == expected > 100 * 2**30  # C768: the cycle's tarballs hold over 100 GiB
    fits = pd.DataFrame([{"tier": "lustre", "tier_kind": "lustre", "pattern": "easy", "operation": "write",
                          "slope_MiB_per_s_per_task": 500.0, "plateau_MiB_per_s": 1000.0, "knee_tasks": 2.0,
                          "plateau_reached": True, "rmse_MiB_per_s": 1.0, "relative_error": 0.01, "n_points": 4,
                          "nodes_measured": 1, "tasks_measured": "1 2"}])
    plan = capacity_plan(inventory, fits, resolution="C768", interval_hours=6, io_budget_fraction=0.1, archive=True)
    row = plan[plan["step"] == "archive"].iloc[0]
    assert row["budget_s"] == 6 * 3600 and row["needed_MiB_per_s"] == pytest.approx(expected / 2**20 / 21600)
    assert plan[plan["step"] == "cycle"]["budget_s"].iloc[0] == pytest.approx(2160)
    assert any("the archive takes" in line and "MiB/s of writes" in line for line in plan_lines(plan))
    assert "archive" not in set(capacity_plan(inventory, fits, resolution="C768", interval_hours=6,
                                              io_budget_fraction=0.1)["step"])


# ------------------------------------------------------------------------------------------------ efficiency


def test_the_archive_s_reads_and_writes_get_efficiency_rows_against_their_paired_replays():
    import pandas as pd

    from cycleio.report.benchtables import efficiency_table

    def event(phase, op, tier, mib, seconds, rep=0, t=0.0):
        return {"study": "s", "arm": "a", "cycle": "c1", "step": "arch", "phase": phase, "op": op, "tier": tier,
                "t_start": 1.8e9 + t, "seconds": seconds, "bytes": int(mib * 2**20), "n_files": 1, "nranks": 1,
                "cached_fraction": 1.0 if op == "read" else None, "repetition": rep, "file": "new files"}

    events = pd.DataFrame([event("archive", "read", "lustre", 64, 0.5), event("archive", "write", "tape", 64, 1.0, t=1),
                           event("replay", "read", "lustre", 64, 0.25, 0, 2), event("replay", "read", "lustre", 64, 0.25, 1, 3),
                           event("replay", "write", "tape", 64, 0.5, 0, 4), event("replay", "write", "tape", 64, 0.5, 1, 5)])
    bench = pd.DataFrame(columns=["tier", "benchmark", "pattern", "operation", "tasks", "aggregate", "bw_MiB_per_s",
                                  "tool", "cache_risk"])
    rows = efficiency_table(bench, events).query("reference == 'replay'").set_index("activity")
    assert set(rows.index) == {"archive:read", "archive:write"}
    assert rows.loc["archive:read", "tier"] == "lustre" and rows.loc["archive:write", "tier"] == "tape"
    assert rows.loc["archive:read", "efficiency"] == pytest.approx(0.5)
    assert rows.loc["archive:write", "efficiency"] == pytest.approx(0.5)


@pytest.mark.integration
def test_a_paired_arch_job_replays_its_reads_on_the_persistent_tier_and_its_writes_on_the_archive_tier(tmp_path):
    from conftest import require_tool

    from cycleio.benchmarks.paired import PairedReplay

    require_tool("fio", "the paired replay runs fio")
    settings = arm_with_archive(tmp_path, tarballs=["gdas_restarta"])
    lay_cycle(settings, FULL)
    replay = PairedReplay(repetitions=2, max_files=10, min_bytes=0, min_seconds=0)
    run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json", replay=replay)
    import json

    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    replays = [(r["op"], r["tier"]) for r in records if r["phase"] == "replay" and r["op"] != "wall"]
    assert replays == [("read", "lustre"), ("read", "lustre"), ("write", "archive"), ("write", "archive")]
    assert not list((tmp_path / "archive" / "t" / "lustre").glob(".replay.*"))
    assert not list((tmp_path / "lustre" / "t" / "lustre").glob(".replay.*"))


# ------------------------------------------------------------------------------------------------ critical path


def test_the_critical_path_goes_back_from_the_cycle_s_last_step_through_the_dependency_that_finished_last():
    import pandas as pd

    from cycleio.report.critical import arm_critical_sentence, critical_path

    def job(cycle, step, t, wall, io=0.5, staging=0.0, archive=0.0):
        return {"study": "s", "arm": "a", "cycle": cycle, "step": step, "t_start": t, "wall_s": wall, "io_s": io,
                "staging_s": staging, "archive_s": archive}

    summary = pd.DataFrame([job("2026010100", "fcst", 0, 5), job("2026010100", "post", 5, 1),
                            job("2026010100", "arch", 6, 2, archive=2.0),
                            job("2026010106", "prep", 8, 1), job("2026010106", "anal", 9.5, 2),
                            job("2026010106", "fcst", 12, 4, staging=1.0), job("2026010106", "post", 16, 1),
                            job("2026010106", "arch", 17, 3, archive=3.0), job("2026010106", "cleanup", 20, 0.1)])
    path = critical_path(summary)
    full = path[path["cycle"] == "2026010106"]
    assert full["step"].tolist() == ["prep", "anal", "fcst", "post"]
    assert full["waited_s"].tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0])
    assert path[path["cycle"] == "2026010100"]["step"].tolist() == ["fcst", "post"]
    sentence = arm_critical_sentence(summary, path, "a")
    assert sentence.startswith("critical path of cycle 2026010106: prep 1.00 s -> anal 2.00 s -> fcst 4.00 s -> post 1.00 s")
    assert "staging 1.00 s, archive 0.00 s on it, 1.00 s waiting between its jobs" in sentence
    assert sentence.endswith("; off it: arch 3.00 s")


def test_the_summary_compares_the_fcst_jobs_that_ran_beside_an_archive_with_those_that_did_not():
    import pandas as pd

    from cycleio.report.archive import beside_archive, beside_sentence

    def job(step, t, wall, io, cycle="2026010106"):
        return {"study": "s", "arm": "a", "cycle": cycle, "step": step, "t_start": t, "wall_s": wall, "io_s": io}

    def frame(*jobs):  # the arm's half cycle first: its forecast follows no archive and is never compared
        return pd.DataFrame([job("fcst", -100, 9, 9, cycle="2026010100"), *jobs])

    overlapping = frame(job("arch", 10, 5, 5), job("fcst", 12, 4, 2), job("fcst", 30, 2, 1), job("fcst", 40, 2, 1))
    beside = beside_archive(overlapping)
    assert (beside["with_archive_jobs"], beside["without_archive_jobs"]) == (1, 2)
    assert beside["overlap_s"] == 3.0  # the archive ran 12..15 of the fcst's 12..16
    assert beside_sentence(beside) == ("fcst with an archive job running beside it: 1 job, 4.00 s wall and 2.00 s of "
                                       "I/O on average, an archive running for 3.00 s of each; without one: 2 jobs, "
                                       "2.00 s (sd 0.00, 2.00 to 2.00) and 1.00 s. Beside an archive: +2.00 s (+100 %) "
                                       "wall, too few jobs for a standard error. Jobs that ran beside one: fcst 1.")
    # two archives over one fcst count once; with two jobs a side, the difference gets a standard error
    two = frame(job("arch", 10, 3, 1), job("arch", 12, 3, 1), job("fcst", 11, 6, 2), job("fcst", 20, 4, 2),
                job("fcst", 30, 2, 1), job("fcst", 40, 3, 1))
    beside = beside_archive(two)
    assert beside["overlap_s"] == 4.0  # archives over 10..15 cover 11..15 of the fcst, not 8 s; the others ran alone
    assert (beside["with_archive_jobs"], beside["without_archive_jobs"]) == (1, 3)
    slow = frame(job("arch", 0, 100, 1), job("fcst", 1, 10, 2), job("fcst", 12, 11, 2),
                 job("fcst", 200, 5, 1), job("fcst", 210, 6, 1))
    beside = beside_archive(slow)
    assert beside["diff_s"] == 5.0 and round(beside["diff_se_s"], 3) == 0.707 and beside["diff_sigmas"] > 7
    assert beside_sentence(beside).endswith("Beside an archive: +5.00 s (+91 %) wall, 7.1 standard errors (0.71 s): "
                                            "more than noise. Jobs that ran beside one: fcst 2.")
    assert "within noise." in beside_sentence(beside, noise_sigmas=10)
    serial = frame(job("arch", 10, 5, 5), job("fcst", 15, 4, 2))  # it starts as the archive ends
    assert beside_sentence(beside_archive(serial)).endswith("(no job ran beside one: the default profile's io_lock=1 "
                                                            "runs one job at a time).")
    prep = pd.concat([serial, pd.DataFrame([job("prep", 11, 1, 1)])])
    assert beside_sentence(beside_archive(prep)).endswith("beside it (jobs that did run beside one: prep 1).")
    assert beside_archive(serial[serial["step"] == "fcst"]) == {}
    every = frame(job("arch", 10, 5, 5), job("fcst", 12, 4, 2), job("fcst", 14, 2, 1))
    assert beside_sentence(beside_archive(every)) == (
        "Every fcst job ran while an archive job ran (2 jobs, 3.00 s wall (sd 1.41, 2.00 to 4.00) on average, an "
        "archive running for 2.00 s of each): there is no fcst without one here to compare with; a run of the same "
        "study with the archive between the jobs is (cycleio compare, docs/archive.md). Jobs that ran beside one: "
        "fcst 2.")
    # the arm's first cycle (the half cycle) follows no archive: its forecast is left out of the comparison
    assert beside_archive(overlapping.assign(t_start=overlapping["t_start"].where(overlapping["t_start"] > 0, 11)))[
        "with_archive_jobs"] == 1  # even when the half cycle's forecast ran beside it


def test_the_beside_study_lays_over_the_archive_study_one_arm_at_c48_with_archive_on_and_no_paired_replay():
    """config/studies/archive-beside.yaml (docs/archive.md, "Beside the next cycle"): the same work run with the
    arch job beside the next cycle's jobs and without; the second run's study name from --config."""
    from cycleio.cli import load_config_files

    files = [str(REPO / "config" / name) for name in ("config.yaml", "studies/archive.yaml", "studies/archive-beside.yaml")]
    _, study = load_config_files(files)
    assert study.name == "archive-beside" and list(study.arms) == ["lustre"] and len(study.cycles) == 7
    arm = study.arms["lustre"]
    assert arm.resolution == "C48" and arm.levels == 127 and arm.archive and not arm.paired_cycles
    assert arm.forecast.members == 0  # archive.yaml's ensemble left out, as measured
    assert load_config_files(files, "--config study=archive-alone")[1].name == "archive-alone"
