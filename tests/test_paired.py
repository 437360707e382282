"""The paired replay inside a job (benchmarks.paired, real fio): what it replays and records, and what it leaves
alone. The efficiency and io_gap rows made from its records are test_benchtables'."""

from __future__ import annotations

import contextlib
import json

import pytest

from conftest import require_tool
from cycleio.benchmarks import paired
from cycleio.benchmarks.paired import MAX_READ_LOOPS, PairedReplay, read_loops, write_copies
from cycleio.records import RecordLog
from cycleio.config.tierspec import Tier
from cycleio.storage.tiers import TierSite

MiB = 2**20
T0 = 1_800_000_000.0


# ------------------------------------------------------------------------------- the replay itself

@pytest.mark.integration
@pytest.mark.tool
def test_paired_replay_repeats_the_steps_reads_and_writes_with_fio(tmp_path):
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="fcst")
    for op, nbytes, transfers in (("write", 300_000, 5), ("write", 100_000, 2), ("read", 50_000, 1)):
        records.add(phase="run", op=op, bytes=nbytes, seconds=0.1, transfers=transfers,
                    cached_fraction=1.0 if op == "read" else None, **site.fields())
    folder = site.root / ".replay.fcst"
    PairedReplay(repetitions=2, transfer_size_bytes=65536, max_files=10, min_bytes=0, min_seconds=0).run(
        "fcst", records, site, folder, tmp_path / "raw", "[test]")
    replays = [r for r in records.records if r.phase == "replay"]
    timed = [(r.op, r.repetition) for r in replays if r.op != "wall"]
    assert timed == [("read", 0), ("write", 0), ("read", 1), ("write", 1)]  # in the step's order, each repetition
    writes = [r for r in replays if r.op == "write"]
    assert {r.bytes for r in writes} == {2 * 196608} and all(r.seconds > 0 and r.tool == "fio" for r in writes)
    assert all(r.cached_fraction == 1.0 for r in replays if r.op == "read")  # warm, as the step's were
    [wall] = [r for r in replays if r.op == "wall"]
    assert wall.t_start <= min(r.t_start for r in writes) and wall.seconds >= sum(r.seconds for r in replays
                                                                                   if r.op != "wall")
    # each write repetition lands new files in a folder of its own; all are gone when the replay ends
    # even repetitions write new files, odd ones where the last repetition's files were (deleted first): the band spans
    # the two page states (see benchmarks.paired); all are gone when the replay ends
    assert [r.file for r in writes] == ["new files", "rewritten files"]
    folders = [json.loads((tmp_path / "raw" / f"fcst-write.rep{rep}.meta.json").read_text())["cwd"] for rep in (0, 1)]
    assert folders[0] != folders[1] and not folder.exists()


def test_reads_of_pages_in_memory_are_read_again_until_long_enough_to_time_and_reads_from_storage_once():
    assert read_loops({"cold": False}, step_s=0.1, min_seconds=0.05) == 2
    assert read_loops({"cold": False}, step_s=0.25, min_seconds=0.05) == 1
    assert read_loops({"cold": False}, step_s=0.001, min_seconds=0.05) == MAX_READ_LOOPS
    assert read_loops({"cold": True}, step_s=0.01, min_seconds=0.05) == 1


def test_a_short_write_is_replayed_as_more_files_of_its_sizes_until_long_enough_to_time():
    assert write_copies(step_s=0.12, min_seconds=0.05) == 2
    assert write_copies(step_s=0.25, min_seconds=0.05) == 1
    assert write_copies(step_s=0.001, min_seconds=0.05) == MAX_READ_LOOPS


