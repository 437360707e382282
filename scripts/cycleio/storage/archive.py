"""Tarballs on an archive tier: planned under the archive's limits, landed safely, indexed, read back.

The archive (HPSS at NOAA, through ``htar``) takes a cycle's files as a few large tarballs. This module
knows nothing of which files (surrogates.archive_lists says that); it:

- plans a tarball under the archive's limits (:func:`plan_tarball`): a member over ``max_member_bytes``
  (htar refuses members over 64 GB, global-workflow #4399) or a tarball over ``max_tarball_bytes`` (a
  16-day tarball past about 3 TB failed silently, #2339) is refused naming both, or, with ``split``, the
  tarball is cut into numbered parts under the limit;
- writes a tarball with Python's tarfile to a temporary name, fsyncs and renames it (fsutil.landing), reading
  each member in large transfers and hashing it as it goes (the project's block-tree xxh3-64,
  storage.checksums), and fails it when a member changes while it is read (htar fails likewise, #4158);
- or runs a site's command (``htar -cvf {tarball} -L {list}``) through process.run_command;
- writes the index (member names, sizes, offsets of their data in the tarball, checksums) beside the
  tarball, and verifies the tarball by reading every member back against the index.

An archive this machine cannot open as a file system (HPSS through htar and hsi) is storage.remotearchive's.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import xxhash

from ..fsutil import landing, write_json_atomic
from ..process import run_command, which
from ..units import format_bytes
from .checksums import BLOCK_BYTES, blocks, combine_block_digests, read_range_digest

TAR_BLOCK = 512
TAR_RECORD = 20 * TAR_BLOCK  # tarfile pads the archive to whole records
READ_BYTES = 8 * 2**20  # one read of a member, one write of the tarball: large transfers
INDEX_SUFFIX = ".index.json"


class ArchiveError(RuntimeError):
    """A tarball that cannot be written or does not verify; the message names the tarball (and member)."""


class ArchiveLimitError(ValueError):
    """A tarball or member over the archive's limits; the message names the tarball, the member and the limit."""


