"""The operational GDAS tarballs of one cycle, as the members cycleio's own inventory writes.

The facts (which file goes in which tarball) are the global workflow's archive lists, NOAA-EMC/global-workflow
``parm/archive/gdas.yaml.j2``, ``gdas_restarta.yaml.j2`` and ``gdas_restartb.yaml.j2`` (read in 2026):

- ``gdas.tar``: the analysis statistics of a cycled run (gsistat, cnvstat, oznstat, radstat) and, for every
  3rd forecast hour 000..FHMAX, the 0.25 and 1.0 degree pgrb2 files with their ``.idx``, ``sfluxgrbfFFF.grib2``,
  the FV3 log ``atm.logfFFF.txt`` and the raw netCDF history ``atmfFFF.nc``, ``sfcfFFF.nc``;
- ``gdas_restarta.tar``: the analysis increments (``atminc.nc``, ``atmiFFF.nc`` of IAU), the six surface
  analysis tiles, the bias files (abias, abias_air, abias_pc, abias_int), radstat, cnvstat, ``dtfanl.nc`` and
  the BUFR inputs (nsstbufr, prepbufr, prepbufr.acft_profiles);
- ``gdas_restartb.tar``: the surface analysis tiles and the forecast's restart sets (fv_core.res,
  fv_srf_wnd.res, fv_tracer.res, phy_data, sfc_data per tile, ca_data with cellular automata on, coupler.res and
  fv_core.res.nc) at every restart hour of the cycle.

What the lists name and cycleio does not write (logs of the workflow's jobs, the analysis GRIB2 and netCDF
``atmanl``/``sfcanl``, ``loginc.txt``, monitoring files, ``sfluxgrbfFFF.grib2.idx``) is left out; what cycleio writes
and no list names (``master.grb2fFFF``, the 1-hourly history between the 3-hourly ones) is not archived, as in
operations. The members are chosen here from the inventory (inventory.step_io), so they follow its names.

The ensemble's tarballs are written by jobs of their own, one ``earcNN`` per group of members (global-workflow's
``enkfgdas_earcNN``, ``parm/archive/master_enkf.yaml.j2``: members ``(NN - 1) * NMEM_EARCGRP + 1`` to
``NN * NMEM_EARCGRP``). Of their lists cycleio writes members of one only, ``enkf_grp.yaml.j2``
(``enkfgdas_grpNN.tar``): per member of the group its ``atmf003.nc``, ``atmf006.nc``, ``atmf009.nc`` (every 3 h
from 3 to 9) and ``sfcf006.nc`` (only the 6-hour surface forecast); the members' ``gsistat`` and ``ratminc.nc``
are not written by cycleio. ``enkf.yaml.j2`` (``enkfgdas.tar``, group 00: the ensemble jobs' logs, mean and
spread, ``enkfstat``) and ``enkf_restarta_grp``/``enkf_restartb_grp`` (bias files, increments, surface analyses,
restarts per member) name nothing cycleio writes, so they have no job and no tarball here.
"""

from __future__ import annotations

import re
from typing import Callable

from ..config.calendar import ensemble_archive_jobs, is_half_cycle, member_groups, steps_of_cycle
from ..config.forecast import ForecastSettings
from ..storage.archive import ArchiveLimits, plan_tarball
from .grid import Grid
from .inventory import FileSpec, step_io
from .kinds import expected_bytes

TARBALLS = ("gdas", "gdas_restarta", "gdas_restartb")

_HOURLY = re.compile(
    r"\.(?:pgrb2\.(?:0p25|1p00)\.f(?P<a>\d{3})(?:\.idx)?|sfluxgrbf(?P<b>\d{3})\.grib2|atm\.logf(?P<c>\d{3})\.txt"
    r"|(?:atm|sfc)f(?P<d>\d{3})\.nc)$")
