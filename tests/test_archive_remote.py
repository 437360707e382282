"""The archive job into an archive this machine cannot open as a file system (archive.remote: HPSS through htar and
hsi): the command lines, htar's listing parsed and checked, the config's templates refused by key, and the job end
to end with stand-ins for htar and hsi (both are in no registry): small scripts, named so, that write a GNU tar into
a folder the job is told is remote and print its listing in htar's format."""

from __future__ import annotations

import json
import tarfile

import pytest
from conftest import with_changes
from test_archive import FULL, archive_config, arm_with_archive, lay_cycle

from cycleio.config.keys import ConfigError
from cycleio.storage import remotearchive as remote
from cycleio.storage.archive import ArchiveError, MemberChanged, TarballIndex
from cycleio.surrogates.archive_lists import tarball_members
from cycleio.runner.persistentjobs import run_archive
from cycleio.workflow.study import load_study

# ``htar -tvf`` prints one line per member (mode, owner/group, bytes, date, time, name), its consistency file
# HTAR_CF_CHK_* last, then two lines of its own; a directory member starts with d. Written here in that format.
HTAR_LISTING = """\
HTAR: drwxr-xr-x  someone/emc              0 2026-01-01 06:40  gdas.20260101/06/model/
HTAR: -rw-r--r--  someone/emc    15779010324 2026-01-01 06:40  gdas.20260101/06/model/atmos/history/gdas.t06z.atmf006.nc
HTAR: -rw-r--r--  someone/emc           1000 2026-01-01 06:41  gdas.20260101/06/analysis/atmos/gdas.t06z.gsistat
HTAR: -rw-r--r--  someone/emc              0 2026-01-01 06:41  gdas.20260101/06/empty file
HTAR: -rw-------  someone/emc            256 2026-01-01 06:42  /tmp/HTAR_CF_CHK_17953_1767250920
HTAR: Listing complete for /NCEPDEV/emc-global/1year/someone/t/lustre/2026010106/.gdas.tar.tmp, 4 files 5 total objects
HTAR: HTAR SUCCESSFUL
"""
ARCHIVED = [("gdas.20260101/06/model/atmos/history/gdas.t06z.atmf006.nc", 15779010324),
            ("gdas.20260101/06/analysis/atmos/gdas.t06z.gsistat", 1000), ("gdas.20260101/06/empty file", 0)]


def test_htar_s_listing_gives_the_regular_members_names_and_sizes_without_its_consistency_file():
    listed = remote.parse_listing(HTAR_LISTING)
    assert [(m.name, m.bytes) for m in listed] == ARCHIVED
    gnu = "-rw-r--r-- someone/emc      1000 2026-01-01 06:41 g/a\n-rw-r--r-- someone/emc 7 2026-01-01 06:41 g/b c\n"
    assert [(m.name, m.bytes) for m in remote.parse_listing(gnu)] == [("g/a", 1000), ("g/b c", 7)]  # GNU tar -tvf


def test_a_listing_missing_a_member_or_with_another_size_or_an_extra_member_is_refused_by_name():
    listed = remote.parse_listing(HTAR_LISTING)
    remote.check_listing("gdas.tar", listed, ARCHIVED)
    with pytest.raises(ArchiveError, match=r"gdas.tar: member g/x is missing from the archive's listing \(3 members "
                                           r"listed, 4 archived\); not renamed"):
        remote.check_listing("gdas.tar", listed, ARCHIVED + [("g/x", 1)])
    with pytest.raises(ArchiveError, match=r"gdas.tar: member .*gsistat is listed with 1000 bytes, 999 were archived"):
        remote.check_listing("gdas.tar", listed, [ARCHIVED[0], (ARCHIVED[1][0], 999), ARCHIVED[2]])
    with pytest.raises(ArchiveError, match=r"gdas.tar: the archive's listing has 1 members that were not archived, "
                                           r"e.g. gdas.20260101/06/empty file"):
        remote.check_listing("gdas.tar", listed, ARCHIVED[:2])


