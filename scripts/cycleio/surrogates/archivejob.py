"""The cycle's archive jobs (``arch``, and ``earcNN`` per group of ensemble members): the operational tarballs of a
cycle, off the persistent tier, to the archive tier.

For each tarball of the job (archive_lists.job_tarballs) the job plans its parts under the archive's limits with
the members' actual sizes, writes each part (a temporary name, fsync, rename: storage.archive), lands its index
beside it and reads it back against the index and against the checksums the jobs that wrote the members recorded
when they landed the files (their manifests); a tarball that does not read back is removed with its index, so
nothing is half-archived. Records: ``phase: archive``, reads off the persistent tier (``op: read``, one per
member), the tarball's writes to the archive tier (``op: write``), its fsync and rename (``op: sync``) and the
read-back (``op: checksum``). The job around it (a paired replay, the records, the manifest, written last and listing
the tarballs) is the runner's: runner.persistentjobs.run_archive.

With ``archive.remote`` (an archive this machine cannot open as a file system: HPSS through htar and hsi) each tarball
is landed by the site's commands (storage.remotearchive): written to a temporary name, its listing checked against the
members' names and sizes, then renamed; its index goes into the study's results beside the job's manifest (names and
sizes from the listing, no offsets or checksums), and the listing (``op: meta``) stands in for the read-back.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..config.settings import ArmSettings
from ..config.tierspec import Tier
from ..fsutil import write_json_atomic
from ..records import RecordLog
from ..storage.archive import (INDEX_SUFFIX, ArchiveError, MemberChanged, command_found, index_path, plan_tarball,
                               run_archive_command, verify_tarball, write_index, write_tarball)
from ..storage.pagecache import cache_risk, cached_fraction
from ..storage.remotearchive import RemoteTier, land_remote, missing_programs
from ..storage.staging import remove_stale_temporaries
from ..storage.tiers import TierSite
from ..units import MiB
from .archive_lists import archive_limits, job_tarballs

log = logging.getLogger("cycleio")

PHASE = "archive"


def expected_checksums(manifests: list[Path]) -> dict[str, tuple[int, str]]:
    """Path under the arm's folder -> (bytes, checksum) of every file the cycle's steps landed (their manifests)."""
    expected: dict[str, tuple[int, str]] = {}
    for manifest in manifests:
        for output in json.loads(Path(manifest).read_text()).get("outputs", []):
            expected[output["path"]] = (output["bytes"], output["xxh3_64"])
    return expected


def archive_tool(command: str) -> str:
    """Which writer the job uses: the configured command's program where it is found, else Python's tarfile."""
    return command if command.strip() and command_found(command) else ""


@dataclass
class Archived:
    """What an archive job wrote: its tarballs (the manifest's entries), their folder, the tiers it read and wrote."""

    tarballs: list[dict]
    folder: Path
    persistent: TierSite
    target: TierSite | RemoteTier
    remote: bool


def write_archive(settings: ArmSettings, cycle: str, records: RecordLog, index_dir: Path, manifests: list[Path] = (),
                  job: str = "arch") -> Archived:
    """Write, index and verify the tarballs of one archive job of the cycle (``job``: ``arch`` or ``earcNN``), their
    records into ``records``; a remote archive's indexes go into ``index_dir`` (beside the job's manifest). The job
    around it (a paired replay, the records, the manifest) is the runner's (runner.persistentjobs.run_archive)."""
    archive = settings.archive
    if not archive:
        raise ValueError(f"the {job} job needs the arm's archive settings (config archive.enabled: true)")
    remote = archive.get("remote", False)
    if remote and missing_programs(archive):
        raise ArchiveError(f"the {job} job of cycle {cycle}: archive.remote is true, but these programs are not found "
                           f"here: {'; '.join(missing_programs(archive))} (the remote archive is written only through "
                           "them; run the job where they are, e.g. a transfer node)")
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    tier = Tier(**archive["tier"])
    target = RemoteTier(tier, settings.study, settings.arm) if remote else TierSite(tier, settings.study, settings.arm)
    command = archive["command"] if remote else archive_tool(archive["command"])
    if archive["command"].strip() and not command:
        log.warning("[%s %s %s] archive.command %r: its program is not found here; writing the tarballs with "
                    "Python's tarfile instead", settings.arm, cycle, job, archive["command"])
    expected = expected_checksums(list(manifests))
    folder = target.root / cycle
    limits = archive_limits(archive)
    written = []
    for name, specs in job_tarballs(job, cycle, settings).items():
        missing = [spec.path for spec in specs if not (persistent.root / spec.path).is_file()]
        if missing:
            raise FileNotFoundError(f"{name}.tar of cycle {cycle}: {len(missing)} members are not on tier "
                                    f"{settings.persistent.name} ({persistent.root}), e.g. {missing[0]}")
        sizes = [(spec.path, (persistent.root / spec.path).stat().st_size) for spec in specs]
        parts = plan_tarball(name, sizes, limits, cycle)  # the members' actual sizes against the limits
        finals = [folder / part for part, _ in parts]
        if not remote:  # a remote archive's temporaries have fixed names: the command overwrites them
            remove_stale_temporaries(finals + [index_path(final) for final in finals])
        for final, (part, members) in zip(finals, parts):
            if remote:
                written.append(_one_remote_tarball(final, members, persistent, target, records, archive, expected,
                                                   index_dir / f"{job}.{final.name}{INDEX_SUFFIX}"))
            else:
                written.append(_one_tarball(final, members, persistent, target, records, command, archive, expected))
    total = sum(entry["bytes"] for entry in written)
    seconds = sum(entry["write_s"] + entry["sync_s"] for entry in written)
    log.info("[%s %s %s] %d tarballs, %.1f MiB to %s in %.2f s (%.1f MiB/s)", settings.arm, cycle, job, len(written),
             total / MiB, folder, seconds, total / MiB / seconds if seconds > 0 else 0.0)
    return Archived(written, folder, persistent, target, remote)


def _one_tarball(final: Path, members: list[tuple[str, int]], persistent: TierSite, target: TierSite,
                 records: RecordLog, command: str, archive: dict, expected: dict) -> dict:
    pairs = [(name, persistent.root / name) for name, _ in members]
    cached = {name: cached_fraction(path) for name, path in pairs}  # before the reads, outside their timing
    if command:
        index = run_archive_command(command, final, pairs, persistent.root, archive["timeout_s"])
    else:
        index = write_tarball(final, pairs)
    tool = index.tool
    if not command:  # tarfile reads each member itself: its reads are timed apart from its writes
        for member in index.members:
            records.add(phase=PHASE, op="read", file=member.name, bytes=member.bytes, t_start=member.t_start,
                        seconds=member.read_s, tool=tool, cached_fraction=cached.get(member.name),
                        cache_risk=cache_risk("read", memory=persistent.is_memory), **persistent.fields())
    records.add(phase=PHASE, op="write", file=final.name, bytes=index.bytes, n_files=len(index.members),
                t_start=index.t_start, seconds=index.write_s, tool=tool, **target.fields())
    records.add(phase=PHASE, op="sync", file=final.name, n_files=1, t_start=index.t_start + index.write_s,
                seconds=index.sync_s, tool=tool, **target.fields())
    write_index(final, index)
    try:
        checked = verify_tarball(final, index, expected)
    except ArchiveError:  # a tarball that does not read back (a member changed under a command) is not kept
        final.unlink(missing_ok=True)
        index_path(final).unlink(missing_ok=True)
        raise
    records.add(phase=PHASE, op="checksum", file=final.name, bytes=checked.bytes, n_files=len(index.members),
                t_start=checked.t_start, seconds=checked.seconds,
                cache_risk=cache_risk("checksum", memory=target.is_memory), **target.fields())
    return {"tarball": final.name, "index": index_path(final).name, "bytes": index.bytes, "members": len(index.members),
            "member_bytes": sum(m.bytes for m in index.members), "tool": tool, "write_s": index.write_s,
            "sync_s": index.sync_s, "verify_s": checked.seconds}


def _one_remote_tarball(final, members: list[tuple[str, int]], persistent: TierSite, target: RemoteTier,
                        records: RecordLog, archive: dict, expected: dict, index_file: Path) -> dict:
    """One tarball into a remote archive (storage.remotearchive); its index into the study's results."""
    for name, size in members:  # only sizes can be compared here: the tarball is never read back
        if name in expected and expected[name][0] != size:
            raise MemberChanged(f"{final.name}: member {name} is {size} bytes, but its step wrote {expected[name][0]} "
                                "bytes: it changed after its step landed it; not archived")
    pairs = [(name, persistent.root / name) for name, _ in members]
    index_file.unlink(missing_ok=True)  # an earlier attempt's, whatever the landing does now
    index = land_remote(final, pairs, persistent.root, archive, index_file.parent)
    member_bytes = sum(member.bytes for member in index.members)
    fields = target.fields()
    records.add(phase=PHASE, op="write", file=final.name, bytes=member_bytes, n_files=len(index.members),
                t_start=index.t_start, seconds=index.write_s, tool=index.tool, **fields)
    records.add(phase=PHASE, op="meta", file=final.name, n_files=len(index.members),
                t_start=index.t_start + index.write_s, seconds=index.list_s, tool=index.tool, **fields)
    records.add(phase=PHASE, op="sync", file=final.name, n_files=1,
                t_start=index.t_start + index.write_s + index.list_s, seconds=index.sync_s, tool=index.tool, **fields)
    write_json_atomic(index_file, index.to_json())
    return {"tarball": final.name, "index": index_file.name, "bytes": member_bytes, "members": len(index.members),
            "member_bytes": member_bytes, "tool": index.tool, "write_s": index.write_s, "sync_s": index.sync_s,
            "verify_s": index.list_s, "verified": "listing", "remote_path": str(final)}
