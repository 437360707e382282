"""A tier opened where the job runs (storage.tiers): the study's folder claimed, a scratch folder in /tmp or /dev/shm
this user's alone, the write probe, the file system found. Expanding the tier's path as the config names it is
test_tierspec's."""

import os
import pwd
import stat
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import psutil
import pytest
from conftest import cannot_run_here, tmpfs

from cycleio.config.tierspec import Tier, TierError, current_user
from cycleio.storage.tiers import (OWNER_FILE, check_writable, claim_study_folder, filesystem_type, open_tier,
                                   private_folders, probe_tier, unwritable_reason)


def test_a_study_folder_on_a_shared_path_is_the_first_checkouts(tmp_path, monkeypatch):
    """A path without {workdir} (a user's /scratch/me) is claimed by the first checkout that runs there;
    another checkout is refused, naming both, and the claim lets its owner run again."""
    shared = tmp_path / "scratch"
    tier = Tier("node_local", "node_local", str(shared), persistent=False, shared=False)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "a")
    assert open_tier(tier, "smoke") == shared
    assert (shared / "smoke" / OWNER_FILE).read_text() == f"{tmp_path / 'a'}\n"
    claim_study_folder("node_local", shared, "smoke")  # the owner again
    claim_study_folder("node_local", shared, "other")  # another study's folder is another claim
    monkeypatch.chdir(tmp_path / "b")
    with pytest.raises(TierError) as refused:
        open_tier(tier, "smoke")
    assert str(refused.value).startswith(
        f"tier 'node_local': {shared / 'smoke'} holds study 'smoke' of another checkout, {tmp_path / 'a'} "
        f"(named in {shared / 'smoke' / OWNER_FILE}), and this checkout is {tmp_path / 'b'};")
    assert "Put {workdir} in the tier's path" in str(refused.value)
    assert sorted(p.name for p in (shared / "smoke").iterdir()) == [OWNER_FILE]  # no temporary left


def test_of_two_checkouts_claiming_at_once_exactly_one_gets_the_folder(tmp_path):
    shared = tmp_path / "scratch"
    script = ("import sys; from cycleio.config.tierspec import TierError\n"
              "from cycleio.storage.tiers import claim_study_folder\n"
              "try: claim_study_folder('t', __import__('pathlib').Path(sys.argv[1]), 's')\n"
              "except TierError: sys.exit(3)\n")
    runs = []
    for i in range(6):
        (tmp_path / f"c{i}").mkdir()
        runs.append(subprocess.Popen([sys.executable, "-c", script, str(shared)], cwd=tmp_path / f"c{i}",
                                     env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}))
    codes = [run.wait() for run in runs]
    assert sorted(codes) == [0] + [3] * 5
    winner = codes.index(0)
    assert (shared / "s" / OWNER_FILE).read_text().strip() == str(tmp_path / f"c{winner}")


def test_unwritable_tier_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(TierError, match=r"tier 'node_local': path .*a-file/sub.* is not writable"):
        check_writable("node_local", blocker / "sub")


@pytest.mark.parametrize("root, fs_type", [("/proc", "proc"), ("/sys", "sysfs")])
def test_a_tier_under_a_kernel_filesystem_cannot_be_written(root, fs_type):
    """/proc and sysfs are mounted read-write and root passes access(): only creating a file shows it."""
    if filesystem_type(root) != fs_type:
        cannot_run_here(f"{root} is not {fs_type} here")
    reason = unwritable_reason(Path(root) / "cycleio-x" / "scratch")
    assert reason and f"a file cannot be created in {root} ({fs_type}" in reason


def test_a_writable_folder_passes_and_keeps_no_probe(tmp_path):
    assert unwritable_reason(tmp_path / "not" / "yet") is None
    assert list(tmp_path.iterdir()) == []
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert unwritable_reason(blocker / "sub") == f"{blocker} is not a folder"


