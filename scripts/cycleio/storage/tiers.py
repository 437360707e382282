"""Storage tiers where a job runs: opened, probed, striped, the study's folder claimed.

A tier (config.tierspec.Tier) is a named location with a kind, a path template and a few properties.
Its path may hold environment variables and the placeholders ``{user}``, ``{study}`` and ``{workdir}``
(8 hex digits naming the working directory the study runs from), so node-local and memory tiers get
a per-user, per-study subfolder, and two checkouts running a study of the same name on one node
never share (and delete) each other's scratch. A path without ``{workdir}`` may still be shared:
the study's folder on a tier is claimed by the first checkout that runs there (``.cycleio-owner``),
and another checkout is refused. On a scratch tier, a folder of the path inside a folder other users
can write (``/tmp``, ``/dev/shm``) must be this user's alone (:func:`private_folders`). Paths are
expanded where the job runs, since variables such as ``$TMPDIR`` or ``$SLURM_JOB_ID`` differ per job.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import psutil

from ..config.tierspec import Tier, TierError, current_user
from ..process import run_command
from ..records import REPLAY, RecordLog
from ..units import format_bytes
from .pagecache import evict, memory_backed

LFS_TIMEOUT_S = 120  # lfs getstripe/setstripe: metadata calls, seconds when the file system is well
TIER_KINDS = ("lustre", "burst_buffer", "node_local", "memory", "posix", "archive")  # archive: the tarballs' tier

log = logging.getLogger("cycleio")

# The checkout a study's folder on a tier belongs to, written by the first run that uses the folder.
OWNER_FILE = ".cycleio-owner"


def study_folder_owner(base: Path, study: str) -> str | None:
    """The checkout (its real path) that claimed ``<base>/<study>``, or None while none has."""
    try:
        return (base / study / OWNER_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def owner_problem(tier_name: str, base: Path, study: str, owner: str | None) -> str | None:
    """Why this checkout may not use ``<base>/<study>``: another checkout's claim; None if it may."""
    here = os.path.realpath(".")
    if owner is None or owner == here:
        return None
    marker = base / study / OWNER_FILE
    return (f"tier '{tier_name}': {base / study} holds study '{study}' of another checkout, {owner} "
            f"(named in {marker}), and this checkout is {here}; two checkouts must not share a study's folder "
            "(each would delete or overwrite the other's files). Put {workdir} in the tier's path (as the default "
            f"node_local and shm paths do), give this study another name, or delete {marker} once {owner} "
            "no longer needs its files there")


def claim_study_folder(tier_name: str, base: Path, study: str) -> None:
    """Claim ``<base>/<study>`` for this checkout, or raise TierError naming the checkout that has it.

    The claim is a file created in one step (a hard link to a finished temporary), so of two checkouts
    starting at once exactly one gets it. Paths with ``{workdir}`` never meet another checkout's; a
    path without it (``/scratch/me/cycleio``) is the first checkout's.
    """
    folder = base / study
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / OWNER_FILE
    if study_folder_owner(base, study) is None:
        tmp = folder / f".{OWNER_FILE}.tmp-{os.getpid()}"
        tmp.write_text(os.path.realpath(".") + "\n")
        try:
            os.link(tmp, marker)
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links
            with contextlib.suppress(FileExistsError), open(marker, "x") as handle:
                handle.write(tmp.read_text())
        finally:
            tmp.unlink()
    problem = owner_problem(tier_name, base, study, study_folder_owner(base, study))
    if problem:
        raise TierError(problem)


def check_writable(tier_name: str, path: Path) -> None:
    """Create the tier folder if needed and prove a file can be written there."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".cycleio-probe.{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as err:
        raise TierError(f"tier '{tier_name}': path {str(path)!r} is not writable ({err.strerror}) on "
                        f"{filesystem_type(path)}; set tiers.{tier_name}.path to a folder this user can write") from None


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _others_can_write(mode: int) -> bool:
    return bool(mode & (stat.S_IWGRP | stat.S_IWOTH))


def _not_private(tier_name: str, folder: Path, parent: Path, parent_mode: int) -> str | None:
    """Why ``folder``, in a ``parent`` other users can write, is not this user's alone; None if it is."""
    info = os.lstat(folder)
    owner = _owner_name(info.st_uid)
    mode = f"mode {stat.filemode(info.st_mode)} ({stat.S_IMODE(info.st_mode):04o})"
    remake = "cycleio then makes it with mode 0700"
    if stat.S_ISLNK(info.st_mode):
        what = f"is a symlink to {os.readlink(folder)}, owned by {owner}"
        fix = f"remove the symlink ({remake} as a folder)"
    elif not stat.S_ISDIR(info.st_mode):
        what = f"is not a folder (owner {owner}, {mode})"
        fix = f"remove it ({remake})"
    elif info.st_uid not in (os.geteuid(), 0):
        what = f"is owned by {owner} ({mode})"
        fix = f"have {owner} or root remove it ({remake})"
    elif _others_can_write(info.st_mode):
        what = f"is writable by other users (owner {owner}, {mode})"
        fix = f"run chmod go-w {folder}, or remove it ({remake})"
    else:
        return None
    user = current_user()
    owners = user if os.geteuid() == 0 else f"{user} (or root)"
    return (f"tier '{tier_name}': {folder} {what}, inside {parent}, which other users can write (mode "
            f"{stat.S_IMODE(parent_mode):04o}), so they could read, swap or replace the study's scratch files "
            f"there. A folder there must be owned by {owners}, writable by no one else and not a symlink: "
            f"{fix}, or set tiers.{tier_name}.path to a folder of your own")