@pytest.mark.tool
def test_a_write_replay_of_a_short_step_writes_its_files_over_as_new_ones(tmp_path):
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="post")
    records.add(phase="run", op="write", bytes=4 * MiB, t_start=T0, seconds=0.12, transfers=4, **site.fields())
    PairedReplay(repetitions=1, min_bytes=0, min_seconds=0.05).run("post", records, site, site.root / ".r",
                                                                  tmp_path / "raw", "[t]")
    [write] = [r for r in records.records if r.phase == "replay" and r.op == "write"]
    assert write.bytes == 2 * 4 * MiB and write.n_files == 2 and write.transfers == 8
    log = [line.split() for line in (tmp_path / "raw" / "post-write.rep0.iolog").read_text().splitlines()[1:]]
    assert [line[0] for line in log if line[1] == "sync"] == ["replay.0.0", "replay.0.1"]
    assert sum(int(line[3]) for line in log if line[1] == "write") == 2 * 4 * MiB


def replayed_reads(tmp_path, seconds: float, cached_fraction: float, repetitions: int) -> list:
    """The replay records of a post step that read 4 MiB in ``seconds`` (min_seconds 0.05), with real fio."""
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="post")
    records.add(phase="run", op="read", bytes=4 * MiB, t_start=T0, seconds=seconds, transfers=4,
                cached_fraction=cached_fraction, **site.fields())
    PairedReplay(repetitions=repetitions, min_bytes=0, min_seconds=0.05).run("post", records, site, site.root / ".r",
                                                                            tmp_path / "raw", "[t]")
    return [r for r in records.records if r.phase == "replay" and r.op == "read"]


@pytest.mark.integration
@pytest.mark.tool
def test_a_warm_read_replay_reads_its_files_again_and_keeps_the_rate(tmp_path):
    """Every file read again in the iolog: the record holds every pass's bytes and seconds, so its MiB/s is one
    pass's."""
    [read] = replayed_reads(tmp_path, seconds=0.12, cached_fraction=1.0, repetitions=1)
    assert read.bytes == 2 * 4 * MiB and read.transfers == 8  # two passes: 0.12 s of step is under four times 0.05 s
    log = [line.split() for line in (tmp_path / "raw" / "post-read.rep0.iolog").read_text().splitlines()[1:]]
    assert [line[0] for line in log if line[1] == "open"] == ["replay.0.0", "replay.0.0"]


@pytest.mark.integration
@pytest.mark.tool
def test_the_files_a_read_replays_are_laid_out_once_for_every_repetition(tmp_path):
    reads = replayed_reads(tmp_path, seconds=0.2, cached_fraction=0.0, repetitions=3)
    assert [r.repetition for r in reads] == [0, 1, 2] and {r.file for r in reads} == {"files from storage"}
    assert sorted(p.name for p in (tmp_path / "raw").glob("*.layout.json")) == ["post-read.rep0.layout.json"]