_ANALYSIS_STATS = re.compile(r"\.(?:gsistat|cnvstat|oznstat|radstat)$")
_RESTARTA = re.compile(r"\.(?:atminc\.nc|atmi\d{3}\.nc|abias|abias_air|abias_pc|abias_int|radstat|cnvstat|dtfanl\.nc"
                       r"|nsstbufr|prepbufr|prepbufr\.acft_profiles)$")
_SFCANL = re.compile(r"\.sfcanl_data\.tile\d\.nc$")
_RESTART = re.compile(r"/restart/\d{8}\.\d{6}\.(?:(?:fv_core\.res|fv_srf_wnd\.res|fv_tracer\.res|phy_data|sfc_data"
                      r"|ca_data)\.tile\d\.nc|coupler\.res|fv_core\.res\.nc)$")


def _gdas(path: str) -> bool:
    if _ANALYSIS_STATS.search(path):
        return True
    hourly = _HOURLY.search(path)
    if not hourly:
        return False
    hour = int(next(value for value in hourly.groupdict().values() if value))
    return hour % 3 == 0  # range(0, FHMAX + 1, 3): the forecast writes no hour past FHMAX


SELECTS: dict[str, Callable[[str], bool]] = {
    "gdas": _gdas,
    "gdas_restarta": lambda path: bool(_RESTARTA.search(path) or _SFCANL.search(path)),
    "gdas_restartb": lambda path: bool(_SFCANL.search(path) or _RESTART.search(path)),
}


# enkf_grp.yaml.j2: a member's atmf003/006/009.nc and sfcf006.nc, under enkfgdas.YYYYMMDD/HH/memNNN/
_ENKF_GRP = re.compile(r"/mem(?P<member>\d{3})/model/atmos/history/[^/]*\.(?:atmf00[369]|sfcf006)\.nc$")


def tarballs_of(path: str, tarballs=TARBALLS) -> list[str]:
    """The arch job's tarballs a file of a cycle goes in (radstat and cnvstat go in two), by its path in the
    inventory; the ensemble's files (``enkfgdas.*``) go in none of them, but in the earc jobs' tarballs."""
    if path.startswith("enkf"):
        return []
    return [name for name in tarballs if SELECTS[name](path)]


def in_ensemble_tarball(path: str) -> bool:
    """Whether a file of a cycle goes in its member's group's ``enkfgdas_grpNN.tar`` (the enkf_grp list)."""
    return bool(_ENKF_GRP.search(path))


def cycle_writes(cycle: str, start: str, settings: ForecastSettings) -> list[FileSpec]:
    """Every file the cycle's deterministic steps write on the persistent tier, in the order they write them."""
    seen: dict[str, FileSpec] = {}
    for step in steps_of_cycle(cycle, start):
        for spec in step_io(step, cycle, start, settings).writes:
            seen.setdefault(spec.path, spec)
    return list(seen.values())


def tarball_members(cycle: str, start: str, settings: ForecastSettings,
                    tarballs: tuple[str, ...] | list[str] = TARBALLS) -> dict[str, list[FileSpec]]:
    """Per tarball (``gdas``, ``gdas_restarta``, ``gdas_restartb``), the files of the cycle it holds; a tarball
    with no member in this cycle (restarta of the half cycle, which has no analysis) is left out."""
    unknown = [name for name in tarballs if name not in SELECTS]
    if unknown:
        raise ValueError(f"unknown tarball {unknown[0]!r}; expected one of: {', '.join(TARBALLS)}")
    writes = cycle_writes(cycle, start, settings)
    chosen = {name: [spec for spec in writes if SELECTS[name](spec.path)] for name in tarballs}
    return {name: specs for name, specs in chosen.items() if specs}


def ensemble_members(cycle: str, start: str, settings: ForecastSettings, group: range) -> list[FileSpec]:
    """``enkfgdas_grpNN.tar``: the files of the group's members the enkf_grp list names, in the order the ensemble
    forecast jobs write them."""
    specs = []
    for job in settings.ensemble_jobs if not is_half_cycle(cycle, start) else ():
        for spec in step_io(job, cycle, start, settings).writes:
            found = _ENKF_GRP.search(spec.path)
            if found and int(found["member"]) in group:  # group: the earc job's members
                specs.append(spec)
    return specs