def test_the_remote_landing_s_command_lines_are_built_from_their_templates():
    hpss = "/NCEPDEV/emc-global/1year/some one/t/lustre/2026010106"
    assert remote.template_argv("command", "htar -P -cvf {tarball} -L {list}", tarball=f"{hpss}/.gdas.tar.tmp",
                                list="/tmp/l") == ["htar", "-P", "-cvf", f"{hpss}/.gdas.tar.tmp", "-L", "/tmp/l"]
    assert remote.template_argv("list_command", "htar -tvf {tarball}", tarball=f"{hpss}/.gdas.tar.tmp") == [
        "htar", "-tvf", f"{hpss}/.gdas.tar.tmp"]
    assert remote.template_argv("rename_command", "hsi mv {source} {target}", source="/a/.x.tmp", target="/a/x") == [
        "hsi", "mv", "/a/.x.tmp", "/a/x"]
    with pytest.raises(ValueError, match=r"archive.list_command 'htar -tvf' must name \{tarball\}"):
        remote.template_argv("list_command", "htar -tvf", tarball="t")
    with pytest.raises(ValueError, match=r"archive.rename_command 'hsi mv \{src\} \{target\}' must name \{source\}"):
        remote.template_argv("rename_command", "hsi mv {src} {target}", source="s", target="t")


@pytest.mark.parametrize("changes, message", [
    ({"archive__list_command": "htar -tvf"}, "config key 'archive.list_command': 'htar -tvf' must name {tarball}"),
    ({"archive__rename_command": "hsi mv {src} {target}"},
     "config key 'archive.rename_command': 'hsi mv {src} {target}' must name {source} and {target}"),
    ({"archive__list_command": "htar -tvf {tarball} {list}"},
     "config key 'archive.list_command': 'htar -tvf {tarball} {list}' names {list}, which it does not know"),
    ({"archive__command": "htar -cvf {tarball} -L {list} {cycle}"},
     "config key 'archive.command': 'htar -cvf {tarball} -L {list} {cycle}' names {cycle}, which it does not know"),
    ({"archive__remote": True}, "config key 'archive.remote': true, but archive.command is empty"),
])
def test_a_remote_archive_s_bad_templates_are_refused_before_any_job_naming_the_key(default_config, changes, message):
    with pytest.raises(ConfigError) as refused:
        load_study(archive_config(default_config, **changes))
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_remote_archive_tier_is_not_checked_here_and_its_keys_reach_the_jobs(default_config):
    from cycleio.workflow.preflight import check_study

    config = archive_config(default_config, archive__remote=True, archive__command="htar -P -cvf {tarball} -L {list}")
    config["tiers"]["archive"]["path"] = "/NCEPDEV/emc-global/1year/nobody/cycleio"  # no such folder here
    _, study = load_study(with_changes(config, study="remote"))
    arm = study.arms["lustre"]
    assert arm.archive["remote"] and arm.archive["list_command"] == "htar -tvf {tarball}"
    assert arm.archive["rename_command"] == "hsi mv {source} {target}" and arm.archive["index_suffix"] == ".idx"
    notes = check_study(study)
    assert "tier 'archive' is a remote archive (archive.remote): not checked here, its commands write it" in notes


# ------------------------------------------------------------------------------------------------ the job, end to end

# Stand-ins, for these tests only: htar and hsi are in no registry. The fake htar writes a GNU tar (and an index
# file beside it, as htar writes NAME.idx) into a folder the job is told is remote, and lists it in htar's format,
# leaving out the member named by FAKE_HTAR_DROP; the fake hsi moves a file, or fails to move one whose target ends
# with FAKE_HSI_FAIL.
FAKE_HTAR = r"""#!/bin/sh
action=""; tarball=""; list=""
while [ $# -gt 0 ]; do
  case "$1" in
    -P) shift ;;
    -cvf) action=c; tarball="$2"; shift 2 ;;
    -tvf) action=t; tarball="$2"; shift 2 ;;
    -L) list="$2"; shift 2 ;;
    *) echo "HTAR: unknown option $1"; exit 64 ;;
  esac
done
if [ "$action" = c ]; then
  mkdir -p "$(dirname "$tarball")" || exit 1
  tar -cf "$tarball" -T "$list" || { echo "HTAR: HTAR FAILED"; exit 70; }
  tar -tf "$tarball" > "$tarball.idx"
  sed 's/^/HTAR: a   /' "$list"
  echo "HTAR: HTAR SUCCESSFUL"
  exit 0
fi
[ -f "$tarball.idx" ] || { echo "HTAR: no such file $tarball.idx"; echo "HTAR: HTAR FAILED"; exit 72; }
tar -tvf "$tarball" | grep -v -F "${FAKE_HTAR_DROP:-/nothing/}" | sed 's/^/HTAR: /'
echo "HTAR: -rw-------  someone/emc        256 2026-01-01 06:42  /tmp/HTAR_CF_CHK_1_2"
echo "HTAR: Listing complete for $tarball"
echo "HTAR: HTAR SUCCESSFUL"
"""
FAKE_HSI = r"""#!/bin/sh
[ "$1" = mv ] || { echo "*** hsi: unknown command $1"; exit 64; }
case "$3" in
  *"${FAKE_HSI_FAIL:-/nothing/}") echo "*** hsi: mv $2 $3: HPSS_EIO (a stand-in's failure)"; exit 72 ;;
esac
mv "$2" "$3"
"""