@pytest.mark.tool
def test_a_read_replays_the_steps_own_files_where_they_still_are(tmp_path):
    """Nothing laid out: fio reads the files the step read (a name with a colon too), each whole at the step's
    transfer size (its last call what is left; a file smaller than that in one call), and leaves them as they
    were."""
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="anal")
    inputs = {"obs/a.nc": 3 * MiB + 5, "obs/b:c.nc": 5 * MiB, "obs/tiny.txt": 100}
    for name, nbytes in inputs.items():
        path = site.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(range(256)) * (nbytes // 256) + bytes(nbytes % 256))
        records.add(phase="run", op="read", file=name, bytes=nbytes, t_start=T0, seconds=0.2, transfers=8,
                    cached_fraction=0.0, **site.fields())
    before = {name: (site.root / name).read_bytes() for name in inputs}
    PairedReplay(repetitions=2, min_bytes=0, min_seconds=0).run("anal", records, site, site.root / ".replay",
                                                                tmp_path / "raw", "[t]")
    reads = [r for r in records.records if r.phase == "replay" and r.op == "read"]
    assert [r.repetition for r in reads] == [0, 1] and {r.file for r in reads} == {"files from storage"}
    assert all(r.bytes == sum(inputs.values()) for r in reads)
    assert not list((tmp_path / "raw").glob("*.layout.json"))
    log = [line.split() for line in (tmp_path / "raw" / "anal-read.rep0.iolog").read_text().splitlines()[1:]]
    assert sorted(line[0] for line in log if line[1] == "open") == ["a.nc", "b:c.nc", "tiny.txt"]
    assert json.loads((tmp_path / "raw" / "anal-read.rep0.meta.json").read_text())["cwd"] == str(site.root / "obs")
    assert max(int(line[3]) for line in log if line[1] == "read") > 100_000
    assert {name: (site.root / name).read_bytes() for name in inputs} == before
    # their pages dropped before each read starts, outside fio's timed runtime (as the step's were before its run)
    evicts = [r for r in records.records if r.phase == "replay" and r.op == "evict"]
    assert len(evicts) == 2 and all(r.n_files == 3 for r in evicts)
    assert all(e.t_start + e.seconds <= r.t_start for e, r in zip(evicts, reads))


@pytest.mark.tool
def test_a_step_file_that_fios_iolog_cannot_name_leaves_the_rows_not_timed_and_the_job_whole(tmp_path, caplog):
    """A name with white space (fio's iolog reads names up to a space): no replay records but the wall, a warning
    that says why, and the step's files as they were."""
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="anal")
    for name in ("obs/a b.nc", "obs/c.nc"):
        (site.root / name).parent.mkdir(parents=True, exist_ok=True)
        (site.root / name).write_bytes(b"x" * MiB)
        records.add(phase="run", op="read", file=name, bytes=MiB, t_start=T0, seconds=0.2, transfers=1,
                    cached_fraction=0.0, **site.fields())
    PairedReplay(repetitions=2, min_bytes=0, min_seconds=0).run("anal", records, site, site.root / ".replay",
                                                                tmp_path / "raw", "[t]")
    assert [r.op for r in records.records if r.phase == "replay"] == ["wall"]
    assert "no paired replay of anal, its rows stay not timed" in caplog.text and "a b.nc" in caplog.text
    assert (site.root / "obs" / "a b.nc").read_bytes() == b"x" * MiB


def test_reads_or_writes_too_little_to_time_are_not_replayed(tmp_path):
    """No fio runs for them (the row could not be timed anyway); the job still says it was paired."""
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="prep")
    records.add(phase="run", op="write", bytes=300_000, t_start=T0, seconds=0.001, transfers=1, **site.fields())
    PairedReplay(fio_path="no-such-fio").run("prep", records, site, site.root / ".replay", tmp_path / "raw", "[t]")
    assert [(r.phase, r.op) for r in records.records] == [("run", "write"), ("replay", "wall")]


def test_a_tier_without_room_for_the_replay_leaves_the_step_alone(tmp_path, monkeypatch):
    from cycleio.config.tierspec import TierError

    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="fcst")
    records.add(phase="run", op="write", bytes=64 * MiB, t_start=T0, seconds=0.5, transfers=8, **site.fields())

    def full(nbytes, what):
        raise TierError(f"tier 'disk': {what} needs {nbytes} bytes but only 0 are free")

    monkeypatch.setattr(site, "require_space", full)
    PairedReplay().run("fcst", records, site, site.root / ".replay", tmp_path / "raw", "[t]")
    assert [(r.phase, r.op) for r in records.records] == [("run", "write"), ("replay", "wall")]


def test_a_job_without_a_paired_replay_gets_none():
    assert PairedReplay.from_settings({}) is None
    assert PairedReplay.from_settings({"repetitions": 3}).repetitions == 3


@pytest.mark.tool
def test_a_rewrite_repetition_survives_a_tier_that_let_the_last_ones_files_go(tmp_path, monkeypatch):
    """make_room removes kept replay folders when the tier is short of room; the rewrite repetition then finds its
    predecessor's folder gone already, and goes on."""
    import shutil

    import cycleio.benchmarks.paired as paired

    require_tool("fio", "the paired replay runs fio")

    def no_room(kept, nbytes, path, memory):
        while kept:
            shutil.rmtree(kept.pop(0), ignore_errors=True)

    monkeypatch.setattr(paired, "make_room", no_room)
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="fcst")
    records.add(phase="run", op="write", bytes=300_000, t_start=T0, seconds=0.1, transfers=5, **site.fields())
    PairedReplay(repetitions=2, transfer_size_bytes=65536, min_bytes=0, min_seconds=0).run(
        "fcst", records, site, site.root / ".replay", tmp_path / "raw", "[t]")
    assert [r.file for r in records.records if r.phase == "replay" and r.op == "write"] == ["new files",
                                                                                          "rewritten files"]


