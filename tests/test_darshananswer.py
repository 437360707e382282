"""The replay jobs' answer (report/darshananswer.py): their manifests to tables/replay_jobs.csv, and summary.md's lines."""

from __future__ import annotations

import json

from cycleio.benchmarks.threshold import TimedThreshold
from cycleio.report.darshananswer import replay_markdown, replay_table


def manifest(tmp_path, arm, cycle, io_s, paired=False, step="darshan_ior"):
    times = {"read_s": io_s / 4, "write_s": io_s / 2, "meta_s": io_s / 4, "io_s": io_s}
    path = tmp_path / f"{arm}.{cycle}.{step}.manifest.json"
    path.write_text(json.dumps({
        "study": "s", "arm": arm, "cycle": cycle, "step": step,
        "provenance": {"tiers": {"scratch": {"tier": arm, "fs_type": "tmpfs"}},
                       "darshan": {"log": "/logs/ior.darshan", "log_ranks": 4, "ranks": 2, "scale": 0.1,
                                   "timing": "io", "layer": "posix", "fs_type": "tmpfs", "paired": paired,
                                   "logged_slowest_rank": {"rank": 0, "read_s": 1.0, "write_s": 2.0, "meta_s": 0.5,
                                                           "io_s": 3.5},
                                   "replay": {**times, "launch_wall_s": 1.2},
                                   "fidelity": {"read": {"logged_bytes": 1000, "logged_ops": 10, "expected_bytes": 100,
                                                         "replayed_bytes": 100, "replayed_ops": 10},
                                                "write": {"logged_bytes": 0, "logged_ops": 0, "expected_bytes": 0,
                                                          "replayed_bytes": 0, "replayed_ops": 0}}}}}))
    return path


def test_one_row_per_replay_job_and_a_line_per_job_with_the_median_per_arm(tmp_path):
    other = tmp_path / "fcst.manifest.json"
    other.write_text(json.dumps({"study": "s", "arm": "shm", "cycle": "2026010100", "step": "fcst",
                                 "provenance": {"tiers": {}}}))
    paths = [manifest(tmp_path, "shm", c, s) for c, s in (("2026010100", 0.1), ("2026010106", 0.3),
                                                         ("2026010112", 0.2))]
    paths.append(manifest(tmp_path, "lustre", "2026010100", 0.4, paired=True))
    table = replay_table([other, *paths])
    assert len(table) == 4 and list(table["tier"]) == ["shm", "shm", "shm", "lustre"]
    assert table["logged_io_s"].tolist() == [3.5] * 4 and table["replay_launch_wall_s"].tolist() == [1.2] * 4
    assert table[["logged_read_bytes", "logged_read_ops", "expected_read_bytes", "replayed_read_bytes",
                  "replayed_read_ops", "replayed_write_bytes"]].iloc[0].tolist() == [1000, 10, 100, 100, 10, 0]
    [line] = [line for line in replay_markdown(table) if line.startswith("- ")]
    assert line.startswith("- darshan_ior (ior.darshan, 4 ranks): its I/O took 3.5 s where it was logged (read 1.0 s, "
                           "write 2.0 s, metadata 0.5 s); at scale 0.1 with 2 ranks (timing io), on arm lustre (tier "
                           "lustre, tmpfs) 0.4 s (read 0.1 s, write 0.2 s, metadata 0.1 s; 1 cycle); on arm shm "
                           "(tier shm, tmpfs) 0.2 s (read 0.05 s, write 0.1 s, metadata 0.05 s; 3 cycles)")
    assert line.endswith("its efficiency (fio paired with it) is in tables/efficiency.csv for 1 of its 4 jobs.")
    assert replay_markdown(replay_table([other])) == []


def test_a_replay_too_short_to_time_says_so_and_long_times_read_easily(tmp_path):
    """The darshan study's dxt.darshan at scale 0.01: the replay took 0.0002 s of I/O, which times the call, not the
    tier; the logged job's 11,220.4 s read as such, not as 1.122e+04 s."""
    table = replay_table([manifest(tmp_path, "shm", "2026010100", 0.0002)]).assign(logged_io_s=11220.4)
    [line] = [line for line in replay_markdown(table) if line.startswith("- ")]
    assert "its I/O took 11,220.4 s where it was logged" in line
    assert ("on arm shm (tier shm, tmpfs) too short to time (0.0002 s of I/O, under benchmarks.replay.min_seconds "
            "0.05 s: a larger scale times it; 1 cycle)") in line
    [longer] = [line for line in replay_markdown(table, TimedThreshold(min_seconds=0.0001)) if line.startswith("- ")]
    assert "on arm shm (tier shm, tmpfs) 0.0002 s (read" in longer