@pytest.fixture
def stand_ins(tmp_path) -> dict:
    folder = tmp_path / "stand-ins"
    folder.mkdir()
    for name, text in (("htar", FAKE_HTAR), ("hsi", FAKE_HSI)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return {"remote": True, "command": f"{folder}/htar -P -cvf {{tarball}} -L {{list}}",
            "list_command": f"{folder}/htar -tvf {{tarball}}",
            "rename_command": f"{folder}/hsi mv {{source}} {{target}}", "index_suffix": ".idx"}


def test_a_remote_arch_job_lands_each_tarball_by_command_listing_and_rename_with_its_index_in_the_results(tmp_path,
                                                                                                         stand_ins):
    settings = arm_with_archive(tmp_path, tarballs=["gdas", "gdas_restarta"], **stand_ins)
    lay_cycle(settings, FULL)
    results = tmp_path / "results"
    results.mkdir()
    manifest = run_archive(settings, FULL, results / "arch.records.jsonl", results / "arch.manifest.json")
    folder = tmp_path / "archive" / "t" / "lustre" / FULL  # "remote": the job itself never opened it
    assert sorted(p.name for p in folder.iterdir()) == ["gdas.tar", "gdas.tar.idx", "gdas_restarta.tar",
                                                        "gdas_restarta.tar.idx"]  # no temporary left
    specs = tarball_members(FULL, settings.start, settings.forecast, ["gdas"])["gdas"]
    with tarfile.open(folder / "gdas.tar") as tar:
        assert tar.getnames() == [spec.path for spec in specs]
    entry = manifest["tarballs"][0]
    assert (entry["tarball"], entry["members"], entry["verified"], entry["tool"]) == ("gdas.tar", 36, "listing", "htar")
    assert entry["remote_path"] == str(folder / "gdas.tar") and entry["bytes"] == 36 * 1000
    index = TarballIndex.read(results / entry["index"])  # in the study's results, not beside the tarball
    assert entry["index"] == "arch.gdas.tar.index.json" and index.verified == "listing" and index.bytes is None
    assert [(m.name, m.bytes) for m in index.members] == [(spec.path, 1000) for spec in specs]
    assert {(m.offset, m.header_offset, m.xxh3_64) for m in index.members} == {(None, None, None)}
    records = [json.loads(line) for line in (results / "arch.records.jsonl").read_text().splitlines()]
    assert [r["op"] for r in records] == ["write", "meta", "sync"] * 2
    assert {r["tier"] for r in records} == {"archive"} and {r["fs_type"] for r in records} == {"remote"}
    assert manifest["provenance"]["tiers"]["archive"]["remote"] is True
    assert not list(results.glob(".*"))  # the member list is removed


def test_a_listing_that_lacks_a_member_leaves_nothing_under_the_final_name_and_the_rerun_overwrites_the_temporary(
        tmp_path, stand_ins, monkeypatch):
    settings = arm_with_archive(tmp_path, tarballs=["gdas"], **stand_ins)
    lay_cycle(settings, FULL)
    dropped = tarball_members(FULL, settings.start, settings.forecast, ["gdas"])["gdas"][5].path
    monkeypatch.setenv("FAKE_HTAR_DROP", dropped)
    folder = tmp_path / "archive" / "t" / "lustre" / FULL
    with pytest.raises(ArchiveError, match=rf"gdas.tar: member {dropped} is missing from the archive's listing "
                                           r"\(35 members listed, 36 archived\); not renamed to its final name"):
        run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json")
    assert sorted(p.name for p in folder.iterdir()) == [".gdas.tar.tmp", ".gdas.tar.tmp.idx"]
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "arch.gdas.tar.index.json").exists()
    monkeypatch.delenv("FAKE_HTAR_DROP")
    run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json", attempt=2)
    assert sorted(p.name for p in folder.iterdir()) == ["gdas.tar", "gdas.tar.idx"]