class MemberChanged(ArchiveError):
    """A member whose size or time changed while it was archived (htar fails such a tarball too)."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_member_bytes: int
    max_tarball_bytes: int
    split: bool = False


def tar_bytes(members: list[tuple[str, int]]) -> int:
    """The size of a tarball of these (name, bytes) members as tarfile writes it (PAX format): a header block
    per member (and an extended header for names over 100 characters or members over 8 GiB), the data padded
    to blocks, two zero blocks, and the whole padded to a record."""
    total = 2 * TAR_BLOCK
    for name, size in members:
        extended = len(name.encode()) > 100 or size >= 8**11
        total += TAR_BLOCK * (3 if extended else 1) + -(-size // TAR_BLOCK) * TAR_BLOCK
    return -(-total // TAR_RECORD) * TAR_RECORD


def part_name(tarball: str, part: int) -> str:
    """``gdas`` -> ``gdas.part01.tar``: the numbered parts of a split tarball."""
    return f"{tarball}.part{part:02d}.tar"


def plan_tarball(tarball: str, members: list[tuple[str, int]], limits: ArchiveLimits,
                 cycle: str = "") -> list[tuple[str, list[tuple[str, int]]]]:
    """(file name, members) of the tarball, or of its numbered parts with ``limits.split``.

    ArchiveLimitError naming the tarball and member when a member is over ``max_member_bytes``, or when the
    tarball is over ``max_tarball_bytes`` and may not be split."""
    where = f"{tarball}.tar" + (f" of cycle {cycle}" if cycle else "")
    if members:
        name, size = max(members, key=lambda member: member[1])
        if size > limits.max_member_bytes:
            raise ArchiveLimitError(
                f"{where}: member {name} is {format_bytes(size)}, over archive.max_member_bytes "
                f"({format_bytes(limits.max_member_bytes)}; htar refuses members over 64 GB); lower the resolution "
                "or raise the limit where the archive takes larger members")
    total = tar_bytes(members)
    if total <= limits.max_tarball_bytes:
        return [(f"{tarball}.tar", members)]
    largest = max(members, key=lambda member: member[1])[0]
    if not limits.split:
        raise ArchiveLimitError(
            f"{where}: about {format_bytes(total)} with {len(members)} members (largest {largest}), over "
            f"archive.max_tarball_bytes ({format_bytes(limits.max_tarball_bytes)}); set archive.split: true to "
            "write it in numbered parts under the limit, or raise the limit")
    parts: list[list[tuple[str, int]]] = [[]]
    for member in members:
        if parts[-1] and tar_bytes(parts[-1] + [member]) > limits.max_tarball_bytes:
            parts.append([])
        parts[-1].append(member)
    for chosen in parts:
        if tar_bytes(chosen) > limits.max_tarball_bytes:  # one member with the tar's overhead over the limit
            raise ArchiveLimitError(
                f"{where}: member {chosen[0][0]} alone makes a part of {format_bytes(tar_bytes(chosen))}, over "
                f"archive.max_tarball_bytes ({format_bytes(limits.max_tarball_bytes)}); raise the limit")
    return [(part_name(tarball, number), chosen) for number, chosen in enumerate(parts, start=1)]


# ------------------------------------------------------------------------------------------------------ writing


@dataclass
class MemberEntry:
    name: str  # the member's name in the tarball: its path under the arm's ROTDIR
    bytes: int
    offset: int | None  # where its data begin in the tarball (None: from a remote archive's listing, which gives none)
    header_offset: int | None
    xxh3_64: str | None
    mtime: float
    t_start: float = 0.0  # when its read began (epoch seconds)
    read_s: float = 0.0  # seconds reading it off its tier


@dataclass
class TarballIndex:
    tarball: str  # file name
    bytes: int | None  # None: a remote archive's tarball, whose size is not read here
    members: list[MemberEntry] = field(default_factory=list)
    tool: str = "tarfile"
    write_s: float = 0.0  # seconds writing the tarball (the tool's whole run for a command)
    sync_s: float = 0.0  # fsync, rename and the folder's sync (a remote archive: the rename commands)
    t_start: float = 0.0
    verified: str = "read-back"  # or "listing": a remote archive's, checked by names and sizes (storage.remotearchive)
    list_s: float = 0.0  # a remote archive: seconds running the listing command

    def to_json(self) -> dict:
        return {"tarball": self.tarball, "bytes": self.bytes, "tool": self.tool, "verified": self.verified,
                "members": [{key: value for key, value in asdict(member).items() if key not in ("t_start", "read_s")}
                            for member in self.members]}

    @classmethod
    def read(cls, path: Path) -> "TarballIndex":
        raw = json.loads(Path(path).read_text())
        return cls(raw["tarball"], raw["bytes"], [MemberEntry(**member) for member in raw["members"]], raw["tool"],
                   verified=raw.get("verified", "read-back"))


def index_path(tarball: Path) -> Path:
    return tarball.with_name(tarball.name + INDEX_SUFFIX)


class _BlockTreeHash:
    """The checksum storage.checksums gives a file, made from its bytes as they stream past."""

    def __init__(self):
        self.digests: list[bytes] = []
        self.current = xxhash.xxh3_64()
        self.in_block = 0

    def update(self, data: memoryview) -> None:
        while len(data):
            take = min(len(data), BLOCK_BYTES - self.in_block)
            self.current.update(data[:take])
            self.in_block += take
            data = data[take:]
            if self.in_block == BLOCK_BYTES:
                self.digests.append(self.current.digest())
                self.current, self.in_block = xxhash.xxh3_64(), 0

    def hexdigest(self) -> str:
        digests = self.digests + ([self.current.digest()] if self.in_block or not self.digests else [])
        return combine_block_digests(digests)


class _MemberReader:
    """A member's file as tarfile reads it: timed reads, hashed, counted."""

    def __init__(self, handle):
        self.handle, self.hash, self.count, self.seconds = handle, _BlockTreeHash(), 0, 0.0

    def read(self, size: int = -1) -> bytes:
        t0 = time.perf_counter()
        data = self.handle.read(size)
        self.seconds += time.perf_counter() - t0
        self.hash.update(memoryview(data))
        self.count += len(data)
        return data


class _TimedWriter:
    """The tarball's file as tarfile writes it: writes gathered to ``READ_BYTES``, written whole (short writes
    continued, never dropped) and timed."""

    def __init__(self, handle):
        self.handle, self.seconds, self.position = handle, 0.0, 0
        self.pending: list[bytes] = []
        self.pending_bytes = 0

    def write(self, data) -> int:
        self.pending.append(bytes(data))
        self.pending_bytes += len(data)
        self.position += len(data)
        if self.pending_bytes >= READ_BYTES:
            self.flush()
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        if self.pending:
            t0 = time.perf_counter()
            data = memoryview(b"".join(self.pending))
            while len(data):  # a raw write may be short (a full tier): the next one raises ENOSPC
                data = data[self.handle.write(data):]
            self.seconds += time.perf_counter() - t0
            self.pending, self.pending_bytes = [], 0


