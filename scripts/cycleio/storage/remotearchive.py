"""A tarball landed on an archive this machine cannot open as a file system (HPSS through htar and hsi).

With ``archive.remote: true`` the archive tier's path names a place in the archive's own namespace (an HPSS
folder), not a folder here. The job then never opens the tarball itself; it lands it with three commands:

- ``archive.command`` (``htar -P -cvf {tarball} -L {list}``) writes the tarball under a temporary name
  (``.gdas.tar.tmp``: always the same, so a killed job's rerun overwrites it, as ``htar -c`` overwrites an
  existing archive); htar writes its own index beside it (``.gdas.tar.tmp.idx``, ``archive.index_suffix``);
- ``archive.list_command`` (``htar -tvf {tarball}``) lists the temporary; its listing (one line per member:
  ``HTAR: -rw-r--r--  user/group  1000 2026-01-01 06:00  name``, then htar's consistency file
  ``HTAR_CF_CHK_...``, ``HTAR: Listing complete ...``, ``HTAR: HTAR SUCCESSFUL``) is parsed and checked
  against what was archived: every member, by name and size, and nothing else;
- only then ``archive.rename_command`` (``hsi mv {source} {target}``) moves htar's index and then the tarball
  to their final names; the tarball's rename comes last, so nothing is under the final tarball name before the
  listing checked out.

A failing step raises ArchiveError naming the command, its exit status and the tail of its output; the index
the project keeps (names and sizes from the listing; offsets and checksums null: a listing gives none) is
written by the caller into the study's results.
"""

from __future__ import annotations

import os
import re
import shlex
import string
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..config.tierspec import Tier
from ..process import run_command
from .archive import ArchiveError, MemberChanged, MemberEntry, TarballIndex, command_found

TEMPORARY_SUFFIX = ".tmp"
CONSISTENCY_FILE = "HTAR_CF_CHK_"  # htar's consistency file, deposited last inside every archive it writes
OUTPUT_TAIL_LINES = 5

# ``htar -tvf`` (and GNU ``tar -tvf``): mode, owner/group, size, date, time, name; htar prefixes "HTAR: "
_LISTING_LINE = re.compile(r"^(?:HTAR:\s+)?(?P<mode>[-dlhcbpsDC][-rwxsStTl]{9}\S*)\s+(?P<owner>\S+)\s+"
                           r"(?P<size>\d+)\s+(?P<date>\d{4}-\d{2}-\d{2})\s+(?P<time>\d{2}:\d{2}(?::\d{2})?)\s+"
                           r"(?P<name>.+?)\s*$")

TEMPLATES = {  # config key -> (the placeholders it must name, an example)
    "command": (("tarball", "list"), "htar -P -cvf {tarball} -L {list}"),
    "list_command": (("tarball",), "htar -tvf {tarball}"),
    "rename_command": (("source", "target"), "hsi mv {source} {target}"),
}


def template_argv(key: str, template: str, **values: str) -> list[str]:
    """The words of command ``archive.<key>`` with its placeholders filled (each value one word, quoted).

    ValueError naming the key for a template that misses a placeholder, names an unknown one, or does not parse."""
    required, example = TEMPLATES[key]
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as err:
        raise ValueError(f"archive.{key} {template!r} is not a valid template ({err}); "
                         f"expected e.g. {example!r}") from None
    missing = [name for name in required if name not in fields]
    unknown = sorted(fields - set(required))
    if missing or unknown:
        what = (f"must name {', '.join('{' + name + '}' for name in missing)}" if missing else
                f"names {', '.join('{' + name + '}' for name in unknown)}, which it does not know")
        raise ValueError(f"archive.{key} {template!r} {what}; it takes {', '.join('{' + n + '}' for n in required)}, "
                         f"e.g. {example!r}")
    return shlex.split(template.format(**{name: shlex.quote(str(values[name])) for name in required}))


# ------------------------------------------------------------------------------------------------ the listing


@dataclass(frozen=True)
class ListedMember:
    name: str
    bytes: int
    mode: str


def parse_listing(text: str) -> list[ListedMember]:
    """The regular files of a ``htar -tvf`` (or ``tar -tvf``) listing, in its order; directories, htar's
    consistency file and htar's own messages (``Listing complete``, ``HTAR SUCCESSFUL``) are left out."""
    members = []
    for line in text.splitlines():
        match = _LISTING_LINE.match(line.strip())
        if not match or match["mode"][0] not in "-":
            continue
        name = match["name"]
        if PurePosixPath(name).name.startswith(CONSISTENCY_FILE):
            continue
        members.append(ListedMember(name, int(match["size"]), match["mode"]))
    return members


def check_listing(tarball: str, listed: list[ListedMember], archived: list[tuple[str, int]]) -> None:
    """ArchiveError naming the tarball and the member when the listing lacks a member that was archived, lists it
    with another size, or lists one that was not archived."""
    sizes = {member.name: member.bytes for member in listed}
    for name, size in archived:
        if name not in sizes:
            raise ArchiveError(f"{tarball}: member {name} is missing from the archive's listing ({len(listed)} "
                               f"members listed, {len(archived)} archived); not renamed to its final name")
        if sizes[name] != size:
            raise ArchiveError(f"{tarball}: member {name} is listed with {sizes[name]} bytes, {size} were archived; "
                               "not renamed to its final name")
    extra = sorted(set(sizes) - {name for name, _ in archived})
    if extra:
        raise ArchiveError(f"{tarball}: the archive's listing has {len(extra)} members that were not archived, "
                           f"e.g. {extra[0]}; not renamed to its final name")