def private_folders(tier_name: str, path: str | os.PathLike, create: bool = False) -> None:
    """Refuse a scratch path that another user could reach into; ``create``: make its missing folders.

    As OpenSSH and tmux treat their sockets' folders: each folder of ``path`` inside a folder that
    others can write (``/tmp``, ``/dev/shm``, group- or world-writable) must be a real folder, owned by
    this user (or root, who can reach everything anyway), and writable by no one else; cycleio makes
    such folders with mode 0700. Folders elsewhere on the path are left as they are, and made as
    ``mkdir -p`` would. Raises TierError naming the folder, its owner and mode.
    """
    target = Path(os.path.abspath(path))
    current = Path(target.anchor)
    for part in target.parts[1:]:
        parent, current = current, current / part
        parent_mode = os.stat(parent).st_mode
        guarded = _others_can_write(parent_mode)
        if not os.path.lexists(current):
            if not create:
                return
            try:
                os.mkdir(current, 0o700) if guarded else os.mkdir(current)
            except FileExistsError:  # made meanwhile, perhaps by someone else: judged below
                pass
        if guarded:
            problem = _not_private(tier_name, current, parent, parent_mode)
            if problem:
                raise TierError(problem)


def open_tier(tier: Tier, study: str) -> Path:
    """Where a job uses the tier: its path resolved here, this user's alone on a scratch tier (made if
    missing), proven writable, the study's folder claimed."""
    base = tier.resolve(study)
    if not tier.persistent:
        try:
            private_folders(tier.name, base, create=True)
        except OSError:
            pass  # check_writable says what is wrong, with the tier's name
    check_writable(tier.name, base)
    claim_study_folder(tier.name, base, study)
    return base


def nearest_existing(path: str | os.PathLike) -> Path:
    """``path`` or its nearest ancestor that exists (a tier's folder may not exist yet)."""
    target = Path(path)
    while not target.exists():
        target = target.parent
    return target


def free_bytes(path: str | os.PathLike) -> int:
    return shutil.disk_usage(nearest_existing(path)).free


def _mount_of(path: str | os.PathLike) -> tuple[str, str, str]:
    """(mount point, filesystem type, mount options) of the mount holding ``path``."""
    target = os.path.realpath(path)
    while not os.path.exists(target):
        target = os.path.dirname(target)
    best = ("", "unknown", "")
    try:
        partitions = psutil.disk_partitions(all=True)  # the mount table, its escapes (\\040 for a space) decoded
    except OSError:
        return best
    for part in partitions:  # the longest mount point holding target; of equal ones the last, mounted over the rest
        mount = part.mountpoint
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[0]):
            best = (mount, part.fstype, part.opts)
    return best


def filesystem_type(path: str | os.PathLike) -> str:
    """The type of the filesystem holding ``path``, from the longest matching mount point."""
    return _mount_of(path)[1]