def archive_jobs(settings, cycle: str) -> list[str]:
    """The archive jobs of a cycle of an arm (``settings``: an ArmSettings with archive settings): ``arch`` and, in a
    full cycle with an ensemble, one ``earcNN`` per group of ``archive.members_per_group`` members."""
    if not settings.archive:
        return []
    forecast = settings.forecast
    if is_half_cycle(cycle, settings.start) or not forecast.members:
        return ["arch"]
    return ["arch", *ensemble_archive_jobs(forecast.members, forecast.members_per_job,
                                           settings.archive["members_per_group"])]


def job_tarballs(job: str, cycle: str, settings) -> dict[str, list[FileSpec]]:
    """Per tarball of one archive job (``arch`` or ``earcNN``) of a cycle, its members; a tarball with no member in
    this cycle is left out. ``settings``: an ArmSettings (its start, forecast and archive settings)."""
    if job == "arch":
        return tarball_members(cycle, settings.start, settings.forecast, settings.archive["tarballs"])
    groups = member_groups(settings.forecast.members, settings.archive["members_per_group"], "earc")
    if job not in groups:
        raise ValueError(f"arm {settings.arm} has no archive job {job!r}; its earc jobs: {', '.join(groups) or 'none'}")
    members = ensemble_members(cycle, settings.start, settings.forecast, groups[job])
    return {f"enkfgdas_grp{job[4:]}": members} if members else {}


def expected_members(cycle: str, settings, job: str = "arch") -> dict[str, list[tuple[str, int]]]:
    """Per tarball of an archive job, (member path, expected bytes at the arm's resolution) from the inventory.
    ``settings``: an ArmSettings (its start, forecast, resolution, levels, compression, archive)."""
    grid = Grid(settings.resolution, settings.levels)
    return {name: [(spec.path, expected_bytes(spec, grid, settings.compression)) for spec in specs]
            for name, specs in job_tarballs(job, cycle, settings).items()}


def cycle_expected_members(cycle: str, settings) -> dict[str, list[tuple[str, int]]]:
    """Every tarball of every archive job of a cycle, as :func:`expected_members`."""
    return {name: members for job in archive_jobs(settings, cycle)
            for name, members in expected_members(cycle, settings, job).items()}


def archive_limits(archive: dict) -> ArchiveLimits:
    """The limits of an arm's archive settings (config.settings.archive_settings)."""
    return ArchiveLimits(archive["max_member_bytes"], archive["max_tarball_bytes"], archive["split"])


def plan_cycle(settings, cycle: str, job: str | None = None) -> dict[str, list[tuple[str, list[tuple[str, int]]]]]:
    """Per tarball of an archive job (None: of all the cycle's archive jobs), its file names and members (expected
    bytes) at the arm's resolution, under the archive's limits (storage.archive.plan_tarball: ArchiveLimitError
    naming tarball and member)."""
    limits = archive_limits(settings.archive)
    members = cycle_expected_members(cycle, settings) if job is None else expected_members(cycle, settings, job)
    return {name: plan_tarball(name, tarred, limits, cycle) for name, tarred in members.items()}


def check_archive_limits(study) -> list[str]:
    """Before any job: every arm's tarballs (arch's and the earc jobs') of the study's first two cycles (the half
    cycle and a full one: the later ones hold the same files) under the archive's limits; one note per tarball
    split into parts.
    ``study``: a config.settings.Study."""
    notes = []
    for arm in study.arms.values():
        if not arm.archive:
            continue
        for cycle in study.cycles[:2]:
            for name, parts in plan_cycle(arm, cycle).items():
                if len(parts) > 1:
                    notes.append(f"arm {arm.arm}: {name}.tar of cycle {cycle} splits into {len(parts)} parts "
                                 f"under archive.max_tarball_bytes (archive.split: true)")
    return notes