# ------------------------------------------------------------------------------------------------ the remote tier


class RemoteTier:
    """The archive tier as a place in the archive's namespace: its paths are built, never opened here."""

    def __init__(self, tier: Tier, study: str, arm: str):
        self.tier = tier
        self.root = PurePosixPath(os.path.expandvars(tier.path)) / study / arm

    def fields(self) -> dict:
        return {"tier": self.tier.name, "tier_kind": self.tier.kind, "fs_type": "remote"}

    def describe(self) -> dict:
        return {**self.fields(), "path": str(self.root.parent.parent), "template": self.tier.path, "remote": True}

    is_memory = False


def temporary_name(final: PurePosixPath) -> PurePosixPath:
    return final.with_name(f".{final.name}{TEMPORARY_SUFFIX}")


def _run(what: str, argv: list[str], tarball: str, timeout: float, cwd=None) -> tuple[str, float]:
    """Run one of the landing's commands; its output and seconds, or ArchiveError naming it with its output's tail."""
    t0 = time.perf_counter()
    try:
        done = run_command(argv, timeout=timeout, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except subprocess.TimeoutExpired:
        raise ArchiveError(f"{tarball}: the {what} ({shlex.join(argv)}) ran over {timeout:.0f} s "
                           "(archive.timeout_s); not renamed to its final name") from None
    except OSError as err:
        raise ArchiveError(f"{tarball}: the {what} ({shlex.join(argv)}) did not start: {err}") from None
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        tail = " | ".join((done.stdout or "").strip().splitlines()[-OUTPUT_TAIL_LINES:])
        raise ArchiveError(f"{tarball}: the {what} ({shlex.join(argv)}) exited with {done.returncode}; "
                           f"not renamed to its final name; its output ends: {tail or '(nothing)'}")
    return done.stdout or "", seconds


def missing_programs(archive: dict) -> list[str]:
    """The remote landing's commands whose program is not found here (``archive.<key>: program``)."""
    return [f"archive.{key}: {shlex.split(archive[key])[0]}" for key in TEMPLATES
            if not command_found(archive[key])]


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_size, info.st_mtime_ns


def land_remote(final: PurePosixPath, members: list[tuple[str, Path]], root: Path, archive: dict,
                workdir: Path) -> TarballIndex:
    """Write the tarball ``final`` (a path in the archive's namespace) with the site's commands run in ``root``:
    the command to a temporary name, the listing checked against the members' names and sizes, then the renames.
    The command's list of members is a file in ``workdir`` (a local folder: the job's results), removed after it.

    ArchiveError (MemberChanged for a member whose size or time changed while the command read it) on any failure;
    then nothing has been renamed to the final tarball name."""
    timeout = archive["timeout_s"]
    tmp = temporary_name(final)
    index = TarballIndex(final.name, 0, tool=Path(shlex.split(archive["command"])[0]).name, t_start=time.time())
    before = {name: _stat(path) for name, path in members}
    gone = [name for name, info in before.items() if info is None]
    if gone:
        raise FileNotFoundError(f"{final.name}: {len(gone)} members are not there to archive, e.g. {gone[0]}")
    listing = Path(workdir) / f".{final.name}.list-{os.getpid()}"
    listing.write_text("".join(f"{name}\n" for name, _ in members))
    try:
        _, index.write_s = _run("archive command", template_argv("command", archive["command"], tarball=str(tmp),
                                                                 list=str(listing.resolve())),
                                final.name, timeout, cwd=root)
    finally:
        listing.unlink(missing_ok=True)
    for name, path in members:
        after = _stat(path)
        if after != before[name]:
            now = "is gone" if after is None else f"is {after[0]} bytes"
            raise MemberChanged(f"{final.name}: member {name} changed while archived (it was {before[name][0]} bytes, "
                                f"it {now}); not renamed to its final name: archive it again once the file is final")
    archived = [(name, before[name][0]) for name, _ in members]
    t_list = time.perf_counter()
    text, _ = _run("listing command", template_argv("list_command", archive["list_command"], tarball=str(tmp)),
                   final.name, timeout)
    listed = parse_listing(text)
    check_listing(final.name, listed, archived)
    index.list_s = time.perf_counter() - t_list
    t_sync = time.perf_counter()
    suffix = archive["index_suffix"]

    def rename(source: str, target: str) -> None:
        argv = template_argv("rename_command", archive["rename_command"], source=source, target=target)
        _run("rename command", argv, final.name, timeout)

    if suffix:  # htar's index first: the tarball's own rename is the last step
        rename(f"{tmp}{suffix}", f"{final}{suffix}")
    try:
        rename(str(tmp), str(final))
    except ArchiveError:
        if suffix:  # the index back beside its temporary, so nothing is left under the final names
            try:
                rename(f"{final}{suffix}", f"{tmp}{suffix}")
            except ArchiveError:
                pass
        raise
    index.sync_s = time.perf_counter() - t_sync
    paths = dict(members)
    index.members = [MemberEntry(member.name, member.bytes, None, None, None, os.stat(paths[member.name]).st_mtime)
                     for member in listed]
    index.bytes = None  # the tarball is not a file here: its size is not read (the members' bytes are)
    index.verified = "listing"
    return index
