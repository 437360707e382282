"""benchmarks.tools.mdtest: its command line for a metadata pattern, and the files it says it does not read."""

from __future__ import annotations

from pathlib import Path

from cycleio.benchmarks.specs import MetadataPattern
from cycleio.benchmarks.tools import mdtest

DATA = Path(__file__).parent / "data" / "ior"


def test_one_repetition_on_files_with_the_rate_and_time_tables(tmp_path):
    argv = mdtest.command("/opt/mdtest", MetadataPattern(name="m", files_per_task=500, unique_dir=False,
                                                         file_size_bytes=0), 3, tmp_path / "md", "srun -n {ntasks}")
    assert argv == ["srun", "-n", "3", "/opt/mdtest", "-n", "500", "-i", "1", "-d", str(tmp_path / "md"), "-F", "-P",
                    "-N", "1"]


def test_a_folder_per_task_and_bytes_written_and_read_per_file(tmp_path):
    argv = mdtest.command("mdtest", MetadataPattern(name="m", files_per_task=10, unique_dir=True, file_size_bytes=4096),
                          1, tmp_path, "mpiexec -n {ntasks}")
    assert argv[argv.index("mdtest"):][-5:] == ["-u", "-w", "4096", "-e", "4096"]


def test_its_rank_details_csv_is_named_not_read_and_its_stdout_is_recognised():
    csv = (DATA / "mdtest-1rank-disk.mdtest.csv").read_text()
    assert mdtest.unsupported(csv) == "mdtest --saveRankPerformanceDetails CSV (parse mdtest's stdout instead)"
    assert not mdtest.guess_can_open(DATA / "mdtest-1rank-disk.mdtest.csv")
    assert mdtest.guess_can_open(DATA / "mdtest-1rank-disk.stdout.txt")
    assert mdtest.unsupported((DATA / "mdtest-1rank-disk.stdout.txt").read_text()) is None
    assert mdtest.version("mdtest") is None
