"""Moving a job's files between tiers, each landed copy verified, and verifying outputs written in place."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from ..config.settings import ArmSettings
from ..records import RecordLog
from ..storage.checksums import checksum_file
from ..storage.pagecache import cache_risk
from ..storage.staging import copy_and_verify
from ..storage.stagingtypes import StagingFaults, StagingOptions
from ..storage.tiers import TierSite
from ..surrogates.inventory import FileSpec
from ..units import MiB, format_rate

log = logging.getLogger("cycleio")


def _rate(nbytes: int, seconds: float) -> str:
    return format_rate(nbytes / MiB / seconds) if seconds > 0 else "-"


def staging_options(settings: ArmSettings) -> StagingOptions:
    staging = settings.staging
    return StagingOptions(method=staging.method, streams=staging.streams, direct_io_verify=staging.direct_io_verify)


def stage_files(files: list[FileSpec], src_root: Path, dst_root: Path, phase: str, step: str, src: TierSite,
                dst: TierSite, records: RecordLog, options: StagingOptions, label: str,
                faults: StagingFaults = StagingFaults()) -> dict[str, tuple[int, str]]:
    """Copy files between tiers and verify each landed copy; return path -> (bytes, checksum).

    ``faults``: fault injection's (runner.instruments.FaultInjection), where a file is corrupted or the copy fails."""
    landed: dict[str, tuple[int, str]] = {}
    t0 = time.perf_counter()
    last_report = [t0]

    def progress(done: int, total: int, nbytes: int) -> None:
        if time.perf_counter() - last_report[0] > 10:
            last_report[0] = time.perf_counter()
            log.info("%s %s: %d of %d files, %.1f MiB so far", label, phase, done, total, nbytes / MiB)

    pairs = [(src_root / spec.path, dst_root / spec.path) for spec in files]
    # Copies onto scratch need not survive a crash (the job would start again from the persistent tier).
    options = replace(options, durable=dst.tier.persistent, faults=faults)
    results, land = copy_and_verify(pairs, options, progress)
    records.add(step=step, phase=phase, op="sync", n_files=land.files, t_start=land.t_start, seconds=land.seconds,
                tool=options.method, **dst.fields())
    for spec, (copied, verified) in zip(files, results):
        records.add(step=step, phase=phase, op="copy", file=spec.path, bytes=copied.bytes, t_start=copied.t_start,
                    seconds=copied.seconds, tool=options.method, **dst.fields())
        if copied.source_checksum_seconds:
            records.add(step=step, phase=phase, op="checksum", file=spec.path, bytes=copied.bytes,
                        t_start=copied.t_start, seconds=copied.source_checksum_seconds, **src.fields())
        records.add(step=step, phase="verify", op="checksum", file=spec.path, bytes=verified.bytes,
                    t_start=verified.t_start, seconds=verified.seconds,
                    cache_risk=cache_risk("checksum", memory=dst.is_memory, direct_io=verified.direct_io),
                    **dst.fields())
        landed[spec.path] = (copied.bytes, copied.checksum)
    seconds = time.perf_counter() - t0
    total = sum(size for size, _ in landed.values())
    log.info("%s %s: %d files, %.1f MiB in %.2f s (%s, %s, %d streams, verified)", label, phase, len(files),
             total / MiB, seconds, _rate(total, seconds), options.method, options.streams)
    return landed


def verify_in_place(outputs: list[FileSpec], persistent: TierSite, records: RecordLog, options: StagingOptions,
                    root: Path) -> dict[str, tuple[int, str]]:
    """An unstaged job's outputs, checksummed where the run wrote them (below ``root`` on the persistent tier);
    return path -> (bytes, checksum)."""
    landed = {}
    for spec in outputs:
        path = root / spec.path
        with records.timed(phase="verify", op="checksum", file=spec.path,
                           cache_risk=cache_risk("checksum", memory=persistent.is_memory),
                           **persistent.fields()) as event:
            event["bytes"] = path.stat().st_size
            landed[spec.path] = (event["bytes"], checksum_file(path, options))
    return landed