def probe_tier(path: str | os.PathLike) -> dict:
    """What a study records about a tier where the job runs: filesystem, mount options, space, striping."""
    mount, fs_type, options = _mount_of(path)
    target = Path(path)
    while not target.exists():
        target = target.parent
    usage = shutil.disk_usage(target)
    probe = {
        "fs_type": fs_type,
        "mount_point": mount,
        "mount_options": options,
        "free_bytes": usage.free,
        "total_bytes": usage.total,
    }
    lfs = shutil.which("lfs")
    if lfs and fs_type == "lustre":
        try:
            result = run_command([lfs, "getstripe", "-d", str(target)], timeout=LFS_TIMEOUT_S, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            probe["lfs_getstripe"] = (result.stdout or result.stderr).strip()
        except subprocess.TimeoutExpired:
            probe["lfs_getstripe"] = f"lfs getstripe did not answer within {LFS_TIMEOUT_S} s"
    return probe


def apply_striping(tier: Tier, folder: Path) -> str:
    """Set the tier's Lustre striping on a folder (new files inherit it); say what was done."""
    if not tier.stripe_count and not tier.stripe_size:
        return ""
    lfs = shutil.which("lfs")
    if lfs is None:
        return f"striping not applied: lfs not found (tier '{tier.name}' asks stripe_count={tier.stripe_count} stripe_size={tier.stripe_size!r})"
    command = [lfs, "setstripe"]
    if tier.stripe_count:
        command += ["-c", str(tier.stripe_count)]
    if tier.stripe_size:
        command += ["-S", tier.stripe_size]
    try:
        result = run_command([*command, str(folder)], timeout=LFS_TIMEOUT_S, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        raise TierError(f"tier '{tier.name}': {' '.join(command)} {folder} did not finish within {LFS_TIMEOUT_S} s "
                        "(is the Lustre client hung?)") from None
    if result.returncode != 0:
        raise TierError(f"tier '{tier.name}': {' '.join(command)} {folder} failed: {result.stderr.strip()}")
    return " ".join(command)


def unwritable_reason(path: Path) -> str | None:
    """Why ``path`` could not be created and written; None if it can.

    Proven by creating and removing a probe file in ``path`` or its nearest existing folder (nothing
    is left behind, so dry runs may ask): mount flags and permission bits miss /proc, sysfs, a
    read-only bind mount and the root user, whom ``access()`` lets write anywhere.
    """
    target = path
    while not target.exists():
        if target.parent == target:
            return "no existing parent folder"
        target = target.parent
    if not target.is_dir():
        return f"{target} is not a folder"
    try:
        handle, probe = tempfile.mkstemp(prefix=".cycleio-probe.", dir=target)
    except OSError as err:
        readonly = " (read-only)" if _read_only(target) else ""
        return (f"a file cannot be created in {target} ({filesystem_type(target)}{readonly}: {err.strerror}, "
                f"as user {current_user()})")
    os.close(handle)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class TierSite:
    """A tier opened where the job runs (:func:`open_tier`: expanded, writable, the study's folder
    this checkout's) and the folder of it a job works in, created and striped as configured: an
    arm's root for the steps (``study/arm``), the study's benchmark folder (``study/bench``).
    ``fields()`` goes on every record, ``describe()`` into the manifest."""

    def __init__(self, tier: Tier, study: str, *folder: str):
        self.tier = tier
        self.base = open_tier(tier, study)
        self.root = self.base.joinpath(study, *folder)
        self.root.mkdir(parents=True, exist_ok=True)
        self.striping = apply_striping(tier, self.root)  # new files below inherit it
        if self.striping:
            log.info("tier %s: %s", tier.name, self.striping)
        self.probe = probe_tier(self.root)
        self.fs_type = self.probe["fs_type"]

    def fields(self) -> dict:
        return {"tier": self.tier.name, "tier_kind": self.tier.kind, "fs_type": self.fs_type}

    def describe(self) -> dict:
        return {**self.fields(), **self.probe, "path": str(self.base.resolve()), "template": self.tier.path,
                "striping": self.striping}

    @property
    def is_memory(self) -> bool:
        return memory_backed(self.tier.kind, self.fs_type)

    def drop_pages(self, paths: list[Path], records: RecordLog, step: str) -> bool:
        """Drop the page-cache pages of files on this tier that a step (or its paired replay) is about to read, so the
        reads come from the tier (config ``staging.reads_from_storage``; fio's ``invalidate=1``): no root needed. A
        memory tier's pages are its storage and cannot be dropped: its reads are memory reads, and its records say so
        (``cache_risk`` false, the ``tier_kind``). One record (op ``evict``, the instrument's) of the seconds it
        took. Whether it dropped any."""
        if self.is_memory or not paths:
            return False
        with records.timed(step=step, phase=REPLAY, op="evict", n_files=len(paths), **self.fields()):
            for path in paths:
                evict(path)
        return True

    def require_space(self, nbytes: int, what: str) -> None:
        """Refuse work that would fill the tier (a 10% margin), naming it and the tier."""
        free = free_bytes(self.base)
        if nbytes > 0.9 * free:
            raise TierError(f"tier '{self.tier.name}' ({self.base}): {what} needs {format_bytes(nbytes)} but only "
                            f"{format_bytes(free)} are free; lower the sizes or free space")