def test_a_read_only_bind_mount_cannot_be_written(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True, text=True)
    if mounted.returncode != 0:
        cannot_run_here(f"cannot bind-mount here ({mounted.stderr.strip()}); needs root")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True, capture_output=True)
        reason = unwritable_reason(target / "scratch")
        assert reason and "(read-only" in reason and "Read-only file system" in reason
        assert unwritable_reason(source / "scratch") is None
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def test_a_folder_without_write_permission_cannot_be_written():
    """Judged as the user who runs the study: root (who writes anywhere) drops to nobody in a child."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="cycleio-perm-"))
    try:
        base.chmod(0o755)
        locked = base / "locked"
        locked.mkdir(mode=0o555)
        locked.chmod(0o555)
        if os.geteuid() != 0:
            reason = unwritable_reason(locked / "scratch")
        else:
            read, write = os.pipe()
            child = os.fork()
            if child == 0:  # pragma: no cover (the child)
                os.close(read)
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    os.write(write, (unwritable_reason(locked / "scratch") or "").encode())
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read) as pipe:
                reason = pipe.read()
            os.waitpid(child, 0)
        assert "a file cannot be created in" in reason and "Permission denied" in reason
        assert list(locked.iterdir()) == []
    finally:
        (base / "locked").chmod(0o755)
        import shutil

        shutil.rmtree(base)


def test_filesystem_type_of_known_mounts(tmp_path):
    assert filesystem_type("/dev/shm") == "tmpfs"
    assert filesystem_type(tmp_path / "does" / "not" / "exist") != "unknown"


def test_the_longest_mount_point_holding_a_path_wins(tmp_path, monkeypatch):
    """From the mount table: the longest mount point that holds the path (a sibling sharing its prefix
    does not), and of two at the same point the later, mounted over the first."""
    here = tmp_path / "a b" / "c"
    here.mkdir(parents=True)
    part = namedtuple("sdiskpart", "device mountpoint fstype opts")
    table = [part("/dev/sda1", "/", "ext4", "rw"), part("tmpfs", str(tmp_path / "a"), "tmpfs", "rw"),
             part("srv:/x", str(tmp_path / "a b"), "nfs", "ro"), part("tmpfs", str(tmp_path / "a b"), "tmpfs", "rw,noexec")]
    monkeypatch.setattr(psutil, "disk_partitions", lambda all=False: table)
    assert filesystem_type(here / "not" / "there") == "tmpfs"
    probe = probe_tier(here)
    assert (probe["mount_point"], probe["fs_type"], probe["mount_options"]) == (str(tmp_path / "a b"), "tmpfs", "rw,noexec")
    assert filesystem_type(tmp_path / "ab") == "ext4"

    def unreadable(all=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(psutil, "disk_partitions", unreadable)
    assert filesystem_type(here) == "unknown"


def test_a_mount_point_with_a_space_in_its_name(tmp_path):
    """The mount table writes a space as \\040: the tier's probe names the mount point as it is."""
    with tmpfs(tmp_path / "with space", "1m") as mounted:
        assert filesystem_type(mounted / "sub") == "tmpfs"
        assert probe_tier(mounted)["mount_point"] == str(mounted)


def shared_tmp(tmp_path: Path) -> Path:
    """A folder every user can write, as /tmp and /dev/shm are (mode 1777)."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def scratch_tier(path: Path) -> Tier:
    return Tier("shm", "memory", str(path / "cycleio-{user}" / "job"), persistent=False, shared=False)


def test_a_per_user_folder_in_a_shared_folder_is_made_private(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shared = shared_tmp(tmp_path)
    base = open_tier(scratch_tier(shared), "smoke")
    mine = shared / f"cycleio-{current_user()}"
    assert base == mine / "job" and (base / "smoke" / OWNER_FILE).is_file()
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    open_tier(scratch_tier(shared), "smoke")  # this user's own folder again
    private_folders("shm", mine / "job")  # a check only: nothing to make


def test_a_per_user_folder_another_user_owns_is_refused(tmp_path, monkeypatch):
    """Tests run as root: the folder given to nobody is another user's (issue 41: a second user made
    /dev/shm/cycleio-root first, and the study ran inside it)."""
    if os.geteuid() != 0:
        cannot_run_here("giving a folder to another user needs root")
    monkeypatch.chdir(tmp_path)
    shared = shared_tmp(tmp_path)
    theirs = shared / f"cycleio-{current_user()}"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, pwd.getpwnam("nobody").pw_uid, -1)
    with pytest.raises(TierError) as refused:
        open_tier(scratch_tier(shared), "smoke")
    message = str(refused.value)
    assert message.startswith(f"tier 'shm': {theirs} is owned by nobody (mode drwx------ (0700)), inside {shared}, "
                              "which other users can write (mode 1777)")
    assert f"have nobody or root remove it (cycleio then makes it with mode 0700)" in message
    assert message.endswith("or set tiers.shm.path to a folder of your own")
    assert list(theirs.iterdir()) == []  # nothing made inside it


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_a_per_user_folder_others_can_write_is_refused(tmp_path, mode):
    shared = shared_tmp(tmp_path)
    mine = shared / f"cycleio-{current_user()}"
    mine.mkdir()
    mine.chmod(mode)
    with pytest.raises(TierError) as refused:
        private_folders("node_local", mine / "job", create=True)
    message = str(refused.value)
    assert message.startswith(f"tier 'node_local': {mine} is writable by other users (owner {current_user()}, "
                              f"mode {stat.filemode(mine.stat().st_mode)} ({mode:04o}))")
    assert f"run chmod go-w {mine}, or remove it" in message
    assert not (mine / "job").exists()


def test_a_per_user_folder_that_is_a_symlink_is_refused(tmp_path):
    shared = shared_tmp(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    link = shared / f"cycleio-{current_user()}"
    link.symlink_to(elsewhere)
    with pytest.raises(TierError, match=rf"^tier 'shm': {link} is a symlink to {elsewhere}, owned by "
                                        rf"{current_user()}, inside {shared},.* remove the symlink"):
        private_folders("shm", link / "job")
    assert list(elsewhere.iterdir()) == []


def test_folders_outside_a_shared_folder_are_left_as_they_are(tmp_path):
    """A site's scratch below a folder only its owner writes: made as mkdir -p makes them, not judged."""
    open_folder = tmp_path / "site"
    open_folder.mkdir()
    open_folder.chmod(0o755)
    inner = open_folder / "group"
    inner.mkdir()
    inner.chmod(0o775)
    private_folders("scratch", inner / "a" / "b", create=True)
    assert (inner / "a" / "b").is_dir()


def test_a_persistent_tier_is_not_judged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shared = shared_tmp(tmp_path)
    (shared / "project").mkdir()
    (shared / "project").chmod(0o2775)  # a group's folder on a shared file system
    tier = Tier("lustre", "lustre", str(shared / "project"), persistent=True, shared=True)
    assert open_tier(tier, "smoke") == shared / "project"
