"""benchmarks.tools.ior: IOR's command lines, its size spelling, and its 8-byte size rules checked when the
config is loaded."""

from __future__ import annotations

import json

import pytest

from conftest import IOR_OUTPUTS, with_changes
from cycleio.benchmarks.specs import IOPattern
from cycleio.benchmarks.tools import ior
from cycleio.config.settings import ConfigError
from cycleio.config.sizes import parse_size
from cycleio.workflow.study import load_study


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"benchmarks__patterns__easy__transfer_size": 1001, "benchmarks__patterns__easy__block_size": 1001},
         r"config key 'benchmarks.patterns.easy.transfer_size': 1001 bytes is not a multiple of 8 bytes, "
         r"as IOR requires"),
        ({"benchmarks__patterns__hard__transfer_size": "47004", "benchmarks__patterns__hard__block_size": "47004"},
         r"config key 'benchmarks.patterns.hard.transfer_size': 47004 bytes is not a multiple of 8 bytes"),
        ({"benchmarks__patterns__easy__block_size": "3m"},
         r"config key 'benchmarks.patterns.easy.block_size': 3145728 bytes is not a multiple of transfer_size "
         r"\(2097152 bytes\), as IOR requires"),
        ({"benchmarks__replay__transfer_size": 1001},
         r"config key 'benchmarks.replay.transfer_size': 1001 bytes is not a multiple of 8 bytes, as IOR requires"),
    ],
)
def test_iors_size_rules_are_checked_when_the_config_is_loaded(default_config, changes, message):
    with pytest.raises(ConfigError, match=message):
        load_study(with_changes(default_config, **changes))


def test_sizes_iors_rules_allow_are_accepted(default_config):
    from cycleio.benchmarks.tierbench import BenchmarkPlan

    config = with_changes(default_config, benchmarks__patterns__easy__transfer_size="47008",
                          benchmarks__patterns__easy__block_size=47008 * 10, benchmarks__replay__transfer_size="64k")
    filled, _ = load_study(config)
    plan = BenchmarkPlan.from_config(filled)
    tier, pattern, tasks = next(point for point in plan.point_list("io") if point[1] == "easy")
    easy = plan.settings("io", tier, pattern, tasks).io_pattern()
    # a multiple of 8 bytes but of no power of two, and a block of whole transfers: IOR runs them as given
    assert (easy.transfer_size_bytes, easy.block_size_bytes) == (47008, 470080)
    assert plan.replay and filled["benchmarks"]["replay"]["transfer_size"] == "64k"


@pytest.mark.parametrize("nbytes, spelled", [(2**30, "1g"), (3 * 2**20, "3m"), (4096, "4k"), (47008, "47008"),
                                             (1536 * 2**10, "1536k"), (8, "8")])
def test_sizes_are_spelled_as_ior_reads_them(nbytes, spelled):
    assert ior.spell_size(nbytes) == spelled
    assert parse_size(spelled, "t") == nbytes  # and read back to the same bytes
    assert nbytes % ior.WORD_BYTES == 0


def test_a_random_shared_file_pattern_with_odirect_and_random_reorder(tmp_path):
    pattern = IOPattern(name="x", api="MPIIO", file_per_proc=False, transfer_size_bytes=2**20,
                        block_size_bytes=4 * 2**20, segments=1, fsync=False, reorder="random", random=True,
                        direct_io=True, stonewall_s=0)
    argv = ior.command("ior", pattern, 2, 1, tmp_path / "f", tmp_path / "s.json", "mpiexec -n {ntasks}")
    assert argv[argv.index("ior"):] == ["ior", "-a", "MPIIO", "-z", "-w", "-r", "-t", "1m", "-b", "4m", "-Z", "-i",
                                        "1", "--posix.odirect", "-o", str(tmp_path / "f"), "-O",
                                        "summaryFormat=JSON", "-O", f"summaryFile={tmp_path / 's.json'}"]
    assert argv[1:3] == ["-n", "2"] and "-F" not in argv and "-e" not in argv and "-s" not in argv


def test_the_replay_writes_one_file_per_repetition_and_reads_back_only_when_asked(tmp_path):
    write = ior.replay_command("ior", 5, 3 * 2**20, 2**20, tmp_path / "r", tmp_path / "s.json", "mpiexec -n {ntasks}")
    assert write[1:3] == ["-n", "1"]
    words = write[write.index("ior"):]
    assert words[:9] == ["ior", "-a", "POSIX", "-w", "-t", "1m", "-b", "3m", "-e"] and "-r" not in words
    assert words[9:12] == ["-m", "-i", "5"]
    read = ior.replay_command("ior", 5, 3 * 2**20, 2**20, tmp_path / "r", tmp_path / "s.json", "mpiexec -n {ntasks}",
                              read=True)
    assert read[read.index("-w") + 1] == "-r"


def test_a_phase_the_deadline_ended_counts_the_bytes_iors_bandwidth_says_it_moved(tmp_path):
    """Stonewalled, IOR's blockKiB is what each task would have moved, not what it did: bandwidth x time is."""
    data = json.loads((IOR_OUTPUTS / "posix-fpp-1rank-disk.json").read_text())
    test = data["tests"][0]
    test["Parameters"]["deadlineForStonewall"] = 1
    for result in test["Results"]:
        result["totalTime"] = round(result["totalTime"] / 4, 4)  # a quarter of the blocks in a quarter of the time
    path = tmp_path / "stonewalled.json"
    path.write_text(json.dumps(data))
    reps = [row for row in ior.parse_json(path) if row["aggregate"] == "rep"]
    assert {row["stonewall_s"] for row in reps} == {1}
    for row, result in zip(reps, test["Results"]):
        assert row["bytes"] == round(result["bwMiB"] * 2**20 * result["totalTime"])
        assert row["bytes"] == pytest.approx(64 * 2**20, rel=0.01)
