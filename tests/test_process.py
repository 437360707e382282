"""process: a command bounded in time ends with its whole tree, the MPI launcher's words from the template, and the
rank program importing the parent's cycleio."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from cycleio import process
from cycleio.process import (STALE_SEGMENT_S, StartupTimeout, last_lines, last_words, launcher_argv, package_folder,
                             rank_program, remove_orphan_segments, run_command, which)
from conftest import REPO


def test_a_command_runs_with_its_output_exit_code_and_folder(tmp_path):
    result = run_command(["sh", "-c", "pwd; echo oops >&2; exit 4"], timeout=30, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=tmp_path, text=True)
    assert (result.returncode, result.stdout.strip(), result.stderr) == (4, str(tmp_path), "oops\n")
    assert result.args == ["sh", "-c", "pwd; echo oops >&2; exit 4"]


def test_a_command_past_its_timeout_ends_with_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_command(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], timeout=1)
    assert time.monotonic() - t0 < 20
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the command's child is still running"
        time.sleep(0.05)


def test_a_command_that_does_not_start_in_its_time_ends_with_its_children_and_one_that_does_runs_on(tmp_path):
    pid_file, marker = tmp_path / "child.pid", tmp_path / "started"
    with pytest.raises(StartupTimeout):  # never says it started: ended after its start-up time, not its timeout
        run_command(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], timeout=120,
                    started=(marker.exists, 0.5))
    _, alive = psutil.wait_procs([psutil.Process(int(pid_file.read_text()))], timeout=30)
    assert not alive or alive[0].status() == psutil.STATUS_ZOMBIE
    # says it started (the marker), then runs past the start-up time to its end
    done = run_command(["sh", "-c", f"touch {marker}; sleep 1.5; exit 3"], timeout=120, started=(marker.exists, 0.5))
    assert done.returncode == 3


def test_a_command_that_cannot_start_raises_oserror():
    with pytest.raises(FileNotFoundError):
        run_command(["/no/such/program"], timeout=5)


def test_the_launcher_template_gives_the_words_for_n_tasks():
    assert launcher_argv("/opt/mpi/bin/mpiexec -n {ntasks} --bind-to none", 4) == [
        "/opt/mpi/bin/mpiexec", "-n", "4", "--bind-to", "none"]
    assert launcher_argv("srun --ntasks={ntasks}", 2)[1:] == ["--ntasks=2"]


@pytest.mark.parametrize("template, message", [
    ("mpiexec -n 4", "does not say how many tasks to start"),
    ("mpiexec -n {tasks}", "is not a valid template"),
    ("mpiexec -n '{ntasks}", "is not a valid template"),
])
def test_a_launcher_template_that_cannot_start_n_tasks_is_refused(template, message):
    with pytest.raises(ValueError, match=message):
        launcher_argv(template, 2)


def test_a_program_missing_from_path_is_found_beside_python(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    beside = os.path.join(os.path.dirname(sys.executable), "python")
    assert which("python") == beside
    assert which("no-such-program-anywhere") is None


def test_a_failed_runs_and_stale_orphan_segments_go_and_mapped_ones_stay(tmp_path, monkeypatch):
    import mmap

    orphan, mapped, older = (tmp_path / f"mpich_shm_{name}_0" for name in ("orphan", "mapped", "older"))
    older.write_bytes(b"\0" * 4096)
    time.sleep(1.1)  # past the second of slack the ctime check allows
    since = time.time()
    for path in (orphan, mapped):
        path.write_bytes(b"\0" * 4096)
    with open(mapped, "r+b") as handle, mmap.mmap(handle.fileno(), 4096) as _:
        removed = remove_orphan_segments(since, pattern=str(tmp_path / "mpich_shm_*"), settle_s=0.3)
        assert removed == [str(orphan)]
    assert not orphan.exists() and mapped.exists() and older.exists()
    assert remove_orphan_segments(time.time() + 60, pattern=str(tmp_path / "mpich_shm_*")) == []  # none made since
    # after a success only stale ones go: a run killed outright left them, unmapped, over a minute ago
    pattern = str(tmp_path / "mpich_shm_*")
    assert remove_orphan_segments(None, pattern=pattern) == []
    later = time.time() + STALE_SEGMENT_S + 5
    monkeypatch.setattr(time, "time", lambda: later)
    assert sorted(remove_orphan_segments(None, pattern=pattern)) == sorted([str(mapped), str(older)])


def test_a_failed_runs_segment_still_mapped_by_a_rank_that_ends_a_moment_later_goes(tmp_path):
    """An aborted run's ranks may outlive its launcher by a moment (more so on a busy machine), still mapping their
    segment when the launcher has ended: the cleanup looks again until they are gone."""
    segment = tmp_path / "mpich_shm_late_0"
    since = time.time()
    segment.write_bytes(b"\0" * 4096)
    holder = ("import mmap, sys, time\n"
              "with open(sys.argv[1], 'r+b') as f, mmap.mmap(f.fileno(), 4096):\n"
              "    print('mapped', flush=True); time.sleep(0.5)\n")
    rank = subprocess.Popen([sys.executable, "-c", holder, str(segment)], stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout.readline().strip() == "mapped"
        assert remove_orphan_segments(since, pattern=str(tmp_path / "mpich_shm_*")) == [str(segment)]
        assert not segment.exists()
    finally:
        rank.kill()
        rank.wait()


def test_an_aborted_mpi_run_leaves_no_shared_memory_segment(tmp_path):
    """MPICH's ranks remove their segment as they finalize; MPI_Abort skips that, run_command cleans up."""
    mpiexec = which("mpiexec")
    if mpiexec is None:
        pytest.fail("mpiexec not found: the mpich wheel (pip install mpich) provides it")
    before = set(os.listdir("/dev/shm"))
    abort = "from mpi4py import MPI; MPI.COMM_WORLD.Barrier(); MPI.COMM_WORLD.Abort(3)"
    result = run_command([mpiexec, "-n", "2", sys.executable, "-c", abort], timeout=120,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert result.returncode != 0, result.stdout

    def left() -> list[str]:
        return [name for name in set(os.listdir("/dev/shm")) - before if name.startswith("mpich_shm_")]

    # another test worker's MPI program may hold a segment of its own for a moment: it removes it as it ends, ours
    # would stay
    deadline = time.monotonic() + 30
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left() == []


def test_a_rank_program_from_the_checkout_imports_the_checkouts_package_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert package_folder() == REPO / "scripts"
    program = rank_program("cycleio.process", python=sys.executable)
    assert program.argv == [sys.executable, "-m", "cycleio.process"]
    assert program.env["PYTHONPATH"] == str(REPO / "scripts")
    probe = rank_program("cycleio", "study-name", str(REPO / "config" / "studies" / "smoke.yaml"))
    result = run_command(probe.argv, timeout=60, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                         env=probe.env, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "smoke"), result.stderr


def test_an_installed_package_needs_no_path_for_this_python_and_a_link_alone_for_another(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setattr(process, "_site_folders", lambda: {package_folder()})  # as if installed where it is
    assert rank_program("cycleio.darshan.rank").env["PYTHONPATH"] == "/elsewhere"
    other = str(tmp_path / "parallel" / "bin" / "python")
    with pytest.raises(ValueError, match="link to the package alone"):
        rank_program("cycleio.surrogates.forecast.rank", python=other)
    program = rank_program("cycleio.surrogates.forecast.rank", python=other, links=tmp_path)
    assert program.argv[0] == other and program.env["PYTHONPATH"] == f"{tmp_path}{os.pathsep}/elsewhere"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cycleio"]
    assert (tmp_path / "cycleio").resolve() == package_folder() / "cycleio"


def test_last_words_are_the_last_lines_of_the_first_file_that_has_any(tmp_path):
    empty, said = tmp_path / "stderr.txt", tmp_path / "stdout.txt"
    empty.write_text("\n  \n")
    said.write_text("".join(f"line {n}\n" for n in range(10)))
    assert last_lines(tmp_path / "missing.txt", empty, said, lines=2) == ["line 8", "line 9"]
    assert last_words(tmp_path / "missing.txt", empty, said) == " | ".join(f"line {n}" for n in range(4, 10))
    assert last_words(tmp_path / "missing.txt", empty) == "none"