@pytest.mark.tool
def test_writes_to_a_memory_tier_of_a_probed_machine_are_not_replayed(tmp_path, monkeypatch):
    """Their reference would not be fair (report.pairedreference.reference_fair), so none is measured: on a machine
    that hands freed memory to its host the replay does not write to a memory tier; elsewhere it does."""
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="shm", kind="memory", path=str(tmp_path / "shm")), "s", "a")
    for measurable, replayed in ((True, set()), (False, {"write"})):
        monkeypatch.setattr(paired, "fresh_pages_measurable", lambda: measurable)
        records = RecordLog(study="s", arm="a", cycle="2026010100", step="post")
        records.add(phase="run", op="write", bytes=64 * MiB, t_start=T0, seconds=0.3, transfers=64, **site.fields())
        PairedReplay(repetitions=2, min_bytes=0, min_seconds=0.05).run("post", records, site, site.root / ".r",
                                                                       tmp_path / f"raw{measurable}", "[t]")
        assert {r.op for r in records.records if r.phase == "replay"} == {"wall"} | replayed, measurable


def test_a_new_file_repetition_meets_its_steps_share_of_fresh_pages(tmp_path, monkeypatch):
    """On a machine that hands freed memory back, a new-file write repetition meets no more fresh pages than its
    step did, those the reads just before it freed held while it runs (hostmemory.fresh_pages_held); a rewrite
    meets the pages its delete just freed, as it should."""
    require_tool("fio", "the paired replay runs fio")
    site = TierSite(Tier(name="disk", kind="posix", path=str(tmp_path / "tier")), "s", "a")
    held, probes = [], []

    @contextlib.contextmanager
    def hold(nbytes, share, margin):
        held.append(share)
        yield 4.0

    monkeypatch.setattr(paired, "fresh_pages_held", hold)
    monkeypatch.setattr(paired, "fresh_MiB", lambda: probes.append(1) or 60.0)
    records = RecordLog(study="s", arm="a", cycle="2026010100", step="post")
    for fresh in (2.0, 6.0, None):  # two probed 8 MiB files (one met 2 MiB of fresh pages, one 6) and a small one
        records.add(phase="run", op="write", bytes=8 * MiB if fresh else MiB, t_start=T0, seconds=0.3,
                    transfers=8, fresh_MiB=fresh, **site.fields())
    PairedReplay(repetitions=3, min_bytes=0, min_seconds=0.05).run("post", records, site, site.root / ".r",
                                                                   tmp_path / "raw", "[t]")
    writes = [r for r in records.records if r.phase == "replay" and r.op == "write"]
    assert [(r.file, r.fresh_MiB) for r in writes] == [("new files", 4.0), ("rewritten files", 60.0),
                                                       ("new files", 4.0)]
    assert held == [pytest.approx(8 / 17)] * 2 and len(probes) == 1


def test_a_steps_share_of_fresh_pages_counts_each_file_up_to_its_size():
    from cycleio.records import Record

    def write(nbytes, fresh):
        return Record(study="s", arm="a", cycle="c", step="fcst", phase="run", op="write", tier="d", tier_kind="posix",
                      fs_type="ext4", bytes=nbytes,
                      fresh_MiB=fresh)

    assert paired.step_fresh_share([write(4 * MiB, 10.0), write(4 * MiB, 0.0)]) == pytest.approx(0.5)
    assert paired.step_fresh_share([write(MiB, None)]) is None  # nothing probed: nothing to match
    assert paired.step_fresh_share([]) is None
