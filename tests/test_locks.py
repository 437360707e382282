"""workflow.locks: a run killed hard leaves Snakemake's lock: the next run removes it, never a live run's;
which processes keep the lock live is told from psutil's process table."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from cycleio.workflow.locks import _ancestors, live_processes, lock_files, orphaned_tools, remove_stale_lock

# The tests that start real Snakemake runs (a few seconds each) are e2e: in `make test`, not `make test-fast`.

SNAKEFILE = """
rule all:
    input: "slow.txt"

rule slow:
    output: "slow.txt"
    shell: "sleep 60; touch {output}"
"""


def start_run(workdir: Path) -> subprocess.Popen:
    snakemake = Path(sys.executable).parent / "snakemake"
    run = subprocess.Popen([str(snakemake), "--cores", "1", "--quiet"], cwd=workdir, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not lock_files(workdir):
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            pytest.fail("Snakemake did not start and lock its working directory")
        time.sleep(0.2)
    return run


@pytest.mark.e2e
def test_a_killed_runs_lock_is_removed_and_a_live_runs_is_kept(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    run = start_run(tmp_path)
    try:
        assert any(pid == run.pid for pid, _ in live_processes(tmp_path))
        with pytest.raises(RuntimeError, match=rf"still going \(pid {run.pid}"):
            remove_stale_lock(tmp_path, [])
        assert lock_files(tmp_path)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # as a lost node or `kill -9` would: no cleanup
        run.wait()
    assert lock_files(tmp_path), "a hard kill leaves the lock (else this test proves nothing)"
    assert "removed the lock" in remove_stale_lock(tmp_path, [])
    assert not lock_files(tmp_path)
    assert remove_stale_lock(tmp_path, []) == "no lock"
    dry = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "--quiet"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr


def writing_to(folder: Path) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if any(str(folder) in w for w in p.info["cmdline"] or [])]


@pytest.mark.e2e
def test_benchmark_tools_a_killed_run_left_behind_are_stopped_before_a_rerun(tmp_path):
    """fio's job processes are session leaders: a kill of the run's process group leaves them waiting."""
    raw = tmp_path / "results" / "s" / "bench" / "disk" / "replay.raw"
    raw.mkdir(parents=True)
    # a "fio" whose parent exits at once: an orphan, as a killed run leaves it
    wait = f"{sys.executable} -c 'import time; time.sleep(300)'"
    subprocess.run(["bash", "-c", f"(exec -a fio {wait} --output={raw}/x.json &)"], cwd=tmp_path, check=True)
    by_hand = subprocess.Popen(["bash", "-c", f"exec -a fio {wait}"], cwd=tmp_path)  # a user's own fio stays
    # a fio working in the folder whose output goes elsewhere (a test's or a bench's, its parent alive or not) stays:
    # `make study` in a checkout killed such a test's fio
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere" / "point.raw"
    subprocess.run(["bash", "-c", f"(exec -a fio {wait} --output={elsewhere}/x.json &)"], cwd=tmp_path, check=True)
    try:
        deadline = time.time() + 10
        while not orphaned_tools(tmp_path) and time.time() < deadline:
            time.sleep(0.1)
        orphans = orphaned_tools(tmp_path)
        assert [p.cmdline()[0] for p in orphans] == ["fio"] and by_hand.pid not in {p.pid for p in orphans}
        assert remove_stale_lock(tmp_path, []) == "no lock"
        psutil.wait_procs(orphans, timeout=10)
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in orphans)
        assert by_hand.poll() is None
        left = writing_to(elsewhere)
        assert left and all(p.is_running() for p in left)
    finally:
        for proc in writing_to(elsewhere):
            proc.kill()
        by_hand.kill()
        by_hand.wait()


def test_this_process_and_its_parents_are_its_ancestors():
    own = _ancestors(os.getpid())
    assert {os.getpid(), os.getppid()} <= own
    assert 999_999_999 in _ancestors(999_999_999)  # a process gone: itself only, no error


def test_a_workflow_process_working_in_the_folder_is_live(tmp_path):
    inside = tmp_path / "sub"
    inside.mkdir()
    sleep = ["-c", "import time; time.sleep(60)"]
    # argv[0] "snakemake", as the workflow's own processes are named; a plain python working there is not one
    workflow = subprocess.Popen(["snakemake", *sleep], executable=sys.executable, cwd=inside)
    other = subprocess.Popen([sys.executable, *sleep], cwd=tmp_path)
    elsewhere = subprocess.Popen(["snakemake", *sleep], executable=sys.executable, cwd=tmp_path.parent)
    try:
        deadline = time.monotonic() + 10
        while not live_processes(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live_processes(tmp_path) == [(workflow.pid, f"snakemake {' '.join(sleep)}")]
    finally:
        for proc in (workflow, other, elsewhere):
            proc.kill()
            proc.wait()
    assert live_processes(tmp_path) == []