def _changed(tarball: str, name: str, before: os.stat_result, after: os.stat_result | None, read: int) -> MemberChanged:
    now = "is gone" if after is None else f"is {after.st_size} bytes"
    return MemberChanged(
        f"{tarball}: member {name} changed while archived (it was {before.st_size} bytes, {read} were read, it {now}); "
        "the tarball is not kept: archive it again once the file is final")


def _add_member(tar: tarfile.TarFile, tarball: str, name: str, path: Path) -> MemberEntry:
    before = os.stat(path)
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = before.st_size, int(before.st_mtime), before.st_mode & 0o7777
    t_start = time.time()
    with open(path, "rb", buffering=0) as handle:
        reader = _MemberReader(handle)
        header_offset = tar.offset
        try:
            tar.addfile(info, reader)
        except OSError as err:  # tarfile: "unexpected end of data" when the file shrank under it
            if err.errno is None:
                try:
                    after = os.stat(path)
                except FileNotFoundError:
                    after = None
                raise _changed(tarball, name, before, after, reader.count) from err
            raise
        try:
            after = os.stat(path)
        except FileNotFoundError:
            after = None
        grew = len(handle.read(1)) > 0
    if after is None or grew or after.st_size != before.st_size or after.st_mtime_ns != before.st_mtime_ns:
        raise _changed(tarball, name, before, after, reader.count)
    offset = tar.offset - -(-info.size // TAR_BLOCK) * TAR_BLOCK  # addfile wrote header(s), then the padded data
    return MemberEntry(name=name, bytes=info.size, offset=offset, header_offset=header_offset,
                       xxh3_64=reader.hash.hexdigest(), mtime=before.st_mtime, t_start=t_start, read_s=reader.seconds)


def write_tarball(final: Path, members: list[tuple[str, Path]]) -> TarballIndex:
    """Write ``members`` ((name in the tarball, file)) as the tarball ``final``: a temporary name, fsync, rename.

    A member that changes while it is read raises MemberChanged; a full tier raises the OS error naming the
    tarball; either way nothing is left under the final name (nor under the temporary one)."""
    final = Path(final)
    index = TarballIndex(final.name, 0, t_start=time.time())
    timing: dict = {}
    with landing(final, timing) as tmp:
        with open(tmp, "wb", buffering=0) as handle:
            writer = _TimedWriter(handle)
            with tarfile.open(fileobj=writer, mode="w", format=tarfile.PAX_FORMAT, copybufsize=READ_BYTES) as tar:
                for name, path in members:
                    index.members.append(_add_member(tar, final.name, name, Path(path)))
            writer.flush()
        index.write_s = writer.seconds
        t_sync = time.perf_counter()
    index.sync_s = time.perf_counter() - t_sync
    index.bytes = final.stat().st_size
    return index


# ------------------------------------------------------------------------------------------------ a site's command


def command_argv(template: str, tarball: str | Path, member_list: str | Path) -> list[str]:
    """The archive command's words (config ``archive.command``, e.g. ``htar -cvf {tarball} -L {list}``).

    ValueError for a template without ``{tarball}`` and ``{list}``, or that does not parse."""
    if "{tarball}" not in template or "{list}" not in template:
        raise ValueError(f"archive command {template!r} must name {{tarball}} and {{list}} "
                         "(e.g. 'htar -cvf {tarball} -L {list}')")
    try:
        return shlex.split(template.format(tarball=shlex.quote(str(tarball)), list=shlex.quote(str(member_list))))
    except (KeyError, IndexError, ValueError) as err:
        raise ValueError(f"archive command {template!r} is not a valid template ({err}); "
                         "expected e.g. 'htar -cvf {tarball} -L {list}'") from None


def command_found(template: str) -> str | None:
    """The archive command's program where it is found (on PATH or beside Python), else None."""
    words = shlex.split(template) if template.strip() else []
    if not words:
        return None
    program = words[0]
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    return which(program)


def run_archive_command(template: str, final: Path, members: list[tuple[str, Path]], root: Path,
                        timeout: float) -> TarballIndex:
    """Write the tarball with a site's command run in ``root`` (member names are relative to it), to a temporary
    name then fsync and rename; the index is made by reading the tarball the command wrote."""
    final = Path(final)
    index = TarballIndex(final.name, 0, tool=Path(shlex.split(template)[0]).name, t_start=time.time())
    listing = final.with_name(f".{final.name}.list-{os.getpid()}")
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text("".join(f"{name}\n" for name, _ in members))
    timing: dict = {}
    try:
        with landing(final, timing) as tmp:
            argv = command_argv(template, tmp.resolve(), listing.resolve())
            t0 = time.perf_counter()
            try:
                done = run_command(argv, timeout=timeout, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
            except subprocess.TimeoutExpired:
                raise ArchiveError(f"{final.name}: {argv[0]} ran over {timeout:.0f} s (archive.timeout_s)") from None
            index.write_s = time.perf_counter() - t0
            if done.returncode != 0:
                tail = " | ".join((done.stdout or "").strip().splitlines()[-3:])
                raise ArchiveError(f"{final.name}: {shlex.join(argv)} exited with {done.returncode}: {tail}")
            if not tmp.exists():
                raise ArchiveError(f"{final.name}: {argv[0]} exited 0 but wrote no tarball at {tmp}")
            t_sync = time.perf_counter()
    finally:
        listing.unlink(missing_ok=True)
    index.sync_s = time.perf_counter() - t_sync
    index.bytes = final.stat().st_size
    try:
        index.members = read_members(final)
    except tarfile.TarError as err:  # the command exited 0 but wrote no tarball one can read: not kept
        final.unlink(missing_ok=True)
        raise ArchiveError(f"{final.name}: {index.tool} wrote {index.bytes} bytes that do not read as a tarball "
                           f"({err}); not kept") from None
    return index


def read_members(tarball: Path) -> list[MemberEntry]:
    """The members of a tarball on a file system, with their offsets and checksums read from it."""
    entries = []
    with tarfile.open(tarball, "r:") as tar, open(tarball, "rb", buffering=0) as handle:
        for info in tar:
            if info.isfile():
                digest = _range_checksum(handle.fileno(), info.offset_data, info.size)
                entries.append(MemberEntry(info.name, info.size, info.offset_data, info.offset, digest, info.mtime))
    return entries


# ------------------------------------------------------------------------------------------------ index and read-back


def write_index(tarball: Path, index: TarballIndex) -> Path:
    path = index_path(tarball)
    write_json_atomic(path, index.to_json())
    return path


def _range_checksum(fd: int, start: int, length: int) -> str:
    """The block-tree checksum of ``length`` bytes at ``start`` (a member inside a tarball)."""
    return combine_block_digests([read_range_digest(fd, start + offset, size, READ_BYTES)
                                  for offset, size in blocks(length)])


@dataclass
class VerifyTiming:
    bytes: int
    seconds: float
    t_start: float


def verify_tarball(tarball: Path, index: TarballIndex, expected: dict[str, tuple[int, str]] | None = None) -> VerifyTiming:
    """Read the tarball back: its size, its member list (names, sizes, offsets) against the index, and every
    member's bytes against the index's checksum (and ``expected``: name -> (bytes, checksum), what the files
    were when their steps wrote them). ArchiveError naming the tarball and member on any difference."""
    tarball = Path(tarball)
    t_start, t0 = time.time(), time.perf_counter()
    size = tarball.stat().st_size
    if size != index.bytes:
        raise ArchiveError(f"{tarball.name}: {size} bytes on the archive tier, the index says {index.bytes}")
    with tarfile.open(tarball, "r:") as tar:
        listed = [(info.name, info.size, info.offset_data) for info in tar if info.isfile()]
    indexed = [(member.name, member.bytes, member.offset) for member in index.members]
    if listed != indexed:
        differ = next(((a, b) for a, b in zip(listed, indexed) if a != b), (listed[len(indexed):], indexed[len(listed):]))
        raise ArchiveError(f"{tarball.name}: its members differ from its index (tarball {differ[0]}, index {differ[1]})")
    read = 0
    with open(tarball, "rb", buffering=0) as handle:
        for member in index.members:
            actual = _range_checksum(handle.fileno(), member.offset, member.bytes)
            read += member.bytes
            if actual != member.xxh3_64:
                raise ArchiveError(f"{tarball.name}: member {member.name} reads back with checksum {actual}, "
                                   f"the index says {member.xxh3_64} (corrupt tarball)")
            if expected and member.name in expected and expected[member.name] != (member.bytes, member.xxh3_64):
                was_bytes, was_sum = expected[member.name]
                raise MemberChanged(f"{tarball.name}: member {member.name} is {member.bytes} bytes with checksum "
                                    f"{member.xxh3_64}, but its step wrote {was_bytes} bytes with checksum {was_sum}: "
                                    "it changed after its step landed it")
    return VerifyTiming(read, time.perf_counter() - t0, t_start)