def test_a_failing_rename_or_archive_command_says_which_command_with_its_output_s_tail(tmp_path, stand_ins,
                                                                                       monkeypatch):
    settings = arm_with_archive(tmp_path, tarballs=["gdas"], **stand_ins)
    lay_cycle(settings, FULL)
    folder = tmp_path / "archive" / "t" / "lustre" / FULL
    monkeypatch.setenv("FAKE_HSI_FAIL", ".idx")
    with pytest.raises(ArchiveError, match=r"gdas.tar: the rename command \(.*hsi mv .*\.gdas\.tar\.tmp\.idx .*\) "
                                           r"exited with 72; not renamed to its final name; its output ends: \*+ hsi"):
        run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json")
    assert sorted(p.name for p in folder.iterdir()) == [".gdas.tar.tmp", ".gdas.tar.tmp.idx"]
    monkeypatch.setenv("FAKE_HSI_FAIL", "/gdas.tar")  # the tarball's rename: htar's index is moved back
    with pytest.raises(ArchiveError, match=r"gdas.tar: the rename command \(.*hsi mv .*\.gdas\.tar\.tmp .*/gdas\.tar\) "
                                           r"exited with 72"):
        run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json", attempt=2)
    assert sorted(p.name for p in folder.iterdir()) == [".gdas.tar.tmp", ".gdas.tar.tmp.idx"]
    monkeypatch.delenv("FAKE_HSI_FAIL")
    bad = arm_with_archive(tmp_path / "b", tarballs=["gdas"], **{**stand_ins, "command": stand_ins["command"].replace(
        " -P ", " -P -Q ")})
    lay_cycle(bad, FULL)
    with pytest.raises(ArchiveError, match=r"gdas.tar: the archive command \(.*htar -P -Q -cvf .*\) exited with 64; "
                                           r"not renamed to its final name; its output ends: HTAR: unknown option -Q"):
        run_archive(bad, FULL, tmp_path / "b.jsonl", tmp_path / "b.json")


def test_a_remote_archive_whose_programs_are_not_here_fails_the_job_and_never_falls_back_to_a_folder(tmp_path):
    settings = arm_with_archive(tmp_path, tarballs=["gdas"], remote=True, index_suffix=".idx",
                                command="htar-not-here -cvf {tarball} -L {list}",
                                list_command="htar-not-here -tvf {tarball}",
                                rename_command="hsi-not-here mv {source} {target}")
    lay_cycle(settings, FULL)
    with pytest.raises(ArchiveError, match=r"archive.remote is true, but these programs are not found here: "
                                           r"archive.command: htar-not-here; archive.list_command: htar-not-here; "
                                           r"archive.rename_command: hsi-not-here"):
        run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json")
    assert not (tmp_path / "archive").exists()


def test_a_member_whose_size_differs_from_what_its_step_landed_is_not_archived_remotely(tmp_path, stand_ins):
    settings = arm_with_archive(tmp_path, tarballs=["gdas"], **stand_ins)
    lay_cycle(settings, FULL)
    specs = tarball_members(FULL, settings.start, settings.forecast, ["gdas"])["gdas"]
    manifest = tmp_path / "fcst.manifest.json"
    manifest.write_text(json.dumps({"outputs": [{"path": specs[2].path, "bytes": 999, "xxh3_64": "0" * 16}]}))
    with pytest.raises(MemberChanged, match=rf"gdas.tar: member {specs[2].path} is 1000 bytes, but its step wrote 999"):
        run_archive(settings, FULL, tmp_path / "r.jsonl", tmp_path / "m.json", manifests=[manifest])
    assert not (tmp_path / "archive").exists()  # checked before the command ran
