"""The cycle's archive job (``arch``): the operational tarballs of a cycle, off the persistent tier, to the archive tier.

For each tarball of the cycle (archive_lists) the job plans its parts under the archive's limits with the members'
actual sizes, writes each part (a temporary name, fsync, rename: storage.archive), lands its index beside it and
reads it back against the index and against the checksums the cycle's steps recorded when they landed the files
(their manifests); a tarball that does not read back is removed with its index, so nothing is half-archived. Records: ``phase: archive``, reads off the persistent tier (``op: read``, one per member),
the tarball's writes to the archive tier (``op: write``), its fsync and rename (``op: sync``) and the read-back
(``op: checksum``). The manifest, written last, lists the tarballs.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ..config.settings import ArmSettings
from ..config.tierspec import Tier
from ..fsutil import write_json_atomic
from ..records import RecordLog
from ..storage.archive import (ArchiveError, command_found, index_path, plan_tarball, run_archive_command,
                               verify_tarball, write_index, write_tarball)
from ..storage.pagecache import cache_risk, cached_fraction
from ..storage.staging import remove_stale_temporaries
from ..storage.tiers import TierSite
from ..units import MiB
from .archive_lists import archive_limits, tarball_members

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


def run_archive(settings: ArmSettings, cycle: str, records_path: Path, manifest_path: Path,
                manifests: list[Path] = (), attempt: int = 1, replay=None) -> dict:
    """Write, index and verify the cycle's tarballs; records, then the manifest last.

    ``replay``: in a paired cycle (benchmarks.paired.PairedReplay), the archive's reads are replayed on the persistent
    tier and its writes on the archive tier right after it, for its rows of the efficiency table."""
    archive = settings.archive
    if not archive:
        raise ValueError("the arch job needs the arm's archive settings (config archive.enabled: true)")
    persistent = TierSite(settings.persistent, settings.study, settings.arm)
    target = TierSite(Tier(**archive["tier"]), settings.study, settings.arm)
    records = RecordLog(study=settings.study, arm=settings.arm, cycle=cycle, step="arch", strategy=settings.strategy,
                        attempt=attempt)
    command = archive_tool(archive["command"])
    if archive["command"].strip() and not command:
        log.warning("[%s %s arch] archive.command %r: its program is not found here; writing the tarballs with "
                    "Python's tarfile instead", settings.arm, cycle, archive["command"])
    expected = expected_checksums(list(manifests))
    folder = target.root / cycle
    limits = archive_limits(archive)
    written = []
    for name, specs in tarball_members(cycle, settings.start, settings.forecast, archive["tarballs"]).items():
        missing = [spec.path for spec in specs if not (persistent.root / spec.path).is_file()]
        if missing:
            raise FileNotFoundError(f"{name}.tar of cycle {cycle}: {len(missing)} members are not on tier "
                                    f"{settings.persistent.name} ({persistent.root}), e.g. {missing[0]}")
        sizes = [(spec.path, (persistent.root / spec.path).stat().st_size) for spec in specs]
        parts = plan_tarball(name, sizes, limits, cycle)  # the members' actual sizes against the limits
        finals = [folder / part for part, _ in parts]
        remove_stale_temporaries(finals + [index_path(final) for final in finals])
        for final, (part, members) in zip(finals, parts):
            written.append(_one_tarball(final, members, persistent, target, records, command, archive, expected))
    total = sum(entry["bytes"] for entry in written)
    seconds = sum(entry["write_s"] + entry["sync_s"] for entry in written)
    log.info("[%s %s arch] %d tarballs, %.1f MiB to %s in %.2f s (%.1f MiB/s)", settings.arm, cycle, len(written),
             total / MiB, folder, seconds, total / MiB / seconds if seconds > 0 else 0.0)
    if replay is not None:
        label = f"[{settings.arm} {cycle} arch]"
        raw = records_path.with_name("arch.replay.raw")
        replay.run("arch", records, persistent, persistent.root / f".replay.{cycle}.arch", raw, label, phase=PHASE,
                   ops=("read",))
        replay.run("arch", records, target, target.root / f".replay.{cycle}.arch", raw, label, phase=PHASE,
                   ops=("write",))
    records.write(records_path)
    from .jobs import provenance  # jobs imports the surrogates' writers: only where a manifest is made

    manifest = {"study": settings.study, "arm": settings.arm, "cycle": cycle, "step": "arch",
                "root": str(folder.resolve()), "tarballs": written,
                "provenance": provenance(settings, {"persistent": persistent, "archive": target})}
    write_json_atomic(manifest_path, manifest)
    return manifest


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
